// A run record: a self-contained folder a CI job can archive as evidence of what an agent run did,
// and that `sandbox-run replay` can play back. It holds the effective policy and plan, the prompt
// and schema (with their sha256), what a replay needs to make the same call (replay.json), the
// merged event log, every model exchange the gateway relayed (exchanges.jsonl), the result or
// error, the workspace changes as a patch, and SHA256SUMS over all of it. Writing a record never
// decides the run's outcome: a part that cannot be written is noted in meta.json (and returned),
// next to the run's real result. The format is in record-format.ts and docs/records.md.
//
// The recorder writes into a staging folder the sandbox never holds (the run's private folder),
// every file created exclusively and without following links relative to that folder's fd;
// record-target.ts moves the finished record into place once the run is over.
import crypto from "node:crypto";
import fs from "node:fs";
import type { JsonSchema } from "../agent.js";
import type { ErrorSummary } from "../errors.js";
import type { GatewayExchange, RecordLimits } from "../gateway/model-gateway.js";
import type { Policy } from "../policy/policy-schema.js";
import type { HostDir } from "../util/host-dir.js";
import { escapeUnsafeInJson } from "../util/unsafe-chars.js";
import { CredentialScrubber } from "./credential-scrubber.js";
import { RECORD_FILES, RECORD_FORMAT, type RecordedCall, type RecordVersions } from "./record-format.js";
import { DEFAULT_TRAFFIC_LIMITS, type TrafficLimits, TrafficLog } from "./traffic-log.js";
import { changedNotInPatch, WorkspaceBaseline, type WorkspacePatch } from "./workspace-patch.js";

const sha256 = (data: string | Buffer) => crypto.createHash("sha256").update(data).digest("hex");

interface RecordStart {
  /** The folder the record is written into: new, empty, private to this process (a staging folder). */
  staging: HostDir;
  /** A private folder for the copy of the workspace the patch is made from (default: the temp dir). */
  scratch?: string;
  prompt: string;
  schema?: JsonSchema;
  policy: Policy;
  workspace: string;
  /** The run plan as it may be stored (redacted). */
  plan: unknown;
  /** What a replay needs to make the same call (replay.json). */
  call: RecordedCall;
  versions: RecordVersions;
  /** Caps on the model traffic kept (default DEFAULT_TRAFFIC_LIMITS). */
  trafficLimits?: TrafficLimits;
}

/** Where the gateway hands a record the exchanges it relayed (execute-run wires it). */
export interface TrafficSink {
  /** The caps the gateway applies while it keeps an exchange's bytes. */
  readonly limits: RecordLimits;
  /** Credential values the gateway adds: none of them may reach the record. Called when the run starts. */
  forbid(values: readonly string[]): void;
  exchange(exchange: GatewayExchange): void;
}

export interface RecordFinish {
  ok: boolean;
  result?: unknown;
  error?: ErrorSummary;
  meta: Record<string, unknown>;
  /**
   * The run's changes when they were handed back as a patch or a branch instead of applied (the
   * workspace itself then did not change): stored as changes.patch instead of the workspace's diff.
   */
  changes?: { patch: string; notes: string[] };
}

export class RunRecorder {
  private readonly events: fs.WriteStream;
  private readonly trafficLog: TrafficLog;
  /** Credential values the run's gateway adds: removed from everything written once they are known. */
  private readonly scrubber = new CredentialScrubber();
  /** The gateway's exchanges go here (see TrafficSink). */
  readonly traffic: TrafficSink;
  private readonly startedAt = new Date();
  /** What could not be recorded, in words; stored in meta.json. */
  private readonly notes: string[] = [];

  /**
   * The workspace as the run found it, and what the run changed: taken while the run holds its
   * trees (captureBefore, captureAfter), so another run over the same workspace cannot show in it.
   */
  private baseline: WorkspaceBaseline | undefined;
  private changes: WorkspacePatch | undefined;

  /** Throws when the folder cannot be used (a usage error for the caller); nothing else does. */
  static async open(start: RecordStart): Promise<RunRecorder> {
    if (start.staging.list().length > 0) throw new Error(`the staging folder ${start.staging.path} is not empty`);
    return new RunRecorder(start);
  }

  private constructor(private readonly start: RecordStart) {
    this.events = start.staging.newWriteStream(RECORD_FILES.events);
    this.events.on("error", (error) => this.notes.push(`${RECORD_FILES.events}: ${error.message}`));
    const trafficLog = new TrafficLog(
      start.staging.newWriteStream(RECORD_FILES.exchanges),
      start.trafficLimits ?? DEFAULT_TRAFFIC_LIMITS,
      this.scrubber,
    );
    this.trafficLog = trafficLog;
    this.traffic = {
      limits: trafficLog.gatewayLimits,
      forbid: (values) => trafficLog.forbid(values),
      exchange: (exchange) => trafficLog.add(exchange),
    };
    this.write(RECORD_FILES.prompt, start.prompt);
    if (start.schema) this.write(RECORD_FILES.schema, `${JSON.stringify(start.schema, null, 2)}\n`);
    this.write(RECORD_FILES.policy, `${JSON.stringify(start.policy, null, 2)}\n`);
    this.write(RECORD_FILES.plan, `${JSON.stringify(start.plan, null, 2)}\n`);
    this.write(RECORD_FILES.call, `${JSON.stringify(start.call, null, 2)}\n`);
  }

  /** The workspace before the run: call once the run holds its trees, before its sandbox starts. */
  async captureBefore(): Promise<void> {
    await this.baseline?.dispose();
    this.baseline = undefined;
    await this.attemptAsync("changes.patch", async () => {
      this.baseline = await WorkspaceBaseline.take(this.start.workspace, this.start.scratch);
    });
  }

  /** What the run changed: call once the host has judged and written the trees, before it lets them go. */
  async captureAfter(): Promise<void> {
    const baseline = this.baseline;
    if (!baseline) return;
    this.baseline = undefined;
    await this.attemptAsync("changes.patch", async () => {
      try {
        this.changes = await baseline.patch((bytes) => this.scrubber.bytes(bytes));
      } finally {
        await baseline.dispose();
      }
    });
  }

  readonly onEvent = (event: unknown): void => {
    // Escaped after the scrub, which matches secrets as JSON.stringify wrote them: a line reader or
    // `cat` meets no C1 control, line separator or bidi override (red-team review, round 3, session 41).
    this.events.write(`${escapeUnsafeInJson(this.scrubber.text(JSON.stringify(event)))}\n`);
  };

  /** Completes the record; returns what could not be recorded (empty when everything was). */
  async finish(outcome: RecordFinish): Promise<string[]> {
    await new Promise<void>((resolve) => this.events.end(resolve));
    const traffic = await this.trafficLog.end();
    if (traffic.error) this.notes.push(`${RECORD_FILES.exchanges}: ${traffic.error}`);
    if (traffic.summary.omitted > 0) {
      this.notes.push(
        `${RECORD_FILES.exchanges}: ${traffic.summary.omitted} of ${traffic.summary.exchanges} model exchanges are listed without their bytes (over the record's size cap); a replay stops at the first of them`,
      );
    }
    // Without a capture the run never held the workspace (it ended before its sandbox): no change.
    await this.captureAfter();
    // A changed file the workspace's patch left out is named first: an empty patch is not "no change".
    const { patch, notes } = outcome.changes ?? withChangedNotInPatch(this.changes, outcome.meta.changedFiles);
    this.write("changes.patch", patch);
    if (notes.length > 0) this.write("changes-notes.txt", `${notes.join("\n")}\n`);
    this.writeJson(outcome.ok ? "result.json" : "error.json", outcome.ok ? outcome.result : outcome.error);
    const meta = {
      format: RECORD_FORMAT,
      versions: this.start.versions,
      ...outcome.meta,
      ok: outcome.ok,
      startedAt: this.startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      workspace: this.start.workspace,
      promptSha256: sha256(this.start.prompt),
      schemaSha256: this.start.schema ? sha256(JSON.stringify(this.start.schema)) : null,
      modelTraffic: traffic.summary,
      ...(this.notes.length > 0 ? { recordNotes: this.notes } : {}),
    };
    this.writeJson("meta.json", meta);
    await this.attemptAsync("SHA256SUMS", () => this.writeChecksums());
    return [...this.notes];
  }

  /** Stops recording without completing the record (its folder is then removed by whoever made it). */
  async discard(): Promise<void> {
    await new Promise<void>((resolve) => this.events.end(resolve));
    await this.trafficLog.end();
    await this.baseline?.dispose();
    this.baseline = undefined;
  }

  /** SHA256SUMS over every file, each hashed as a stream (records can hold files over 2 GB). */
  private async writeChecksums(): Promise<void> {
    const staging = this.start.staging;
    const names = staging
      .list()
      .filter((name) => name !== "SHA256SUMS")
      .sort();
    const lines: string[] = [];
    for (const name of names) lines.push(`${await hashFile(staging.at(name))}  ${name}`);
    this.write("SHA256SUMS", `${lines.join("\n")}\n`);
  }

  private write(name: string, content: string): void {
    this.attempt(name, () => this.start.staging.writeNew(name, this.scrubber.text(content)));
  }

  /**
   * A JSON file of the record: scrubbed as JSON.stringify wrote it (a secret holding U+0085 or a
   * soft hyphen is matched before it is escaped: fix review, round 3, session 41), then with what
   * line readers split at and terminals act on escaped (the sandbox's names in meta.json too).
   */
  private writeJson(name: string, value: unknown): void {
    const json = JSON.stringify(value, null, 2);
    this.attempt(name, () => this.start.staging.writeNew(name, `${escapeUnsafeInJson(this.scrubber.text(json))}\n`));
  }

  private attempt(what: string, step: () => void): void {
    try {
      step();
    } catch (error) {
      this.notes.push(`${what}: ${(error as Error)?.message ?? String(error)}`);
    }
  }

  private async attemptAsync(what: string, step: () => Promise<void>): Promise<void> {
    try {
      await step();
    } catch (error) {
      this.notes.push(`${what}: ${(error as Error)?.message ?? String(error)}`);
    }
  }
}

/** The workspace's patch, its notes led by the run's changed files (meta's changedFiles) it left out. */
function withChangedNotInPatch(changes: WorkspacePatch | undefined, changedFiles: unknown): WorkspacePatch {
  if (!changes) return { patch: "", notes: [] };
  const lists = (changedFiles ?? {}) as Partial<Record<"created" | "modified" | "deleted", unknown>>;
  // Workspace paths are relative; the extra writable roots' paths (absolute) are never in this patch.
  const changed = [lists.created, lists.modified, lists.deleted].flatMap((list) =>
    Array.isArray(list) ? list.filter((p): p is string => typeof p === "string" && !p.startsWith("/")) : [],
  );
  return { patch: changes.patch, notes: [...changedNotInPatch(changes, changed), ...changes.notes] };
}

function hashFile(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = crypto.createHash("sha256");
    fs.createReadStream("", { fd: fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW) })
      .on("data", (chunk) => hash.update(chunk))
      .on("end", () => resolve(hash.digest("hex")))
      .on("error", reject);
  });
}
