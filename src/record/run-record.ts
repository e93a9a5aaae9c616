// A run record: a self-contained folder a CI job can archive as evidence of what an agent
// run did. It holds the effective policy and plan, the image and Pi version, the prompt and
// schema (with their sha256), the merged event log, the result or error, the workspace
// changes as a patch, and SHA256SUMS over all of it.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { JsonSchema } from "../agent.js";
import type { Policy } from "../policy/policy-schema.js";
import type { RunEvent } from "../run/run-events.js";
import type { RunPlan } from "../run/run-plan.js";
import { WorkspaceBaseline } from "./workspace-patch.js";

const sha256 = (data: string | Buffer) => crypto.createHash("sha256").update(data).digest("hex");

export interface RecordStart {
  dir: string;
  prompt: string;
  schema?: JsonSchema;
  policy: Policy;
  workspace: string;
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
  private plan?: RunPlan;
  private readonly startedAt = new Date();

  constructor(private readonly start: RecordStart) {
    fs.mkdirSync(start.dir, { recursive: true });
    const existing = fs.readdirSync(start.dir);
    if (existing.length > 0) throw new Error(`the record folder ${start.dir} is not empty`);
    this.baseline = WorkspaceBaseline.take(start.workspace);
    this.events = fs.createWriteStream(path.join(start.dir, "events.jsonl"));
    this.write("prompt.txt", start.prompt);
    if (start.schema) this.write("schema.json", `${JSON.stringify(start.schema, null, 2)}\n`);
    this.write("policy.json", `${JSON.stringify(start.policy, null, 2)}\n`);
  }

  readonly onEvent = (event: RunEvent): void => {
    this.events.write(`${JSON.stringify(event)}\n`);
  };

  readonly onPlan = (plan: RunPlan): void => {
    this.plan = plan;
  };

  async finish(outcome: RecordFinish): Promise<void> {
    await new Promise<void>((resolve) => this.events.end(resolve));
    try {
      const { patch, notes } = this.baseline.patch();
      this.write("changes.patch", patch);
      if (notes.length > 0) this.write("changes-notes.txt", `${notes.join("\n")}\n`);
    } finally {
      this.baseline.dispose();
    }
    if (this.plan) this.write("plan.json", `${JSON.stringify(redactPlan(this.plan), null, 2)}\n`);
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
    };
    this.write("meta.json", `${JSON.stringify(meta, null, 2)}\n`);
    const sums = fs
      .readdirSync(this.start.dir)
      .filter((name) => name !== "SHA256SUMS")
      .sort()
      .map((name) => `${sha256(fs.readFileSync(path.join(this.start.dir, name)))}  ${name}`);
    this.write("SHA256SUMS", `${sums.join("\n")}\n`);
  }

  private write(name: string, content: string): void {
    fs.writeFileSync(path.join(this.start.dir, name), content);
  }
}

/** The plan without values of the caller's variables (names stay, so the record shows what was set). */
function redactPlan(plan: RunPlan): unknown {
  const config = plan.env.SANDBOX_RUN_CONFIG;
  const env = Object.fromEntries(
    Object.entries(plan.env).map(([k, v]) => [
      k,
      k === "SANDBOX_RUN_CONFIG"
        ? JSON.parse(config ?? "{}")
        : k.startsWith("PI_") || ["HOME", "TMPDIR", "LANG"].includes(k) || k.toLowerCase().endsWith("_proxy")
          ? v
          : "<redacted>",
    ]),
  );
  return { ...plan, env };
}
