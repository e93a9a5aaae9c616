// Reduces events.jsonl, one event at a time, to what the page shows: the turns (the model's text,
// each tool call with its arguments and output), the phases for the timeline, and the decisions
// (gateway refusals, egress by host, secrets injected, violations, limits). Only the reduced,
// capped form is kept, so the events file can be of any length. Streamed updates (message_update,
// tool_execution_update) and Pi's end-of-run copies of the conversation (turn_end, agent_end) hold
// nothing the final events do not, and are skipped before they are parsed.

import { addReported, reportedCount } from "../util/reported-count.js";
import type { DecisionsView, EgressHostView, ToolView, TurnView } from "./run-view.js";
import { CAPS, FRAME, TextBudget } from "./text-budget.js";

const MAX_TURNS = 10_000;
const MAX_TOOLS_PER_TURN = 500;
const MAX_LISTED = 500;
/** The outline the host's warnings have to themselves (a host-run files' warning is one line of CAPS.line at most). */
const WARNING_OUTLINE_BYTES = 256 * 1024;
const MAX_OTHER_TYPES = 200;
// Anchored on the envelope as the recorder writes it, so only Pi's own events of these types match.
const SKIPPED =
  /^\{"runId":"[^"\\]*","seq":\d+,"time":(\d+(?:\.\d+)?),"source":"pi","type":"(message_update|tool_execution_update|turn_end|agent_end|message_start)"/;

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const num = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) ? value : undefined;
const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined);

/** The times (ms since the run started) of the events that bound the run's phases. */
interface PhaseMarks {
  first?: number;
  last?: number;
  containerCreated?: number;
  containerStarted?: number;
  piFirst?: number;
  agentSettled?: number;
  containerExited?: number;
  containerRemoved?: number;
}

export class EventDigest {
  readonly turns: TurnView[] = [];
  readonly marks: PhaseMarks = {};
  /** What run.planned, engine.chosen and container.exited said (facts for the header). */
  readonly facts: Json = {};
  /** A generation exchange's seq -> the turn (index) running when it ended, and its time. */
  readonly exchangeTurns = new Map<number, { turn?: number; timeMs: number; chain?: string }>();
  readonly modelSpans: Array<{ startMs: number; endMs: number; label: string }> = [];
  readonly decisions: DecisionsView = {
    gateway: { requests: 0, refused: 0, bytesUp: 0, bytesDown: 0 },
    refusals: [],
    egress: [],
    secrets: [],
    violations: [],
    violationCount: 0,
    handBack: [],
    limits: [],
    contradictions: [],
    invalidRecords: { count: 0, previews: [] },
    warnings: [],
    replay: [],
  };
  readonly otherEvents = new Map<string, { timeMs: number; type: string; data: unknown; count: number }>();
  /** Events that could not be read, by line. */
  unreadable = 0;
  /** Turns and tool calls not drawn: past their caps, or past the page's outline (TextBudget.admit). */
  droppedTurns = 0;
  droppedTools = 0;
  failedAtMs?: number;
  usage = { input: 0, output: 0, costUsd: 0, seen: false };

  private readonly refusals = new Map<string, DecisionsView["refusals"][number]>();
  private readonly egress = new Map<string, EgressHostView>();
  private readonly injected = new Map<string, number>();
  private readonly tools = new Map<string, ToolView>();
  private current: TurnView | undefined;
  /**
   * The host's warnings draw on an outline of their own: Pi's events (which the sandbox can forge,
   * writing to the launcher's stdout) used up the shared one before the host-run files' warning
   * came, and the page and the summary lost it (second fix review, round 3, session 41).
   */
  private readonly warningBudget = new TextBudget(0, 0, WARNING_OUTLINE_BYTES);

  constructor(
    private readonly budget: TextBudget,
    private readonly finalTool: string,
  ) {}

  /** One line of events.jsonl. */
  line(text: string): void {
    if (text.trim() === "") return;
    // Cheap test on the envelope's start: these carry copies of what other events have.
    const skipped = SKIPPED.exec(text.slice(0, 300));
    if (skipped) {
      const time = Number(skipped[1]);
      this.marks.last = Math.max(this.marks.last ?? time, time);
      if (skipped[2] === "turn_end" && this.current) this.current.endMs = time;
      return;
    }
    let event: unknown;
    try {
      event = JSON.parse(text);
    } catch {
      this.unreadable++;
      return;
    }
    if (!isObject(event) || typeof event.type !== "string" || !isObject(event.data)) {
      this.unreadable++;
      return;
    }
    const time = num(event.time) ?? this.marks.last ?? 0;
    this.marks.first ??= time;
    this.marks.last = Math.max(this.marks.last ?? time, time);
    if (event.source === "pi") this.pi(event.type, event.data, time);
    else this.sandbox(event.type, event.data, time);
  }

  private pi(type: string, data: Json, time: number): void {
    this.marks.piFirst ??= time;
    switch (type) {
      case "turn_start":
        this.startTurn(time);
        return;
      case "message_end":
        this.message(data.message, time);
        return;
      case "tool_execution_start":
        this.toolStart(data, time);
        return;
      case "tool_execution_end":
        this.toolEnd(data, time);
        return;
      case "agent_settled":
        this.marks.agentSettled = time;
        if (this.current && this.current.endMs === undefined) this.current.endMs = time;
        return;
      case "session":
      case "agent_start":
        return;
      default:
        this.other(`pi: ${type}`, data, time);
    }
  }

  private startTurn(time: number): TurnView | undefined {
    if (this.current && this.current.endMs === undefined) this.current.endMs = time;
    if (this.turns.length >= MAX_TURNS || !this.budget.admit(FRAME.turn)) {
      this.droppedTurns++;
      this.current = undefined;
      return undefined;
    }
    this.current = { index: this.turns.length + 1 + this.droppedTurns, startMs: time, tools: [], exchanges: [] };
    this.turns.push(this.current);
    return this.current;
  }

  private turn(time: number): TurnView | undefined {
    return this.current ?? (this.turns.length === 0 ? this.startTurn(time) : undefined);
  }

  private message(message: unknown, time: number): void {
    if (!isObject(message) || message.role !== "assistant") return;
    const turn = this.turn(time);
    if (!turn) return;
    const texts: string[] = [];
    const thinking: string[] = [];
    for (const part of Array.isArray(message.content) ? message.content : []) {
      if (!isObject(part)) continue;
      if (part.type === "text" && typeof part.text === "string") texts.push(part.text);
      else if (part.type === "thinking" && typeof part.thinking === "string") thinking.push(part.thinking);
      else if (part.type === "toolCall") this.toolCall(turn, part.id, part.name, part.arguments);
    }
    if (texts.length > 0) turn.text = this.budget.take(texts.join("\n\n"), CAPS.modelText);
    if (thinking.length > 0) turn.thinking = this.budget.take(thinking.join("\n\n"), CAPS.modelText);
    const stop = str(message.stopReason);
    if (stop && this.budget.admit(FRAME.part, TextBudget.label(stop))) turn.stopReason = TextBudget.label(stop);
    const error = str(message.errorMessage);
    if (error) turn.error = this.budget.take(error, CAPS.errorText);
    if (isObject(message.usage)) {
      // Pi's report, which the sandbox can write: no negative or unbounded count (util/reported-count.ts).
      const count = (value: unknown) => {
        const n = num(value);
        return n === undefined ? undefined : reportedCount(n);
      };
      const cost = isObject(message.usage.cost) ? count(message.usage.cost.total) : count(message.usage.cost);
      turn.usage = { input: count(message.usage.input), output: count(message.usage.output), costUsd: cost };
      this.usage.input = addReported(this.usage.input, turn.usage.input ?? 0);
      this.usage.output = addReported(this.usage.output, turn.usage.output ?? 0);
      this.usage.costUsd = addReported(this.usage.costUsd, cost ?? 0);
      this.usage.seen = true;
    }
  }

  private toolCall(turn: TurnView, id: unknown, name: unknown, args: unknown): ToolView | undefined {
    const key = TextBudget.label(id);
    const known = this.tools.get(key);
    if (known) return known;
    const toolName = TextBudget.label(name);
    const summary = summaryOf(toolName, args);
    if (turn.tools.length >= MAX_TOOLS_PER_TURN || !this.budget.admit(FRAME.tool, key, toolName, summary)) {
      this.droppedTools++;
      return undefined;
    }
    const tool: ToolView = {
      id: key,
      name: toolName,
      args: this.budget.take(pretty(args), CAPS.toolArgs),
      summary,
      ...(toolName === this.finalTool ? { final: true } : {}),
    };
    turn.tools.push(tool);
    this.tools.set(key, tool);
    if (this.tools.size > 50_000) this.tools.delete(this.tools.keys().next().value!);
    return tool;
  }

  private toolStart(data: Json, time: number): void {
    const turn = this.turn(time);
    if (!turn) return;
    const tool = this.toolCall(turn, data.toolCallId, data.toolName, data.args);
    if (tool) tool.startMs = time;
  }

  private toolEnd(data: Json, time: number): void {
    const tool = this.tools.get(TextBudget.label(data.toolCallId));
    if (!tool) return;
    tool.endMs = time;
    if (data.isError === true) tool.isError = true;
    const { text, other } = toolOutput(data.result);
    tool.output = this.budget.take(text, CAPS.toolOutput);
    const parts = other.filter((kind) => this.budget.admit(FRAME.part, kind));
    if (parts.length > 0) tool.otherParts = parts;
  }

  private sandbox(type: string, data: Json, time: number): void {
    const d = this.decisions;
    const repeated = 1 + (num(data.repeated) ?? 0);
    switch (type) {
      case "run.planned":
      case "engine.chosen":
        Object.assign(this.facts, pick(data, ["model", "policy", "image", "runtime", "engine", "address"]));
        return;
      case "container.created":
        this.marks.containerCreated ??= time;
        return;
      case "container.started":
        this.marks.containerStarted ??= time;
        return;
      case "container.exited":
        this.marks.containerExited ??= time;
        Object.assign(this.facts, { containerExit: pick(data, ["exitCode", "oomKilled", "stoppedByHost"]) });
        return;
      case "container.removed":
        this.marks.containerRemoved ??= time;
        return;
      case "gateway.request": {
        d.gateway.requests += repeated;
        d.gateway.bytesUp += num(data.requestBytes) ?? 0;
        d.gateway.bytesDown += num(data.responseBytes) ?? 0;
        const path = str(data.path) ?? "";
        const duration = num(data.durationMs);
        if (!path.startsWith("/__sandbox-run/") && duration !== undefined && this.modelSpans.length < MAX_TURNS) {
          const label = `${TextBudget.label(data.method)} ${TextBudget.label(path)} ${TextBudget.label(data.status)}`;
          if (this.budget.admit(FRAME.span, label))
            this.modelSpans.push({ startMs: Math.max(0, time - duration), endMs: time, label });
        }
        return;
      }
      case "gateway.refused":
        d.gateway.refused += repeated;
        this.refusal(data, repeated);
        return;
      case "gateway.exchange": {
        const seq = num(data.seq);
        if (seq !== undefined && this.exchangeTurns.size < 100_000) {
          const chain = str(data.chain);
          this.exchangeTurns.set(seq, {
            turn: this.current?.index,
            timeMs: time,
            ...(chain ? { chain: chain === "off" ? `off (${TextBudget.label(data.reason)})` : chain } : {}),
          });
        }
        return;
      }
      case "egress.allowed":
      case "egress.denied":
      case "egress.failed":
      case "egress.injected":
        this.egressDecision(type.slice("egress.".length), data, repeated);
        return;
      case "policy.violation":
        d.violationCount = Math.max(d.violationCount, num(data.count) ?? 0);
        for (const v of Array.isArray(data.protectedPaths) ? data.protectedPaths : []) {
          if (!isObject(v) || d.violations.length >= MAX_LISTED) continue;
          const violation = {
            path: TextBudget.line(v.path),
            change: TextBudget.label(v.change),
            ...(v.rule !== undefined ? { rule: TextBudget.label(v.rule) } : {}),
          };
          if (this.fits(violation.path, violation.change, violation.rule)) d.violations.push(violation);
        }
        d.violationCount = Math.max(d.violationCount, d.violations.length);
        if (isObject(data.restore)) d.restore = restoreOf(data.restore, this.budget);
        return;
      case "limit.tripped":
        this.failedAtMs ??= time;
        return void this.limit(data);
      case "run.failed":
        this.failedAtMs ??= time;
        this.facts.failed = pick(data, ["code", "message", "limit"]);
        if (data.limit !== undefined && !d.limits.some((l) => l.limit === data.limit)) this.limit(data);
        return;
      case "run.result":
        this.facts.resultKind = str(data.kind);
        return;
      case "result.contradicted":
        return void this.listed(d.contradictions, MAX_LISTED, TextBudget.line(data.message));
      case "pi.invalid-record":
        d.invalidRecords.count += repeated;
        return void this.listed(d.invalidRecords.previews, 20, TextBudget.line(data.preview));
      case "config.untrusted":
      case "image.stale":
      case "workspace.dead-apply":
        return void this.warned(TextBudget.line(data.warning));
      case "workspace.host-run-files": {
        // What the CLI's note says, on the page and in the summary a CI job or a pull request shows
        // (red-team review, round 3, session 41: a link to the runner's credentials was said only on
        // stderr); first, where a summary lists only the first few.
        const text = TextBudget.line(hostRunWarning(data));
        if (this.warningBudget.admit(FRAME.entry, text)) d.warnings.unshift(text);
        return;
      }
      case "engine.skipped":
      case "engine.queued":
      case "workspace.waiting":
      case "workspace.copy-mode":
        return void this.warned(`${type}: ${TextBudget.line(compact(data))}`);
      case "workspace.applied":
      case "workspace.not-applied":
      case "workspace.kept":
      case "workspace.still-lent":
        return void this.listed(d.handBack, MAX_LISTED, `${type}: ${TextBudget.line(compact(data))}`);
      case "replay.divergence":
      case "replay.context-differs": {
        const text = TextBudget.line(str(data.difference) ?? compact(data));
        if (d.replay.length < MAX_LISTED && this.fits(type, text)) d.replay.push({ type, text });
        return;
      }
      case "workspace.changed":
      case "image.build":
      case "workspace.copied-in":
      case "workspace.copying-out":
      case "workspace.copied-out":
        return;
      default:
        this.other(type, data, time);
    }
  }

  /** Room in the page's outline for one listed entry with these texts. */
  private fits(...texts: Array<string | undefined>): boolean {
    return this.budget.admit(FRAME.entry, ...texts);
  }

  /** A warning of the host's, while the warnings' own outline has room. */
  private warned(text: string): void {
    if (this.decisions.warnings.length < MAX_LISTED && this.warningBudget.admit(FRAME.entry, text))
      this.decisions.warnings.push(text);
  }

  /** `text` added to `list` while it has fewer than `max` entries and the outline has room. */
  private listed(list: string[], max: number, text: string): void {
    if (list.length < max && this.fits(text)) list.push(text);
  }

  private refusal(data: Json, count: number): void {
    const reason = TextBudget.label(data.reason ?? "refused");
    const method = TextBudget.label(data.method);
    const path = TextBudget.line(data.path);
    const key = `${reason}\0${method}\0${path}`;
    const known = this.refusals.get(key);
    if (known) known.count += count;
    else if (this.refusals.size < MAX_LISTED) {
      const entry = {
        reason,
        text: TextBudget.line(data.refused),
        method,
        path,
        status: TextBudget.label(data.status),
        count,
      };
      if (!this.fits(entry.reason, entry.text, entry.method, entry.path, entry.status)) return;
      this.refusals.set(key, entry);
      this.decisions.refusals.push(entry);
    }
  }

  private egressDecision(action: string, data: Json, count: number): void {
    const host = TextBudget.label(data.host);
    const port = TextBudget.label(data.port);
    const key = `${host}\0${port}`;
    let entry = this.egress.get(key);
    if (!entry) {
      if (this.egress.size >= MAX_LISTED || !this.fits(host, port)) return;
      entry = { host, port, allowed: 0, denied: 0, failed: 0, injected: 0, reasons: [], secrets: [] };
      this.egress.set(key, entry);
      this.decisions.egress.push(entry);
    }
    if (action === "allowed" || action === "denied" || action === "failed" || action === "injected")
      entry[action] += count;
    const reason = TextBudget.line(data.reason);
    if (action !== "allowed" && reason && entry.reasons.length < 10 && !entry.reasons.includes(reason)) {
      if (this.budget.admit(FRAME.part, reason)) entry.reasons.push(reason);
    }
    const secret = str(data.secret);
    if (action === "injected" && secret) {
      const name = TextBudget.label(secret);
      if (!entry.secrets.includes(name) && entry.secrets.length < 50 && this.budget.admit(FRAME.part, name))
        entry.secrets.push(name);
      this.injected.set(name, (this.injected.get(name) ?? 0) + count);
    }
  }

  private limit(data: Json): void {
    if (this.decisions.limits.length >= MAX_LISTED) return;
    const limit = {
      code: TextBudget.label(data.code),
      ...(data.limit !== undefined ? { limit: TextBudget.label(data.limit) } : {}),
      message: TextBudget.line(data.message),
    };
    if (this.fits(limit.code, limit.limit, limit.message)) this.decisions.limits.push(limit);
  }

  private other(type: string, data: Json, time: number): void {
    const key = TextBudget.label(type);
    const known = this.otherEvents.get(key);
    if (known) known.count++;
    else if (this.otherEvents.size < MAX_OTHER_TYPES && this.fits(key))
      this.otherEvents.set(key, { timeMs: time, type: key, data, count: 1 });
  }

  /** How often each secret was put into a request, by name. */
  injectedSecrets(): Map<string, number> {
    return this.injected;
  }
}

function pick(data: Json, keys: string[]): Json {
  const out: Json = {};
  for (const key of keys) if (data[key] !== undefined) out[key] = data[key];
  return out;
}

function restoreOf(restore: Json, budget: TextBudget): NonNullable<DecisionsView["restore"]> {
  const names = (value: unknown) =>
    (Array.isArray(value) ? value : [])
      .slice(0, MAX_LISTED)
      .map((v) => (isObject(v) ? `${TextBudget.line(v.path)}: ${TextBudget.line(v.why)}` : TextBudget.line(v)))
      .filter((name) => budget.admit(FRAME.part, name));
  return {
    reverted: names(restore.reverted),
    removed: names(restore.removed),
    modes: names(restore.modes),
    notRestored: names(restore.notRestored),
    // What the check after the restore still found (review, session 29: a page said "not restored:
    // 0" while the run's message named an entry left behind).
    remaining: names(
      (Array.isArray(restore.remaining) ? restore.remaining : []).map((v) =>
        isObject(v) ? { path: v.path, why: `still ${TextBudget.line(v.change) || "there"}` } : v,
      ),
    ),
    ...(typeof restore.clean === "boolean" ? { clean: restore.clean } : {}),
  };
}

/**
 * What is shown for a value JSON.stringify cannot write: one parsed from the record only fails by
 * nesting too deeply, and String() of such an array recurses as deep, so it is not tried.
 */
const UNWRITABLE = "(a value nested too deeply to show)";

/** JSON, pretty-printed; strings as they are. */
export function pretty(value: unknown): string {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return UNWRITABLE;
  }
}

export function compact(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return UNWRITABLE;
  }
}

/** One line that says what a tool call did: a bash command, a path, else its arguments. */
function summaryOf(name: string, args: unknown): string {
  let text: string;
  if (isObject(args)) {
    const first = name === "bash" ? args.command : (args.path ?? args.file_path ?? args.pattern);
    text = typeof first === "string" ? first : compact(args);
  } else text = typeof args === "string" ? args : compact(args);
  const lines = text.split("\n");
  const line = lines[0] ?? "";
  return TextBudget.label(lines.length > 1 ? `${line} …` : line);
}

/** A tool result's text parts, and what else it carried (images), by kind. */
function toolOutput(result: unknown): { text: string; other: string[] } {
  if (typeof result === "string") return { text: result, other: [] };
  const content = isObject(result) ? result.content : undefined;
  if (!Array.isArray(content)) return { text: result === undefined ? "" : pretty(result), other: [] };
  const texts: string[] = [];
  const other: string[] = [];
  for (const part of content) {
    if (isObject(part) && part.type === "text" && typeof part.text === "string") texts.push(part.text);
    else if (other.length < 20) {
      const kind = isObject(part)
        ? `${TextBudget.label(part.type)}${part.mimeType ? ` (${TextBudget.label(part.mimeType)})` : ""}`
        : "?";
      other.push(kind);
    }
  }
  return { text: texts.join("\n"), other };
}

/** The host-run files, links and names an event lists, in one line: each path with why (50 at most, as events carry). */
function hostRunWarning(data: Record<string, unknown>): string {
  const files = Array.isArray(data.files) ? data.files.filter(isObject) : [];
  const listed = files.map((f) => `${str(f.path) ?? "?"} (${str(f.change) ?? "changed"}: ${str(f.why) ?? ""})`);
  const count = typeof data.count === "number" ? data.count : files.length;
  const more = count > files.length ? `; and ${count - files.length} more` : "";
  return `the run left files, links or names that tools on this machine read, follow or misread (review them before running such tools there): ${listed.join("; ")}${more}`;
}
