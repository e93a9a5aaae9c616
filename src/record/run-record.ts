// A run record: a self-contained folder a CI job can archive as evidence of what an agent run did.
// It holds the effective policy and plan, the prompt and schema (with their sha256), the merged event
// log, the result or error, the workspace changes as a patch, and SHA256SUMS over all of it. Writing
// a record never decides the run's outcome: a part that cannot be written is noted in meta.json
// (and returned), next to the run's real result.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { JsonSchema } from "../agent.js";
import type { Policy } from "../policy/policy-schema.js";
import { WorkspaceBaseline } from "./workspace-patch.js";

const sha256 = (data: string | Buffer) => crypto.createHash("sha256").update(data).digest("hex");

export interface RecordStart {
  dir: string;
  prompt: string;
  schema?: JsonSchema;
  policy: Policy;
  workspace: string;
  /** The run plan as it may be stored (redacted). */
  plan: unknown;
}

export interface RecordFinish {
  ok: boolean;
  result?: unknown;
  error?: {
    code: string;
    message: string;
    hint?: string;
    exitCode?: number | null;
    stderrTail?: string;
    limit?: string;
  };
  meta: Record<string, unknown>;
}

export class RunRecorder {
  private readonly events: fs.WriteStream;
  private readonly baseline: WorkspaceBaseline;
  private readonly startedAt = new Date();
  /** What could not be recorded, in words; stored in meta.json. */
  private readonly notes: string[] = [];

  /** Throws when the folder cannot be used (a usage error for the caller); nothing else does. */
  constructor(private readonly start: RecordStart) {
    fs.mkdirSync(start.dir, { recursive: true });
    const existing = fs.readdirSync(start.dir);
    if (existing.length > 0) throw new Error(`the record folder ${start.dir} is not empty`);
    this.baseline = WorkspaceBaseline.take(start.workspace);
    this.events = fs.createWriteStream(path.join(start.dir, "events.jsonl"));
    this.events.on("error", (error) => this.notes.push(`events.jsonl: ${error.message}`));
    this.write("prompt.txt", start.prompt);
    if (start.schema) this.write("schema.json", `${JSON.stringify(start.schema, null, 2)}\n`);
    this.write("policy.json", `${JSON.stringify(start.policy, null, 2)}\n`);
    this.write("plan.json", `${JSON.stringify(start.plan, null, 2)}\n`);
  }

  readonly onEvent = (event: unknown): void => {
    this.events.write(`${JSON.stringify(event)}\n`);
  };

  /** Completes the record; returns what could not be recorded (empty when everything was). */
  async finish(outcome: RecordFinish): Promise<string[]> {
    await new Promise<void>((resolve) => this.events.end(resolve));
    this.attempt("changes.patch", () => {
      try {
        const { patch, notes } = this.baseline.patch();
        this.write("changes.patch", patch);
        if (notes.length > 0) this.write("changes-notes.txt", `${notes.join("\n")}\n`);
      } finally {
        this.baseline.dispose();
      }
    });
    this.write(
      outcome.ok ? "result.json" : "error.json",
      `${JSON.stringify(outcome.ok ? outcome.result : outcome.error, null, 2)}\n`,
    );
    const meta = {
      ...outcome.meta,
      ok: outcome.ok,
      startedAt: this.startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      workspace: this.start.workspace,
      promptSha256: sha256(this.start.prompt),
      schemaSha256: this.start.schema ? sha256(JSON.stringify(this.start.schema)) : null,
      ...(this.notes.length > 0 ? { recordNotes: this.notes } : {}),
    };
    this.write("meta.json", `${JSON.stringify(meta, null, 2)}\n`);
    await this.attemptAsync("SHA256SUMS", () => this.writeChecksums());
    return [...this.notes];
  }

  /** SHA256SUMS over every file, each hashed as a stream (records can hold files over 2 GB). */
  private async writeChecksums(): Promise<void> {
    const names = fs
      .readdirSync(this.start.dir)
      .filter((name) => name !== "SHA256SUMS")
      .sort();
    const lines: string[] = [];
    for (const name of names) lines.push(`${await hashFile(path.join(this.start.dir, name))}  ${name}`);
    this.write("SHA256SUMS", `${lines.join("\n")}\n`);
  }

  private write(name: string, content: string): void {
    this.attempt(name, () => fs.writeFileSync(path.join(this.start.dir, name), content));
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

function hashFile(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = crypto.createHash("sha256");
    fs.createReadStream(file)
      .on("data", (chunk) => hash.update(chunk))
      .on("end", () => resolve(hash.digest("hex")))
      .on("error", reject);
  });
}
