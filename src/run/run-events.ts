// One ordered timeline per run: Pi's events and the sandbox's own (container lifecycle,
// gateway requests, limit trips, the result), each with the run id, a sequence number and
// a monotonic time since the run started. Every event, and every error the run ends with, leaves
// the run here scrubbed of the run's credential values (the gateway's, the policy's secrets: see
// forbid), whatever carries it on (the caller's onEvent, --events, the library's stream, the
// record, the --json envelope, stderr).
import { performance } from "node:perf_hooks";
import { type Progress, progressOf } from "../pi/progress.js";
import { credentialForms, TextScrubber } from "../util/scrubber.js";

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

/** A listener of a run's events; an async one is not awaited (events keep their order and pace), and its rejection is ignored. */
export type RunEventListener = (event: RunEvent) => unknown;

export class RunTimeline {
  private seq = 0;
  private readonly recent: RunEvent[] = [];
  private readonly started = performance.now();
  #forbidden: string[] = [];
  #scrubber: TextScrubber | undefined;

  constructor(
    readonly runId: string,
    private readonly listeners: RunEventListener[],
    private readonly keepRecent = 20,
  ) {}

  elapsed(): number {
    return Math.round((performance.now() - this.started) * 1000) / 1000;
  }

  /**
   * Credential values that must not leave the run (header values the gateway adds, policy
   * secrets): from now on every event, and scrub()'s and scrubError()'s inputs, lose them in
   * every form util/scrubber.ts knows. Called when the run resolves them, before the sandbox starts.
   */
  forbid(values: readonly string[]): void {
    this.#forbidden = [...new Set([...this.#forbidden, ...values])];
    const forms = credentialForms(this.#forbidden);
    this.#scrubber = forms.length > 0 ? new TextScrubber(forms) : undefined;
  }

  /** The value with the forbidden credentials taken out of its strings; the same value when none was in it. */
  scrub<T>(value: T): T {
    return this.#scrubber ? (scrubbedValue(value, this.#scrubber, 0) as T) : value;
  }

  /** Takes the forbidden credentials out of an error the run ends with (its texts, its cause's), in place. */
  scrubError(error: unknown): void {
    const scrubber = this.#scrubber;
    if (!scrubber) return;
    let e: unknown = error;
    for (let depth = 0; depth < 4 && e instanceof Error; depth++) {
      const fields = e as unknown as Record<string, unknown>;
      for (const name of ["message", "stack", "shortMessage", "hint", "stderrTail"]) {
        const value = fields[name];
        if (typeof value === "string") {
          const clean = scrubber.string(value);
          if (clean !== value) fields[name] = clean;
        }
      }
      // And what a failed run says it left (file names the sandbox chose; review, session 27).
      for (const name of ["lastEvents", "changedFiles", "hostRunFiles"])
        if (fields[name] !== null && typeof fields[name] === "object")
          fields[name] = scrubbedValue(fields[name], scrubber, 0);
      e = e.cause;
    }
  }

  pi(event: { type: string } & Record<string, unknown>): void {
    const clean = this.scrub(event);
    this.emit("pi", clean.type, clean, progressOf(clean));
  }

  sandbox(type: string, data: Record<string, unknown> = {}): void {
    this.emit("sandbox", type, this.scrub(data));
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
    for (const listener of this.listeners) callListener(listener, event);
  }
}

/**
 * Strings with the credentials replaced, walking arrays and plain objects (what events are: JSON
 * values), their keys too; anything else is kept as it is. A part with nothing to replace is the
 * same object. Past MAX_SCRUB_DEPTH (the sandbox chooses how deep its JSON goes) the rest is
 * written out as JSON text and scrubbed as one string.
 */
function scrubbedValue(value: unknown, scrubber: TextScrubber, depth: number): unknown {
  if (typeof value === "string") return scrubber.string(value);
  if (value === null || typeof value !== "object") return value;
  const proto = Object.getPrototypeOf(value);
  if (!Array.isArray(value) && proto !== Object.prototype && proto !== null) return value;
  if (depth > MAX_SCRUB_DEPTH) {
    // Pi's lines are at most 128 levels deep (pi-events.ts); anything deeper is not written out.
    let text: string;
    try {
      text = JSON.stringify(value);
    } catch {
      return TOO_DEEP;
    }
    const clean = scrubber.string(text);
    return clean === text ? value : clean;
  }
  if (Array.isArray(value)) {
    let out: unknown[] | undefined;
    value.forEach((item, i) => {
      const clean = scrubbedValue(item, scrubber, depth + 1);
      if (clean !== item) (out ??= [...value])[i] = clean;
    });
    return out ?? value;
  }
  let changed = false;
  const entries = Object.entries(value).map(([key, item]): [string, unknown] => {
    const cleanKey = scrubber.string(key);
    const clean = scrubbedValue(item, scrubber, depth + 1);
    if (cleanKey !== key || clean !== item) changed = true;
    return [cleanKey, clean];
  });
  return changed ? Object.fromEntries(entries) : value;
}

const MAX_SCRUB_DEPTH = 64;
const TOO_DEEP = "[a structure too deep to check for credentials, left out]";

/**
 * Calls a caller's listener: neither its throw nor, for an async one, its rejection breaks the run.
 * An async listener that rejected (a log service down) was an unhandled rejection, which ends a
 * Node process mid-run and leaves the workspace lent to the sandbox (review, session 34).
 */
export function callListener(listener: RunEventListener, event: RunEvent): void {
  try {
    const returned: unknown = listener(event);
    if (
      returned !== null &&
      typeof returned === "object" &&
      typeof (returned as PromiseLike<unknown>).then === "function"
    )
      Promise.resolve(returned as PromiseLike<unknown>).catch(() => {});
  } catch {
    // A caller's listener must not break the run.
  }
}
