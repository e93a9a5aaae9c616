// A model that keeps answering with a final result the schema refuses: Pi sends the validation
// error back and asks again, without end (a new user's first run did 4,369 turns in 15 minutes).
// This watch judges each reply of Pi's conversation as the gateway relayed it (the host's evidence,
// never Pi's stream): every call of the final tool is prepared as Pi prepares it and validated on
// the host exactly as the run's result would be. After MAX_CONSECUTIVE_INVALID_RESULTS replies in a
// row whose final result is invalid, the run stops with code "invalid-result", naming the last
// failure. A reply that does other work (another tool call, text) starts the count again.
//
// A run judges its replies with observeInWorker: the checks run in the run's check worker
// (validate-in-worker.ts) with a deadline and a memory cap, never on the controller's main thread,
// whose timers (the run's timeout) and signals must keep working: the schema may be the
// repository's, and can make a check take exponential time (review, session 35). A check past its
// bounds stops the run at once, as one Pi cannot finish either. `observe` makes the same checks on
// the calling thread.
import type { JsonSchema } from "../agent.js";
import type { ModelReply } from "../gateway/apis/api-codec.js";
import { prepareGuarded } from "./guarded-arguments.js";
import type { ResultValidator } from "./result-validator.js";
import type { Trip } from "./run-trip.js";
import { isUnchecked, UNBOUNDED_CHECK_HINT } from "./validate-in-worker.js";

const UNCHECKABLE_HINTS = {
  pattern:
    "Pi checks that pattern inside the sandbox with no time bound, so the run was stopped. Write the pattern without nested or overlapping repetition (such as (a|a)* or (a+)+), or drop it from the schema.",
  "unique-items":
    "Ask for fewer items in the prompt, or drop uniqueItems from the schema (checking it compares every pair of an array's items).",
  bounds: UNBOUNDED_CHECK_HINT,
};

type Uncheckable = keyof typeof UNCHECKABLE_HINTS;
type Judged = { problem?: string; uncheckable?: Uncheckable };

/**
 * The final calls of one reply judged at most: a reply may carry thousands (its arguments up to the
 * gateway's reply cap), each a check; a model that means its result sends one.
 */
export const MAX_FINALS_JUDGED = 4;

/** Pi tells the model what was wrong each time; a model that can fix it does so in one or two. */
export const MAX_CONSECUTIVE_INVALID_RESULTS = 5;

interface ResultCheck {
  finalToolName: string;
  schema: JsonSchema;
  validator: ResultValidator;
}

export interface InvalidResult {
  /** 1, 2, ...: invalid final results in a row so far. */
  consecutive: number;
  reason: string;
}

export class InvalidResultWatch {
  #consecutive = 0;
  /** The worker's verdicts, in the order of the replies (observeInWorker). */
  #judging: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly check: ResultCheck,
    private readonly limit = MAX_CONSECUTIVE_INVALID_RESULTS,
  ) {}

  /**
   * One reply of Pi's conversation that reached Pi whole. Returns what was wrong with its final
   * result (if it had an invalid one) and the trip once the cap is reached.
   */
  observe(reply: ModelReply): { invalid?: InvalidResult; trip?: Trip } {
    const finals = finalCalls(reply, this.check.finalToolName);
    return this.#verdict(finals.map((call) => this.#judge(call.argumentsJson)));
  }

  /**
   * observe, with the checks in the run's check worker: the verdicts come in the order of the
   * replies. Nothing once the run has ended (the worker closed while a check waited).
   */
  observeInWorker(reply: ModelReply): Promise<{ invalid?: InvalidResult; trip?: Trip }> {
    const finals = finalCalls(reply, this.check.finalToolName);
    const verdict = this.#judging.then(async () => {
      const judged: Judged[] = [];
      for (const call of finals) {
        const one = await this.#judgeInWorker(call.argumentsJson);
        if (one === "stopped") return {};
        judged.push(one);
        // One the host cannot check stops the run (#verdict): the others need not be tried.
        if (one.uncheckable) break;
      }
      return this.#verdict(judged);
    });
    this.#judging = verdict.catch(() => {});
    return verdict;
  }

  /** Resolves once the verdicts on every reply observed so far are in (observeInWorker). */
  settled(): Promise<unknown> {
    return this.#judging;
  }

  #verdict(judged: Judged[]): { invalid?: InvalidResult; trip?: Trip } {
    // Pi checks the same pattern on the same string in the sandbox, without a bound: it will not
    // answer, and the run would spin until its timeout, whose hint says to raise it (review,
    // session 31). Stopped at once instead; so is a value whose check ran past the worker's bounds
    // (Pi's pi-schema has none either).
    const stalled = judged.find((j) => j.uncheckable);
    if (stalled)
      return {
        invalid: { consecutive: ++this.#consecutive, reason: oneLine(stalled.problem!) },
        trip: {
          code: "invalid-result",
          message: `The model's final result cannot be checked: ${oneLine(stalled.problem!)}.`,
          hint: UNCHECKABLE_HINTS[stalled.uncheckable!],
        },
      };
    const problems = judged.map((j) => j.problem);
    if (judged.length === 0 || problems.some((problem) => problem === undefined)) {
      this.#consecutive = 0;
      return {};
    }
    const invalid = { consecutive: ++this.#consecutive, reason: oneLine(problems[problems.length - 1]!) };
    if (invalid.consecutive < this.limit) return { invalid };
    return {
      invalid,
      trip: {
        code: "invalid-result",
        message: `The model returned ${invalid.consecutive} invalid final results in a row; the last: ${invalid.reason}.`,
      },
    };
  }

  /** Why a final-tool call's arguments are not a valid result, as the host judges the result. */
  #judge(argumentsJson: string): Judged {
    // The schema's patterns are tried in a worker with a time bound first (a replayed record chose both).
    const prepared = prepareGuarded(this.check.schema, argumentsJson);
    if (!prepared.ok)
      return { problem: prepared.reason, ...("uncheckable" in prepared ? { uncheckable: prepared.uncheckable } : {}) };
    const checked = this.check.validator.validate(prepared.value);
    return checked.ok ? {} : { problem: checked.issues.join("; ") };
  }

  /** #judge in the run's check worker; "stopped" when the run ended first. */
  async #judgeInWorker(argumentsJson: string): Promise<Judged | "stopped"> {
    const worker = this.check.validator.worker;
    const prepared = await worker.prepare(this.check.schema, argumentsJson);
    if (!prepared.ok) {
      if (isUnchecked(prepared))
        return prepared.uncheckable === "stopped" ? "stopped" : { problem: prepared.reason, uncheckable: "bounds" };
      return { problem: prepared.reason, ...("uncheckable" in prepared ? { uncheckable: prepared.uncheckable } : {}) };
    }
    const checked = await worker.validate(prepared.value);
    if (checked.ok) return {};
    if (isUnchecked(checked))
      return checked.uncheckable === "stopped" ? "stopped" : { problem: checked.reason, uncheckable: "bounds" };
    return { problem: checked.issues.join("; ") };
  }
}

/** The reply's final-tool calls the watch judges: the first MAX_FINALS_JUDGED of distinct arguments. */
function finalCalls(reply: ModelReply, finalToolName: string): ModelReply["toolCalls"] {
  const seen = new Set<string>();
  const calls: ModelReply["toolCalls"] = [];
  for (const call of reply.toolCalls) {
    if (call.name !== finalToolName || seen.has(call.argumentsJson)) continue;
    seen.add(call.argumentsJson);
    calls.push(call);
    if (calls.length === MAX_FINALS_JUDGED) break;
  }
  return calls;
}

/** A reason for a message: one line, at most 400 characters (Pi's reports list every failing field). */
function oneLine(reason: string): string {
  const line = reason.replace(/\s+/g, " ").trim();
  return line.length > 400 ? `${line.slice(0, 399)}…` : line;
}
