// A record folder -> the page's data (run-view.ts). Files are read once each, in the order of
// what a reviewer reads first (outcome, prompt, result, changes, then the turns, then the model
// traffic), so that when the page's size budget runs out it is the model traffic's bodies that
// get cut. Any field may be missing, malformed or unknown: records of older and newer versions,
// failed runs and hand-made folders all make a page, with what is missing said.
import { RECORD_FILES, RECORD_FORMAT } from "../record/record-format.js";
import { jsonDepth } from "../replay/load-record.js";
import { compact, EventDigest, pretty } from "./event-digest.js";
import { addBodies, exchangeView } from "./exchange-view.js";
import { patchView } from "./patch-view.js";
import { type KeptFile, MAX_LINE_BYTES, RecordReader } from "./record-reader.js";
import type {
  ChangesView,
  ExchangeView,
  Fact,
  OutcomeView,
  ResultView,
  RunView,
  Shown,
  TimelineView,
  TurnView,
} from "./run-view.js";
import { checkResult } from "./schema-check.js";
import { CAPS, FRAME, PAGE_OUTLINE_BYTES, TextBudget } from "./text-budget.js";

/** The model traffic's bodies have a budget of their own, so they never crowd out the rest. */
const PAGE_BODY_BYTES = 4 * 1024 * 1024;
/**
 * The header's short texts (facts, record notes, integrity problems, meta's other keys, secrets)
 * have a pool of their own, drawn after the events but read first.
 */
const PAGE_HEADER_BYTES = 256 * 1024;
const JSON_FILE_CAP = 4 * 1024 * 1024;
/** Deeper JSON is not parsed: what reads it next (stringify, the schema check) would overflow the stack. */
const JSON_MAX_DEPTH = 256;
const MAX_LOOSE_EXCHANGES = 500;
const MAX_LISTED_FILES = 2_000;
const DEFAULT_FINAL_TOOL = "sandbox_run_final_result";
/** meta.json fields drawn among the facts (or elsewhere on the page); the rest are listed as they are. */
const SHOWN_META = new Set([
  "format",
  "versions",
  "exitCode",
  "turns",
  "toolCalls",
  "usage",
  "runId",
  "model",
  "piVersion",
  "policy",
  "image",
  "containerId",
  "durationMs",
  "changedFiles",
  "ok",
  "startedAt",
  "finishedAt",
  "workspace",
  "promptSha256",
  "schemaSha256",
  "modelTraffic",
  "recordNotes",
  "warm",
  "handBack",
  "branch",
  "commit",
  "code",
  "result",
]);

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const num = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) ? value : undefined;
const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined);

interface BuildOptions {
  /** "sandbox-run x.y.z". */
  madeBy: string;
  /** The record as the caller named it (shown on the page). */
  shownAs?: string;
  textBytes?: number;
  bodyBytes?: number;
  /** The pools of text-budget.ts (previews, the outline) and the header's, when not the page's. */
  previewBytes?: number;
  outlineBytes?: number;
  headerBytes?: number;
}

interface BuiltView {
  view: RunView;
  /**
   * The trees the recorded run lent its sandbox (workspace, extra writable roots), as the record
   * says: the page is never written inside one (the sandbox may have left links there).
   */
  heldTrees: string[];
}

export async function buildRunView(dir: string, options: BuildOptions): Promise<BuiltView> {
  const reader = RecordReader.open(dir);
  try {
    return await build(reader, options);
  } finally {
    reader.close();
  }
}

async function build(reader: RecordReader, options: BuildOptions): Promise<BuiltView> {
  const budget = new TextBudget(options.textBytes, options.previewBytes, options.outlineBytes);
  const bodies = new TextBudget(options.bodyBytes ?? PAGE_BODY_BYTES, 0, 0);
  const header = new TextBudget(0, 0, options.headerBytes ?? PAGE_HEADER_BYTES);
  const pageNotes: string[] = [];
  /** Why a JSON file the record has is not shown, by name. */
  const unread = new Map<string, string>();
  const jsonFile = (name: string): unknown => {
    const file = reader.file(name, JSON_FILE_CAP);
    if (!file) return undefined;
    const why =
      file.omittedBytes > 0
        ? `is larger than ${JSON_FILE_CAP / 1024 / 1024} MiB: not read`
        : jsonDepth(file.text, JSON_MAX_DEPTH) > JSON_MAX_DEPTH
          ? `nests deeper than ${JSON_MAX_DEPTH} levels: not shown`
          : undefined;
    if (why === undefined) {
      try {
        return JSON.parse(file.text) as unknown;
      } catch {
        // not JSON: said below
      }
    }
    const said = `${name} ${why ?? "is not valid JSON: not shown"}`;
    unread.set(name, said);
    pageNotes.push(`${said}.`);
    return undefined;
  };
  const cutNote = (name: string, file: KeptFile | undefined) => {
    if (file && file.omittedBytes > 0) {
      pageNotes.push(
        `${name}: only its first ${mib(file.text.length)} are read; ${mib(file.omittedBytes)} more are in the file.`,
      );
    }
  };

  const meta = asObject(jsonFile(RECORD_FILES.meta));
  // Readers refuse formats they do not know (record-format.ts): replay does; a page can still show
  // what it reads, but says so first (review, session 33: it showed one as any other run).
  const writtenBy = isObject(meta?.versions) ? meta.versions.sandboxRun : undefined;
  const newerFormat =
    typeof meta?.format === "number" && meta.format > RECORD_FORMAT
      ? TextBudget.line(
          `This record has format ${meta.format}, newer than this sandbox-run reads (${RECORD_FORMAT}); it was written by sandbox-run ${typeof writtenBy === "string" ? writtenBy : "?"}. What this page shows may be incomplete or misread: show it with that version or a newer one.`,
        )
      : undefined;
  const policy = asObject(jsonFile(RECORD_FILES.policy));
  const plan = asObject(jsonFile(RECORD_FILES.plan));
  const call = asObject(jsonFile(RECORD_FILES.call));
  const errorJson = asObject(jsonFile(RECORD_FILES.error));
  const hasResult = reader.has(RECORD_FILES.result);
  const result = hasResult ? jsonFile(RECORD_FILES.result) : undefined;
  const schema = reader.has(RECORD_FILES.schema) ? jsonFile(RECORD_FILES.schema) : undefined;

  const outcome = outcomeOf(meta, errorJson, hasResult, budget);
  const promptFile = reader.file(RECORD_FILES.prompt);
  const prompt = promptFile ? budget.take(promptFile.text, CAPS.prompt) : undefined;

  const resultView: ResultView | undefined =
    hasResult && outcome.state !== "failed"
      ? {
          kind: typeof result === "string" ? "text" : "structured",
          value: budget.take(unread.get(RECORD_FILES.result) ?? pretty(result ?? null), CAPS.result),
          ...(schema !== undefined ? { schema: budget.take(pretty(schema), CAPS.schema) } : {}),
          check:
            unread.has(RECORD_FILES.result) || unread.has(RECORD_FILES.schema)
              ? { state: "not-checked", detail: (unread.get(RECORD_FILES.result) ?? unread.get(RECORD_FILES.schema))! }
              : { state: schema === undefined || typeof result === "string" ? "no-schema" : "not-checked" },
        }
      : undefined;

  const patchFile = reader.file(RECORD_FILES.patch);
  cutNote(RECORD_FILES.patch, patchFile);
  const notesFile = reader.file("changes-notes.txt", 256 * 1024);
  const changes = {
    ...(patchFile ? patchView(patchFile.text, budget) : { files: [], omittedFiles: [], totalFiles: 0 }),
    missing: !patchFile,
    ...(notesFile ? { notes: budget.take(notesFile.text, CAPS.errorText) } : {}),
  };
  const changedFiles = changedFilesOf(meta?.changedFiles, budget);
  if (changedFiles) Object.assign(changes, { changedFiles });

  // The turns, and the decisions, from the event timeline.
  const digest = new EventDigest(budget, str(plan?.finalToolName) ?? DEFAULT_FINAL_TOOL);
  let longLines = 0;
  const hadEvents = reader.lines(RECORD_FILES.events, {
    line: (text) => digest.line(text),
    tooLong: () => void longLines++,
  });
  if (!hadEvents) pageNotes.push(`The record has no readable ${RECORD_FILES.events}: no turns or decisions to show.`);
  if (digest.unreadable > 0)
    pageNotes.push(`${digest.unreadable} lines of ${RECORD_FILES.events} are not events: not shown.`);
  if (longLines > 0) {
    pageNotes.push(
      `${longLines} lines of the record are longer than ${MAX_LINE_BYTES / 1024 / 1024} MiB or hold more than 2,000,000 JSON values: not shown.`,
    );
  }
  if (digest.droppedTurns > 0) {
    pageNotes.push(
      `Only the first ${digest.turns.length} turns are drawn (${digest.droppedTurns} more; at most 10,000, and as many as the page's outline holds).`,
    );
  }
  if (digest.droppedTools > 0) {
    pageNotes.push(
      `${digest.droppedTools} tool calls are not drawn (past 500 in one turn, or past what the page's outline holds).`,
    );
  }

  // The model traffic: each exchange under the turn it belongs to.
  const looseExchanges: ExchangeView[] = [];
  const turnsByIndex = new Map(digest.turns.map((t) => [t.index, t]));
  let droppedExchanges = 0;
  const hadExchanges = reader.lines(RECORD_FILES.exchanges, {
    line: (text) => {
      if (text.trim() === "") return;
      let line: unknown;
      try {
        line = JSON.parse(text);
      } catch {
        longLines++;
        return;
      }
      if (!isObject(line) || typeof line.seq !== "number") return;
      const seen = digest.exchangeTurns.get(line.seq);
      const turn = seen?.turn !== undefined ? turnsByIndex.get(seen.turn) : undefined;
      const list =
        turn && turn.exchanges.length < 50
          ? turn.exchanges
          : looseExchanges.length < MAX_LOOSE_EXCHANGES
            ? looseExchanges
            : undefined;
      const view = list && exchangeView(line, budget, TextBudget.label(seen?.chain));
      if (!list || !view) {
        droppedExchanges++;
        return;
      }
      addBodies(view, line, bodies);
      if (seen) view.endMs = seen.timeMs;
      list.push(view);
    },
    tooLong: () => void longLines++,
  });
  if (!hadExchanges && reader.has(RECORD_FILES.meta)) {
    pageNotes.push(
      `The record has no ${RECORD_FILES.exchanges} (a format 1 record, or it could not be written): the model traffic is not shown.`,
    );
  }
  if (droppedExchanges > 0) {
    pageNotes.push(
      `${droppedExchanges} further model exchanges are not drawn (past the caps, or what the page's outline holds).`,
    );
  }
  looseExchanges.sort((a, b) => a.seq - b.seq);
  if (bodies.starved > 0) {
    pageNotes.push(
      `The model traffic's bodies take at most ${mib(options.bodyBytes ?? PAGE_BODY_BYTES)} of this page: ${bodies.starved} bodies are cut short (whole in ${RECORD_FILES.exchanges}).`,
    );
  }

  if (resultView && resultView.check.state === "not-checked" && isObject(result)) {
    const check = await checkResult(schema, result);
    resultView.check = check.detail ? { ...check, detail: TextBudget.line(check.detail) } : check;
  }

  const otherEvents = [...digest.otherEvents.values()].map((e) => ({
    timeMs: e.timeMs,
    type: e.type,
    count: e.count,
    data: budget.take(pretty(e.data), CAPS.eventData),
  }));
  // The header's short texts, in the order they are read; each charged to the header's pool.
  const facts = factsOf({ meta, policy, plan, call, digest }).filter((f) =>
    header.admit(FRAME.entry, f.label, f.value, f.note),
  );
  const recordNotes = (Array.isArray(meta?.recordNotes) ? meta.recordNotes : [])
    .slice(0, 100)
    .map((n) => TextBudget.line(n))
    .filter((n) => header.admit(FRAME.part, n));
  const integrity = reader.integrity();
  const problems = integrity.problems.map((p) => TextBudget.line(p)).filter((p) => header.admit(FRAME.part, p));
  const otherMeta = Object.entries(meta ?? {})
    .filter(([key]) => !SHOWN_META.has(key))
    .slice(0, 100)
    .filter(([key]) => header.admit(FRAME.entry, TextBudget.label(key)))
    .map(([key, value]) => ({ key: TextBudget.label(key), value: budget.take(pretty(value), CAPS.eventData) }));
  const decisions = digest.decisions;
  decisions.secrets = secretsOf(policy, digest.injectedSecrets(), header);
  const timeline = timelineOf(digest, budget);

  if (budget.starved > 0) {
    pageNotes.push(
      `This page holds at most ${mib(options.textBytes ?? 16 * 1024 * 1024)} of the record's text: ${budget.starved} texts are cut short or left out (each cut is marked; the record's files hold everything).`,
    );
  }

  if (budget.undrawn + header.undrawn > 0) {
    pageNotes.push(
      `This page draws at most ${mib(options.outlineBytes ?? PAGE_OUTLINE_BYTES)} of turns, tool calls, timeline spans, exchanges, files and decisions (their names and one-line texts): ${budget.undrawn + header.undrawn} more are not drawn (the record's files hold everything).`,
    );
  }

  const heldTrees = [
    meta?.workspace,
    isObject(call?.workspace) ? call.workspace.host : undefined,
    ...(Array.isArray(call?.writableRoots) ? call.writableRoots : []),
  ].filter((tree): tree is string => typeof tree === "string" && tree.startsWith("/"));
  const view: RunView = {
    view: 1,
    madeBy: options.madeBy,
    record: TextBudget.line(options.shownAs ?? reader.dir),
    integrity: { ...integrity, problems },
    ...(newerFormat ? { newerFormat } : {}),
    outcome,
    facts,
    recordNotes,
    pageNotes,
    ...(prompt ? { prompt } : {}),
    timeline,
    turns: digest.turns,
    looseExchanges,
    decisions,
    changes,
    ...(resultView ? { result: resultView } : {}),
    otherEvents,
    otherMeta,
  };
  return { view, heldTrees: [...new Set(heldTrees)].slice(0, 100) };
}

function asObject(value: unknown): Json | undefined {
  return isObject(value) ? value : undefined;
}

function mib(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MiB` : `${Math.ceil(bytes / 1024)} KiB`;
}

function outcomeOf(
  meta: Json | undefined,
  error: Json | undefined,
  hasResult: boolean,
  budget: TextBudget,
): OutcomeView {
  const ok = typeof meta?.ok === "boolean" ? meta.ok : error ? false : hasResult ? true : undefined;
  if (ok === undefined) return { state: "unknown" };
  if (ok) return { state: "ok" };
  const e = error ?? {};
  const text = (value: unknown, cap: number): Shown | undefined =>
    typeof value === "string" && value !== "" ? budget.take(value, cap) : undefined;
  const message = text(e.message, CAPS.errorText) ?? { text: "(error.json is missing or has no message)" };
  const hint = text(e.hint, CAPS.errorText);
  const stderrTail = text(e.stderrTail, CAPS.errorText);
  return {
    state: "failed",
    error: {
      code: TextBudget.label(e.code ?? meta?.code ?? "unknown"),
      message,
      ...(hint ? { hint } : {}),
      ...(e.limit !== undefined && e.limit !== null ? { limit: TextBudget.label(e.limit) } : {}),
      ...(e.exitCode !== undefined && e.exitCode !== null ? { exitCode: TextBudget.label(e.exitCode) } : {}),
      ...(stderrTail ? { stderrTail } : {}),
    },
  };
}

function changedFilesOf(value: unknown, budget: TextBudget): ChangesView["changedFiles"] {
  if (!isObject(value)) return undefined;
  const list = (v: unknown) =>
    (Array.isArray(v) ? v : [])
      .slice(0, MAX_LISTED_FILES)
      .map((n) => TextBudget.line(n))
      .filter((n) => budget.admit(FRAME.part, n));
  // The run's own counts where it cut its lists (meta's `truncated`), never fewer than it names.
  const truncated = isObject(value.truncated) ? value.truncated : {};
  const count = (kind: "created" | "modified" | "deleted") => {
    const named = Array.isArray(value[kind]) ? (value[kind] as unknown[]).length : 0;
    const said = truncated[kind];
    return typeof said === "number" && Number.isSafeInteger(said) && said > named ? said : named;
  };
  return {
    created: list(value.created),
    modified: list(value.modified),
    deleted: list(value.deleted),
    counts: { created: count("created"), modified: count("modified"), deleted: count("deleted") },
  };
}

function secretsOf(
  policy: Json | undefined,
  injected: Map<string, number>,
  budget: TextBudget,
): RunView["decisions"]["secrets"] {
  const secrets: RunView["decisions"]["secrets"] = [];
  const declared = isObject(policy?.secrets) ? policy.secrets : {};
  for (const [key, secret] of Object.entries(declared).slice(0, 100)) {
    const name = TextBudget.label(key);
    if (!budget.admit(FRAME.entry, name)) continue;
    const hosts = (isObject(secret) && Array.isArray(secret.hosts) ? secret.hosts.slice(0, 50) : [])
      .map((h) => TextBudget.label(h))
      .filter((h) => budget.admit(FRAME.part, h));
    secrets.push({ name, hosts, injected: injected.get(name) ?? 0 });
  }
  for (const [name, count] of injected) {
    if (!secrets.some((s) => s.name === name) && budget.admit(FRAME.entry, name))
      secrets.push({ name, hosts: [], injected: count });
  }
  return secrets;
}

interface FactSources {
  meta: Json | undefined;
  policy: Json | undefined;
  plan: Json | undefined;
  call: Json | undefined;
  digest: EventDigest;
}

function factsOf({ meta, policy, plan, call, digest }: FactSources): Fact[] {
  const facts: Fact[] = [];
  const add = (label: string, value: unknown, note?: unknown) => {
    if (value === undefined || value === null || value === "") return;
    facts.push({
      label,
      value: TextBudget.line(typeof value === "string" ? value : compact(value)),
      ...(note !== undefined && note !== null && note !== "" ? { note: TextBudget.line(note) } : {}),
    });
  };
  const seen = digest.facts;
  add("run", meta?.runId ?? plan?.runId);
  add("model", meta?.model ?? call?.model ?? seen.model ?? plan?.model);
  const policyName = meta?.policy ?? policy?.name ?? seen.policy;
  add("policy", policyName, str(policy?.description));
  add(
    "runtime",
    plan?.runtime ?? seen.runtime ?? policy?.runtime,
    seen.runtime === "runsc" || plan?.runtime === "runsc" ? "gVisor" : undefined,
  );
  // Which platform the sandbox ran: under emulation (another architecture through the engine's
  // qemu) a run is slower and copy mode, and a replay elsewhere must ask for the same one.
  add("platform", plan?.platform);
  add("engine", seen.engine, seen.address);
  const mode = str(plan?.workspaceMode) ?? str(policy?.workspaceMode);
  add(
    "workspace",
    meta?.workspace ?? (isObject(call?.workspace) ? call.workspace.host : undefined),
    mode ? `${mode} mode` : undefined,
  );
  add("warm or cold", warmOf(meta?.warm));
  const handBack = handBackOf(meta);
  if (handBack) add("hand-back", handBack);
  add(
    "network",
    policy?.network,
    Array.isArray(policy?.allowedDomains) && policy.allowedDomains.length > 0
      ? `allowed: ${policy.allowedDomains.slice(0, 20).join(", ")}`
      : undefined,
  );
  const duration = num(meta?.durationMs) ?? durationOf(meta) ?? digest.marks.last;
  add("duration", duration !== undefined ? seconds(duration) : undefined);
  const turns = num(meta?.turns) ?? (digest.turns.length > 0 ? digest.turns.length : undefined);
  const toolCalls = num(meta?.toolCalls) ?? digest.turns.reduce((n, t) => n + t.tools.length, 0);
  add("turns", turns !== undefined ? `${turns} (${toolCalls} tool calls)` : undefined);
  const usage = isObject(meta?.usage) ? meta.usage : undefined;
  if (usage) {
    const parts = [`${num(usage.input) ?? 0} in`, `${num(usage.output) ?? 0} out`];
    if (num(usage.cacheRead)) parts.push(`${usage.cacheRead} cache read`);
    if (num(usage.cacheWrite)) parts.push(`${usage.cacheWrite} cache write`);
    add("tokens", `${num(usage.totalTokens) ?? (num(usage.input) ?? 0) + (num(usage.output) ?? 0)}`, parts.join(", "));
    add("cost", `$${(num(usage.cost) ?? (isObject(usage.cost) ? num(usage.cost.total) : 0) ?? 0).toFixed(4)}`);
  } else if (digest.usage.seen) {
    add(
      "tokens",
      `${digest.usage.input + digest.usage.output}`,
      `${digest.usage.input} in, ${digest.usage.output} out (from Pi's events)`,
    );
    add("cost", `$${digest.usage.costUsd.toFixed(4)}`);
  }
  add("image", meta?.image ?? plan?.image ?? seen.image);
  const versions = isObject(meta?.versions) ? meta.versions : undefined;
  if (versions)
    add(
      "versions",
      `sandbox-run ${versions.sandboxRun ?? "?"}, Pi ${versions.pi ?? "?"}, Node ${versions.node ?? "?"}`,
    );
  add(
    "started",
    meta?.startedAt,
    meta?.finishedAt !== undefined ? `finished ${TextBudget.label(meta.finishedAt)}` : undefined,
  );
  const exit = isObject(seen.containerExit) ? seen.containerExit : undefined;
  add(
    "exit code",
    meta?.exitCode ?? exit?.exitCode,
    exit?.stoppedByHost === true
      ? "stopped by the host after Pi's last event"
      : exit?.oomKilled === true
        ? "out of memory"
        : undefined,
  );
  const traffic = isObject(meta?.modelTraffic) ? meta.modelTraffic : undefined;
  if (traffic) {
    const extra = [
      num(traffic.omitted) ? `${traffic.omitted} without bytes` : "",
      num(traffic.truncated) ? `${traffic.truncated} cut` : "",
      num(traffic.scrubbed) ? `${traffic.scrubbed} had a credential removed` : "",
    ].filter(Boolean);
    add(
      "model traffic",
      `${num(traffic.exchanges) ?? 0} exchanges, ${Math.round((num(traffic.bytes) ?? 0) / 1024)} KiB`,
      extra.join(", "),
    );
  }
  add("record format", meta?.format ?? (meta ? 1 : undefined));
  return facts;
}

function warmOf(warm: unknown): string {
  if (warm === undefined) return "not recorded";
  if (warm === true) return "warm (a pre-started container)";
  if (warm === false) return "cold (a container started for this run)";
  if (isObject(warm) && typeof warm.warm === "boolean")
    return `${warmOf(warm.warm)} ${compact({ ...warm, warm: undefined })}`;
  return compact(warm);
}

function handBackOf(meta: Json | undefined): string | undefined {
  const value = meta?.handBack;
  const parts: string[] = [];
  if (typeof value === "string") parts.push(value);
  else if (isObject(value)) {
    if (typeof value.mode === "string") parts.push(value.mode);
    for (const key of ["branch", "commit"]) if (typeof value[key] === "string") parts.push(`${key} ${value[key]}`);
    if (parts.length === 0) parts.push(compact(value));
  }
  for (const key of ["branch", "commit"]) if (typeof meta?.[key] === "string") parts.push(`${key} ${meta[key]}`);
  return parts.length > 0 ? parts.join(", ") : undefined;
}

function durationOf(meta: Json | undefined): number | undefined {
  const start = Date.parse(str(meta?.startedAt) ?? "");
  const end = Date.parse(str(meta?.finishedAt) ?? "");
  return Number.isFinite(start) && Number.isFinite(end) && end >= start ? end - start : undefined;
}

function seconds(ms: number): string {
  return ms < 10_000
    ? `${(ms / 1000).toFixed(2)} s`
    : ms < 600_000
      ? `${(ms / 1000).toFixed(1)} s`
      : `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** The timeline's rows; each turn's and tool's span charged to the page's outline (past it: not drawn). */
function timelineOf(digest: EventDigest, budget: TextBudget): TimelineView {
  const m = digest.marks;
  const turns = digest.turns;
  const firstTurn = turns[0]?.startMs;
  const lastTurnEnd = turns.length > 0 ? (turns[turns.length - 1]!.endMs ?? m.agentSettled) : undefined;
  const end = m.last ?? 0;
  const phases: TimelineView["rows"][number]["spans"] = [];
  const phase = (label: string, start: number | undefined, stop: number | undefined) => {
    if (start !== undefined && stop !== undefined && stop >= start)
      phases.push({ startMs: start, endMs: stop, label, kind: "phase" });
  };
  phase("set-up", 0, m.containerCreated ?? m.containerStarted);
  phase("container start", m.containerCreated, m.containerStarted);
  phase("Pi start-up", m.containerStarted, firstTurn ?? m.piFirst);
  phase("agent", firstTurn, m.agentSettled ?? lastTurnEnd);
  phase("exit", m.agentSettled ?? lastTurnEnd, m.containerExited);
  phase("hand-back", m.containerExited, m.containerRemoved ?? end);
  const rows: TimelineView["rows"] = [{ name: "phases", spans: phases }];
  rows.push({
    name: "turns",
    spans: turns
      .map((t: TurnView, i) => ({
        startMs: t.startMs,
        endMs: t.endMs ?? turns[i + 1]?.startMs ?? end,
        label: `turn ${t.index}`,
        kind: "turn" as const,
      }))
      .filter((span) => budget.admit(FRAME.span, span.label)),
  });
  rows.push({ name: "model", spans: digest.modelSpans.map((s) => ({ ...s, kind: "model" as const })) });
  rows.push({
    name: "tools",
    spans: turns.flatMap((t) =>
      t.tools
        .filter((tool) => tool.startMs !== undefined)
        .map((tool) => ({
          startMs: tool.startMs!,
          endMs: tool.endMs ?? tool.startMs!,
          label: `${tool.name}: ${tool.summary}`,
          kind: tool.isError ? ("tool-error" as const) : ("tool" as const),
        }))
        .filter((span) => budget.admit(FRAME.span, span.label)),
    ),
  });
  if (digest.failedAtMs !== undefined) {
    const failed = isObject(digest.facts.failed) ? digest.facts.failed : {};
    rows.push({
      name: "failure",
      spans: [
        {
          startMs: digest.failedAtMs,
          endMs: digest.failedAtMs,
          label: TextBudget.line(
            `${failed.code ?? "stopped"}${failed.limit ? ` (${failed.limit})` : ""}: ${failed.message ?? ""}`,
          ),
          kind: "failure",
        },
      ],
    });
  }
  return { totalMs: Math.max(end, 1), rows: rows.filter((r) => r.spans.length > 0) };
}
