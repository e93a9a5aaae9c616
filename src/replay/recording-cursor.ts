// Which recorded answer a replayed generation request gets, and whether it diverges. Pure: fed the
// requests in the order they arrive. Before answering, the request's conversation (the api codec's
// neutral form: no ids, cache markers or other volatile fields) is compared with the recorded one,
// both read by today's codec. A difference is a divergence: strict replay stops at the first (the
// caller trips the run), lenient replay reports it and answers anyway. Some divergences end any
// replay: the recording has no more generations, or the one due was not stored whole.
import type { ApiCodec, ModelRequest } from "../gateway/apis/api-codec.js";
import { firstDifference } from "../gateway/apis/conversation-diff.js";
import { loadBytes, type RecordedExchange } from "../record/record-format.js";

export type ReplayMode = "strict" | "lenient";
export type ReplaySpeed = "fast" | "recorded";

export interface Divergence {
  /** The generation (1, 2, ...) whose request differed. */
  generation: number;
  /** What differs, in one line (e.g. `tool result of call 2 (bash) differs: recorded "ok", now "FAIL"`). */
  difference: string;
  /** The replay cannot go on whatever the mode (no recorded answer to give). */
  fatal: boolean;
}

export interface ReplayReport {
  /** Generations answered from the recording. */
  answered: number;
  /** Generations in the recording. */
  recorded: number;
  divergences: Divergence[];
  /** With compareContext off: how the model, system prompt or tools differ from the recording, if they do. */
  contextDifference?: string;
}

interface CursorOptions {
  exchanges: readonly RecordedExchange[];
  codec: ApiCodec;
  mode: ReplayMode;
  compareContext?: boolean;
  onDivergence(divergence: Divergence): void;
  onContextDifference?(difference: string): void;
}

type Answer =
  | { kind: "play"; exchange: RecordedExchange }
  /** The recorded upstream never answered. */
  | { kind: "no-response" }
  /** Not answered from the recording (a divergence stopped the replay). */
  | { kind: "refuse"; message: string };

export class RecordingCursor {
  readonly #options: CursorOptions;
  readonly #divergences: Divergence[] = [];
  #generations = 0;
  #answered = 0;
  #stopped = false;
  #contextDifference: string | undefined;

  constructor(options: CursorOptions) {
    this.#options = options;
  }

  /** The answer to the next generation request (`subpath` below the provider's base URL). */
  next(subpath: string, body: Buffer): Answer {
    const generation = ++this.#generations;
    if (this.#stopped) return { kind: "refuse", message: "sandbox-run replay stopped at an earlier divergence" };
    const { exchanges } = this.#options;
    const recorded = exchanges[generation - 1];
    if (!recorded) {
      this.#stop(generation, `the run asked for generation ${generation}, but the recording holds ${exchanges.length}`);
      return { kind: "refuse", message: "sandbox-run replay: the recording has no more model replies" };
    }
    const difference = this.#compare(generation, recorded, subpath, body);
    if (difference) {
      const fatal = this.#options.mode === "strict";
      if (fatal) {
        this.#stop(generation, difference);
        return { kind: "refuse", message: `sandbox-run replay diverged at generation ${generation}: ${difference}` };
      }
      this.#diverge({ generation, difference, fatal: false });
    }
    const unplayable = recorded.omitted
      ? `was not stored (${recorded.omitted})`
      : recorded.response?.bodyTruncated
        ? "was cut at the record's size cap"
        : undefined;
    if (unplayable) {
      this.#stop(generation, `the recorded reply ${generation} ${unplayable}`);
      return { kind: "refuse", message: `sandbox-run replay cannot answer generation ${generation}` };
    }
    this.#answered++;
    return recorded.response ? { kind: "play", exchange: recorded } : { kind: "no-response" };
  }

  report(): ReplayReport {
    return {
      answered: this.#answered,
      recorded: this.#options.exchanges.length,
      divergences: [...this.#divergences],
      ...(this.#contextDifference !== undefined ? { contextDifference: this.#contextDifference } : {}),
    };
  }

  /** How the request differs from the recorded one, or undefined. */
  #compare(generation: number, recorded: RecordedExchange, subpath: string, body: Buffer): string | undefined {
    const { codec } = this.#options;
    const before = recordedRequest(codec, recorded);
    if ("problem" in before) return `the recorded request ${generation} cannot be compared: ${before.problem}`;
    const now = parseBody(codec, subpath, body);
    if (!now.ok) return `the request cannot be read as a conversation: ${now.reason}`;
    if (this.#options.compareContext !== false) return firstDifference(before.request, now.request);
    const context = firstDifference({ ...before.request, messages: [] }, { ...now.request, messages: [] });
    if (context && this.#contextDifference === undefined) {
      this.#contextDifference = context;
      notify(() => this.#options.onContextDifference?.(context));
    }
    const { model, system, tools } = before.request;
    return firstDifference(before.request, { ...now.request, model, system, tools });
  }

  #stop(generation: number, difference: string): void {
    this.#stopped = true;
    this.#diverge({ generation, difference, fatal: true });
  }

  #diverge(divergence: Divergence): void {
    this.#divergences.push(divergence);
    notify(() => this.#options.onDivergence(divergence));
  }
}

/** A caller's reaction must not break the replay. */
function notify(callback: () => void): void {
  try {
    callback();
  } catch {
    // ignored
  }
}

function parseBody(
  codec: ApiCodec,
  subpath: string,
  body: Buffer,
): { ok: true; request: ModelRequest } | { ok: false; reason: string } {
  let value: unknown;
  try {
    value = JSON.parse(body.toString("utf8"));
  } catch {
    return { ok: false, reason: "the body is not JSON" };
  }
  return codec.parseRequest(subpath, value);
}

/** The recorded request in neutral form, parsed by today's codec (so both sides are read alike). */
function recordedRequest(codec: ApiCodec, recorded: RecordedExchange): { request: ModelRequest } | { problem: string } {
  if (recorded.omitted || !recorded.request)
    return { problem: `it was not stored (${recorded.omitted ?? "no request"})` };
  if (recorded.request.bodyTruncated) return { problem: "its body was cut at the record's size cap" };
  // The recorded path names the route first: /<route>/<path below the provider's base URL>.
  const subpath = recorded.path.replace(/^\/[^/]*/, "");
  const parsed = parseBody(codec, subpath, loadBytes(recorded.request.body));
  return parsed.ok ? { request: parsed.request } : { problem: parsed.reason };
}
