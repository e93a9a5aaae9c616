// Plain one-line-per-step progress on stderr, readable in a CI log: the normalised steps of the run
// (event.progress) and the sandbox's own events. Everything shown that the model or the sandbox
// chose (tool names, arguments, paths, hosts, messages) goes through terminalLine.
import type { RunEvent } from "../index.js";
import { terminalLine as t } from "./terminal-text.js";
import { isHostEvent } from "./warning-events.js";

export function createProgressReporter(write: (line: string) => void): (event: RunEvent) => void {
  const toolStarts = new Map<string, number>();
  let turns = 0;
  const stamp = (event: RunEvent) => `[${(event.time / 1000).toFixed(1).padStart(5)}s]`;
  return (event) => {
    const at = stamp(event);
    if (isHostEvent(event)) {
      const line = sandboxLine(event.type, event.data);
      if (line) write(`${at} ${line}`);
      return;
    }
    const step = event.progress;
    if (!step) return;
    switch (step.kind) {
      case "turn":
        write(`${at} turn ${++turns}`);
        return;
      case "model-reply": {
        if (step.failed !== undefined) {
          write(`${at}   model request failed: ${t(step.failed)}`);
          return;
        }
        const cost = step.costUsd ? `, $${step.costUsd.toFixed(4)}` : "";
        write(`${at}   model replied (${step.tokens} tokens${cost})`);
        return;
      }
      case "tool-start":
        toolStarts.set(step.callId, event.time);
        write(`${at}   ${t(step.tool)} ${t(step.summary)}`);
        return;
      case "tool-end": {
        const began = toolStarts.get(step.callId) ?? event.time;
        const took = ((event.time - began) / 1000).toFixed(2);
        write(`${at}   ${t(step.tool)} ${step.failed ? "failed" : "done"} in ${took}s`);
      }
    }
  };
}

/** How a trip's line starts, by its code (a limit's otherwise). */
export const TRIP_LABELS: Record<string, string> = {
  timeout: "timeout",
  aborted: "stopped",
  "replay-divergence": "replay diverged",
  "invalid-result": "invalid results",
  contradiction: "contradiction",
};

/** The line for a sandbox event worth a line, or undefined. */
export function sandboxLine(type: string, d: Record<string, unknown>): string | undefined {
  const times = d.repeated ? ` (and ${Number(d.repeated)} more like it)` : "";
  switch (type) {
    case "workspace.waiting":
      return `waiting: run ${t(d.heldBy)} holds ${t(d.tree)}; this run starts once that one is over`;
    case "container.started":
      return `sandbox started (${t(d.containerId).slice(0, 12)})`;
    case "image.stale":
    case "workspace.dead-apply":
      return `warning: ${t(d.warning)}`;
    case "workspace.still-lent":
      // A hand-back that left entries the sandbox uid's; a container that could not be removed is
      // the run's error, which says so.
      return d.warning ? `warning: ${t(d.warning)}` : undefined;
    case "limit.tripped":
      // The trip's code names it: a replay's divergence or a timeout is no "limit" (review, session 30).
      return `${TRIP_LABELS[String(d.code)] ?? "limit"}: ${t(d.message)}`;
    case "egress.denied":
      return `egress denied: ${t(d.host)}:${t(d.port)} (${t(d.reason)})${times}`;
    case "egress.failed":
      // Allowed, but this machine could not reach it (its DNS, its network): the tool in the sandbox
      // sees only "502 Bad Gateway" (review, session 27: said in --events only).
      return `egress failed: ${t(d.host)}:${t(d.port)} (${t(d.reason)}; an allowed host this machine could not reach)${times}`;
    case "gateway.refused":
      return `gateway refused ${t(d.method)} ${t(d.path)}: ${t(d.refused)}${times}`;
    case "container.exited":
      return d.stoppedByHost ? "sandbox stopped: Pi had finished" : `sandbox exited (code ${t(d.exitCode)})`;
    case "workspace.host-run-files": {
      // Allowed, but a tool run on this machine reads them (npm reads .npmrc on every command), follows
      // them (a link out of the tree) or misreads them (a name starting with '-'): said.
      const files = Array.isArray(d.files) ? d.files.map((f) => t((f as { path?: unknown })?.path ?? f)) : [];
      const more = Number(d.count) > files.length ? ` and ${Number(d.count) - files.length} more` : "";
      return `note: the run left files, links or names that tools on this machine read, follow or misread: ${files.join(", ")}${more}; review them before running such tools here`;
    }
    case "workspace.copied-in":
      // Copy mode: what could not travel (a file this user cannot read, a FIFO, a name that is not
      // UTF-8) is absent in the sandbox; said, not only in --events (review, session 29).
      return entriesNote("not copied into the sandbox", d.skipped);
    case "workspace.copied-out":
      return entriesNote("left out of what came back", d.refused);
    default:
      return undefined;
  }
}

/** "note: <what>: a (why), b (why)" for a non-empty list of { path, reason } (at most 20, as events carry). */
function entriesNote(what: string, list: unknown): string | undefined {
  if (!Array.isArray(list) || list.length === 0) return undefined;
  const named = list.map((e) => {
    const { path, reason } = (e ?? {}) as { path?: unknown; reason?: unknown };
    return `${t(path)} (${t(reason)})`;
  });
  return `note: ${what}: ${named.join(", ")}${list.length >= 20 ? ", and maybe more (--events lists them)" : ""}`;
}
