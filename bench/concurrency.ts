// Many calls at once through one ContainerPiAgent: throughput, latency, the controller's own
// peak memory (sampled in this process), failures and containers left behind.
import fs from "node:fs";
import type { ContainerPiAgent } from "../src/container-pi-agent.js";
import type { DockerClient } from "../src/engine/docker-connection.js";
import { LABEL_OWNER_PID } from "../src/sandbox-contract.js";
import { TASK_PROMPT, TASK_RESULT } from "./bench-task.js";
import { median, p90, round } from "./stats.js";
import type { Scratch } from "./variants.js";

export interface ConcurrencyResult {
  concurrency: number;
  calls: number;
  wallMs: number;
  callsPerSecond: number;
  medianLatencyMs: number;
  p90LatencyMs: number;
  /** Highest RSS of this process seen while the calls ran (sampled every 10 ms). */
  peakRssMb: number;
  rssBeforeMb: number;
  failures: number;
  errors: string[];
  containersLeft: number;
}

const MB = 1024 * 1024;

/** VmHWM: the process's lifetime peak resident set, from the kernel. */
export function vmHwmMb(): number | undefined {
  try {
    const match = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync("/proc/self/status", "utf8"));
    return match ? round(Number(match[1]) / 1024) : undefined;
  } catch {
    return undefined;
  }
}

/** Containers this process created that still exist (running or not). */
export async function ownContainers(docker: DockerClient): Promise<number> {
  const list = await docker.listContainers({ all: true, filters: { label: [`${LABEL_OWNER_PID}=${process.pid}`] } });
  return list.length;
}

export async function runConcurrency(
  agent: ContainerPiAgent,
  docker: DockerClient,
  scratch: Scratch,
  concurrency: number,
  calls: number,
): Promise<ConcurrencyResult> {
  const workspaces = Array.from({ length: calls }, () => scratch.dir("conc-ws"));
  global.gc?.();
  const rssBefore = process.memoryUsage.rss();
  let peak = rssBefore;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 10);
  const latencies: number[] = [];
  const errors: string[] = [];
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < calls) {
      const workspace = workspaces[next++]!;
      const t0 = performance.now();
      try {
        const result = await agent.run(TASK_PROMPT, { cwd: workspace });
        if (JSON.stringify(result) !== JSON.stringify(TASK_RESULT))
          throw new Error(`unexpected result ${JSON.stringify(result)}`);
        latencies.push(performance.now() - t0);
      } catch (error) {
        errors.push(String((error as Error)?.message ?? error).slice(0, 300));
      }
      peak = Math.max(peak, process.memoryUsage.rss());
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const wallMs = performance.now() - started;
  clearInterval(sampler);
  return {
    concurrency,
    calls,
    wallMs: round(wallMs),
    callsPerSecond: round((latencies.length / wallMs) * 1000, 2),
    medianLatencyMs: round(median(latencies)),
    p90LatencyMs: round(p90(latencies)),
    peakRssMb: round(peak / MB),
    rssBeforeMb: round(rssBefore / MB),
    failures: errors.length,
    errors,
    containersLeft: await ownContainers(docker),
  };
}
