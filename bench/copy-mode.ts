// The "copy" section of `npm run bench`: what copy mode costs next to bind mode, per call, for a
// small workspace (10 files) and a node_modules-like one (20,000 files, 200 MB), with copy in
// and copy out timed apart from the run's own events; and a gateway request's round trip through
// the relay against the bind-mounted socket, timed inside the sandbox.
import fs from "node:fs";
import path from "node:path";
import type { ContainerPiAgent } from "../src/container-pi-agent.js";
import type { RunEvent } from "../src/run/run-events.js";
import type { ScriptedModelServer } from "../src/scripted-model/scripted-model-server.js";
import { RTT_MODEL, TASK_PROMPT, TASK_RESULT } from "./bench-task.js";
import { median, round } from "./stats.js";
import { sandboxPhases, type Variant } from "./variants.js";

/** Writes `files` files of about `totalBytes / files` bytes each, 100 to a directory, like a package tree. */
export function fillWorkspace(dir: string, files: number, totalBytes: number): void {
  const size = Math.max(1, Math.floor(totalBytes / files));
  const content = Buffer.alloc(size);
  for (let i = 0; i < files; i++) {
    const sub = path.join(dir, `pkg-${Math.floor(i / 100)}`);
    if (i % 100 === 0) fs.mkdirSync(sub, { recursive: true });
    // Distinct content per file (a counter in the first bytes), like real files.
    content.write(`file ${i} `, 0);
    fs.writeFileSync(path.join(sub, `file-${i}.js`), content);
  }
}

/** One mode on one workspace; phases add copy-in, copy-out and apply (copy) or the snapshot passes (bind). */
export function workspaceVariant(
  key: string,
  label: string,
  agent: ContainerPiAgent,
  workspace: string,
  mode: "bind" | "copy",
): Variant {
  return {
    key,
    label,
    async run() {
      const events: RunEvent[] = [];
      const started = performance.now();
      const details = await agent.runDetailed(TASK_PROMPT, {
        cwd: workspace,
        workspaceMode: mode,
        onEvent: (e) => void events.push(e),
      });
      const ms = performance.now() - started;
      if (JSON.stringify(details.result) !== JSON.stringify(TASK_RESULT)) {
        throw new Error(`${key}: unexpected result ${JSON.stringify(details.result)}`);
      }
      const data = (type: string) => events.find((e) => e.source === "sandbox" && e.type === type)?.data ?? {};
      const phases: Record<string, number> = { ...sandboxPhases(events, ms) };
      if (mode === "copy") {
        // A run that silently fell back to bind mode must not be reported as copy mode's numbers.
        if (!events.some((e) => e.type === "workspace.copied-in")) throw new Error(`${key}: the run did not copy`);
        phases.copyIn = Number(data("workspace.copied-in").ms);
        phases.copyOut = Number(data("workspace.copied-out").ms);
        phases.apply = Number(data("workspace.applied").ms);
      } else phases.snapshot = Number(data("workspace.changed").snapshotMs);
      return { ms, phases };
    },
  };
}

export interface RoundTrip {
  mode: "bind" | "copy";
  runs: number;
  /** Median over runs of each run's median, ms. */
  keepAliveMs: number;
  newConnectionMs: number;
}

export async function gatewayRoundTrip(
  agent: ContainerPiAgent,
  server: ScriptedModelServer,
  workspace: string,
  mode: "bind" | "copy",
  runs: number,
): Promise<RoundTrip> {
  const keep: number[] = [];
  const fresh: number[] = [];
  for (let i = 0; i < runs; i++) {
    const before = server.requests.length;
    await agent.runDetailed(TASK_PROMPT, { cwd: workspace, workspaceMode: mode, model: `scripted/${RTT_MODEL}` });
    const request = server.requests
      .slice(before)
      .find((r) => r.body.model === RTT_MODEL && r.body.messages.some((m) => m.role === "tool"));
    const tool = request?.body.messages.find((m) => m.role === "tool");
    const text = typeof tool?.content === "string" ? tool.content : JSON.stringify(tool?.content ?? "");
    const match = /keep-alive=([\d.]+) new-connection=([\d.]+)/.exec(text);
    if (!match) throw new Error(`the round-trip probe printed no timings: ${text.slice(0, 300)}`);
    keep.push(Number(match[1]));
    fresh.push(Number(match[2]));
  }
  return { mode, runs, keepAliveMs: round(median(keep), 2), newConnectionMs: round(median(fresh), 2) };
}
