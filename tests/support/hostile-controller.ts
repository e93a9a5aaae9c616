// A controller in its own process, for the tests that must measure or kill it: its peak RSS
// is its own (not the test runner's), and SIGKILL takes it down like a crashed host program.
// Run as `node <its bundle> '<spec json>'` (harness.ts testScript("hostileController")); it prints JSON
// lines on stdout: {"kind":"event",...} for the sandbox events asked for, then one
// {"kind":"done",...} with the outcome and process.resourceUsage().maxRSS.
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { isSandboxRunError } from "../../src/errors.js";
import type { Policy } from "../../src/policy/policy-schema.js";

export interface ControllerSpec {
  models: Record<string, unknown>;
  model: string;
  cwd: string;
  policy: Policy;
  schema?: Record<string, unknown>;
  timeoutMs?: number;
  prompt?: string;
  /** Sandbox event types to print as they happen (e.g. "container.started"). */
  reportEvents?: string[];
  /** bind or copy; default: SANDBOX_RUN_WORKSPACE, then the engine's default. */
  workspaceMode?: "bind" | "copy";
}

export interface ControllerDone {
  kind: "done";
  ok: boolean;
  result?: unknown;
  runId?: string;
  /** stderrTail: the end of the sandbox's stderr (the launcher says there why it stopped). */
  error?: { code: string; limit?: string; message: string; name: string; stderrTail?: string };
  maxRssMb: number;
  /** Peaks of process.memoryUsage() sampled every 20 ms, in MB: where the RSS went, for failure messages. */
  memoryPeakMb: Record<string, number>;
}

const print = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

const memoryPeakMb: Record<string, number> = {};
setInterval(() => {
  for (const [key, bytes] of Object.entries(process.memoryUsage()))
    memoryPeakMb[key] = Math.max(memoryPeakMb[key] ?? 0, Math.round(bytes / 1048576));
}, 20).unref();

const spec = JSON.parse(process.argv[2] ?? "{}") as ControllerSpec;
// One call: with SANDBOX_RUN_WARM (the integration-warm project) its sandbox and no refill.
const agent = new ContainerPiAgent({ models: spec.models, reapOrphans: false, warm: { calls: 1 } });
const report = new Set(spec.reportEvents ?? []);
let runId: string | undefined;
let done: ControllerDone;
try {
  const details = await agent.runDetailed(spec.prompt ?? "Do the task.", {
    model: spec.model,
    cwd: spec.cwd,
    policy: spec.policy,
    schema: spec.schema,
    timeoutMs: spec.timeoutMs,
    workspaceMode: spec.workspaceMode,
    onEvent: (event) => {
      runId = event.runId;
      if (event.source === "sandbox" && report.has(event.type))
        print({ kind: "event", runId: event.runId, type: event.type, data: event.data });
    },
  });
  done = { kind: "done", ok: true, result: details.result, runId, maxRssMb: 0, memoryPeakMb };
} catch (error) {
  done = {
    kind: "done",
    ok: false,
    runId,
    error: isSandboxRunError(error)
      ? {
          code: error.code,
          limit: error.limit,
          message: error.message,
          name: error.name,
          ...(error.stderrTail ? { stderrTail: error.stderrTail.slice(-2000) } : {}),
        }
      : {
          code: "not-a-sandbox-run-error",
          message: String((error as Error)?.stack ?? error),
          name: String((error as Error)?.name),
        },
    maxRssMb: 0,
    memoryPeakMb,
  };
}
done.maxRssMb = process.resourceUsage().maxRSS / 1024;
// Warm sandboxes (the integration-warm project) the run did not use go before the process does.
await agent.close();
print(done);
process.exit(0);
