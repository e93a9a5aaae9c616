// One ordered timeline per run: Pi's events and the sandbox's own (container lifecycle,
// gateway requests, limit trips, the result), each with the run id, a sequence number and
// a monotonic time since the run started.
import { performance } from "node:perf_hooks";
import { type Progress, progressOf } from "../pi/progress.js";

export interface RunEvent {
  runId: string;
  seq: number;
  /** Milliseconds since the run started, from a monotonic clock. */
  time: number;
  source: "pi" | "sandbox";
  /** Pi's event type, or a sandbox type such as "container.started". */
  type: string;
  /** Pi's event verbatim, or the sandbox event's fields. */
  data: Record<string, unknown>;
  /** For Pi's events that mark a step (turn, tool start/end, model reply): that step, normalised. */
  progress?: Progress;
}

export type RunEventListener = (event: RunEvent) => void;

export class RunTimeline {
  private seq = 0;
  private readonly recent: RunEvent[] = [];
  private readonly started = performance.now();

  constructor(
    readonly runId: string,
    private readonly listeners: RunEventListener[],
    private readonly keepRecent = 20,
  ) {}

  elapsed(): number {
    return Math.round((performance.now() - this.started) * 1000) / 1000;
  }

  pi(event: { type: string } & Record<string, unknown>): void {
    this.emit("pi", event.type, event, progressOf(event));
  }

  sandbox(type: string, data: Record<string, unknown> = {}): void {
    this.emit("sandbox", type, data);
  }

  /** The last few events, newest last: evidence attached to errors. */
  lastEvents(): RunEvent[] {
    return [...this.recent];
  }

  private emit(source: RunEvent["source"], type: string, data: Record<string, unknown>, progress?: Progress): void {
    const event: RunEvent = { runId: this.runId, seq: this.seq++, time: this.elapsed(), source, type, data };
    if (progress) event.progress = progress;
    this.recent.push(event);
    if (this.recent.length > this.keepRecent) this.recent.shift();
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A caller's listener must not break the run.
      }
    }
  }
}
