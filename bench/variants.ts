// The ways of running the same task that the per-call section compares. Each run returns its
// wall time and, where the run reports events, where that time went (phases, in ms).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { ContainerPiAgent } from "../src/container-pi-agent.js";
import type { PiEvent } from "../src/pi/pi-events.js";
import type { RunEvent } from "../src/run/run-events.js";
import {
  benchModelsJson,
  PROVIDER,
  TASK_MODEL,
  TASK_PROMPT,
  TASK_RESULT,
  TASK_SCHEMA,
  writePiHome,
} from "./bench-task.js";
import { runDockerRecipe } from "./docker-recipe.js";
import { type HostPi, runPiOnHost } from "./host-pi.js";
import { expectResult } from "./pi-output.js";

export interface Sample {
  ms: number;
  phases?: Record<string, number>;
}

export interface Variant {
  key: string;
  label: string;
  run(): Promise<Sample>;
}

/** Temporary folders made for the benchmark; removed by cleanup(). */
export class Scratch {
  private readonly dirs: string[] = [];
  dir(prefix: string): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `sandbox-run-bench-${prefix}-`));
    this.dirs.push(dir);
    return dir;
  }
  cleanup(): void {
    for (const dir of this.dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Phase durations from Pi's own events, timed on the caller's clock from the call's start. */
function piPhases(marks: Map<string, number>, total: number): Record<string, number> | undefined {
  const start = marks.get("agent_start");
  const end = marks.get("agent_end");
  if (start === undefined || end === undefined) return undefined;
  return { piStart: start, turns: end - start, exit: total - end };
}

export function hostVariant(pi: HostPi, baseUrl: string, scratch: Scratch): Variant {
  const home = writePiHome(scratch.dir("host-home"), baseUrl, pi.finalToolModule);
  const workspace = scratch.dir("host-ws");
  return {
    key: "host",
    label: "Pi on the host (same Node, same Pi)",
    async run() {
      const marks = new Map<string, number>();
      const t0 = performance.now();
      const onEvent = (e: PiEvent) => void (marks.has(e.type) || marks.set(e.type, performance.now() - t0));
      const run = await runPiOnHost(pi, { cwd: workspace, ...home, model: TASK_MODEL, onEvent });
      expectResult(run.outcome, TASK_RESULT, "host Pi");
      return { ms: run.ms, phases: piPhases(marks, run.ms) };
    },
  };
}

export function recipeVariant(image: string, baseUrl: string, scratch: Scratch): Variant {
  const piHome = scratch.dir("recipe-home");
  writePiHome(piHome, baseUrl, "/opt/sandbox-run/final-tool.mjs");
  const workspace = scratch.dir("recipe-ws");
  return {
    key: "docker-run",
    label: "plain `docker run --rm -i` (Pi docs recipe)",
    async run() {
      const run = await runDockerRecipe({ image, workspace, piHome, model: TASK_MODEL });
      if (run.exitCode !== 0) throw new Error(`docker run exited with ${run.exitCode}`);
      expectResult(run.outcome, TASK_RESULT, "docker run recipe");
      return { ms: run.ms };
    },
  };
}

/** ContainerPiAgent.run() with the scripted provider behind the model gateway. */
export function sandboxAgent(baseUrl: string, runtime: "runc" | "runsc", image?: string): ContainerPiAgent {
  return new ContainerPiAgent({
    model: `${PROVIDER}/${TASK_MODEL}`,
    models: benchModelsJson(baseUrl),
    schema: TASK_SCHEMA,
    runtime,
    image,
    // Other people's orphans are not this benchmark's business.
    reapOrphans: false,
  });
}

/** Where a sandboxed run's time went, from its own event timeline. */
export function sandboxPhases(events: RunEvent[], total: number): Record<string, number> | undefined {
  const at = (source: RunEvent["source"], type: string) =>
    events.find((e) => e.source === source && e.type === type)?.time;
  const created = at("sandbox", "container.created");
  const started = at("sandbox", "container.started");
  const piStart = at("pi", "agent_start");
  const piEnd = at("pi", "agent_end");
  const exited = at("sandbox", "container.exited");
  const removed = at("sandbox", "container.removed");
  if ([created, started, piStart, piEnd, exited, removed].some((t) => t === undefined)) return undefined;
  return {
    setup: created!,
    start: started! - created!,
    piStart: piStart! - started!,
    turns: piEnd! - piStart!,
    exit: exited! - piEnd!,
    remove: removed! - exited!,
    // Resolving options and the image check before the timeline starts, and returning after it.
    caller: total - removed!,
  };
}

export function sandboxVariant(key: string, label: string, agent: ContainerPiAgent, scratch: Scratch): Variant {
  const workspace = scratch.dir(`${key}-ws`);
  return {
    key,
    label,
    async run() {
      const events: RunEvent[] = [];
      const started = performance.now();
      const details = await agent.runDetailed(TASK_PROMPT, { cwd: workspace, onEvent: (e) => void events.push(e) });
      const ms = performance.now() - started;
      if (JSON.stringify(details.result) !== JSON.stringify(TASK_RESULT)) {
        throw new Error(`${key}: unexpected result ${JSON.stringify(details.result)}`);
      }
      return { ms, phases: sandboxPhases(events, ms) };
    },
  };
}
