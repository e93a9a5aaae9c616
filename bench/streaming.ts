// Event delivery delay: Pi's bash prints a wall-clock timestamp every 200 ms; each
// tool_execution_update that carries a new line is compared with the wall-clock time the
// caller received it. Container and host share the kernel clock (gVisor keeps its clock in
// step with the host's), so the difference is how long the line took to travel: bash -> Pi
// -> (container stdout -> Docker -> attach stream ->) JSONL reader -> onEvent. The host run
// is the baseline: its delay is Pi's own.
import type { ContainerPiAgent } from "../src/container-pi-agent.js";
import { STREAM_MODEL, TASK_PROMPT } from "./bench-task.js";
import { type HostPi, runPiOnHost } from "./host-pi.js";
import { median, p90, round } from "./stats.js";

export interface DelayResult {
  key: string;
  runs: number;
  samples: number;
  medianMs: number;
  p90Ms: number;
  maxMs: number;
  failures: number;
}

const wallNowMs = () => performance.timeOrigin + performance.now();

/** Tracks one run's tool_execution_update events and records a delay per new timestamp line. */
function delayProbe(delays: number[]) {
  let seenLines = 0;
  return (event: { type: string; partialResult?: unknown }) => {
    if (event.type !== "tool_execution_update") return;
    const received = wallNowMs();
    const content = (event.partialResult as { content?: Array<{ text?: string }> } | undefined)?.content ?? [];
    const lines = content
      .map((c) => c.text ?? "")
      .join("")
      .split("\n")
      .filter((l) => /^\d{19}$/.test(l));
    if (lines.length <= seenLines) return;
    seenLines = lines.length;
    const printedMs = Number(BigInt(lines[lines.length - 1]!) / 1000n) / 1000;
    delays.push(received - printedMs);
  };
}

function summary(key: string, runs: number, delays: number[], failures: number): DelayResult {
  return {
    key,
    runs,
    samples: delays.length,
    medianMs: round(median(delays), 2),
    p90Ms: round(p90(delays), 2),
    maxMs: round(delays.length ? Math.max(...delays) : Number.NaN, 2),
    failures,
  };
}

export async function sandboxDelay(
  key: string,
  agent: ContainerPiAgent,
  workspace: string,
  runs: number,
): Promise<DelayResult> {
  const delays: number[] = [];
  let failures = 0;
  for (let i = 0; i < runs; i++) {
    const probe = delayProbe(delays);
    try {
      await agent.run(TASK_PROMPT, {
        cwd: workspace,
        model: `scripted/${STREAM_MODEL}`,
        onEvent: (e) => e.source === "pi" && probe(e.data as { type: string }),
      });
    } catch {
      failures++;
    }
  }
  return summary(key, runs, delays, failures);
}

export async function hostDelay(
  pi: HostPi,
  home: { agentDir: string; extension: string },
  workspace: string,
  runs: number,
): Promise<DelayResult> {
  const delays: number[] = [];
  let failures = 0;
  for (let i = 0; i < runs; i++) {
    const run = await runPiOnHost(pi, { cwd: workspace, ...home, model: STREAM_MODEL, onEvent: delayProbe(delays) });
    if (run.outcome.kind !== "structured") failures++;
  }
  return summary("host", runs, delays, failures);
}
