// Watches Pi's events as they stream past and decides what the run produced. It keeps only
// the few facts it needs (never the events), so memory stays flat however long the run is.
import type { Usage } from "../sandbox-contract.js";
import { addReported } from "../util/reported-count.js";
import {
  type AssistantMessage,
  asAgentSettled,
  asAssistantMessageEnd,
  asAutoRetryEnd,
  asToolExecutionEnd,
  type PiEvent,
  textBlocksOf,
} from "./pi-events.js";

export type { Usage };

/** A final-tool call Pi's stream says it accepted: a claim, until the model's reply confirms it. */
interface FinalCallClaim {
  callId: string;
  value: unknown;
}

/** What Pi's event stream says the run produced. Claims, all of them: code in the sandbox can write this stream. */
export type Outcome =
  | { kind: "text"; text: string }
  /** `claims`: every accepted final-tool call the stream reported, in order (the first is the answer). */
  | { kind: "structured"; value: unknown; claims: FinalCallClaim[] }
  | { kind: "model-error"; message: string }
  | { kind: "no-result"; reason: string };

interface ResultCollectorOptions {
  /** The tool that delivers the structured result; set means schema mode. */
  finalToolName?: string;
}

/** More accepted final calls than a model makes in one reply: the rest are not kept. */
const MAX_FINAL_CLAIMS = 16;

export class ResultCollector {
  readonly #finalToolName: string | undefined;
  #turns = 0;
  #toolCalls = 0;
  #settled = false;
  #usage: Usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: 0 };
  #lastAssistant: AssistantMessage | undefined;
  /** Accepted final-tool calls as the stream reported them (bounded: a forger may repeat them). */
  readonly #finalClaims: FinalCallClaim[] = [];
  #rejectedFinalCalls = 0;
  #lastRejection: string | undefined;
  #retryFinalError: string | undefined;

  constructor(options: ResultCollectorOptions = {}) {
    this.#finalToolName = options.finalToolName;
  }

  get turns(): number {
    return this.#turns;
  }
  get toolCalls(): number {
    return this.#toolCalls;
  }
  get settled(): boolean {
    return this.#settled;
  }
  get usage(): Usage {
    return { ...this.#usage };
  }

  observe(event: PiEvent): void {
    switch (event.type) {
      case "turn_start":
        this.#turns++;
        return;
      case "tool_execution_start":
        this.#toolCalls++;
        return;
      case "message_end":
        this.#observeAssistant(asAssistantMessageEnd(event)?.message);
        return;
      case "tool_execution_end":
        this.#observeToolEnd(event);
        return;
      case "auto_retry_end": {
        const end = asAutoRetryEnd(event);
        if (end && !end.success) this.#retryFinalError = end.finalError;
        return;
      }
      case "agent_settled":
        if (asAgentSettled(event)) this.#settled = true;
        return;
    }
  }

  outcome(): Outcome {
    const first = this.#finalClaims[0];
    if (first) return { kind: "structured", value: first.value, claims: [...this.#finalClaims] };
    const last = this.#lastAssistant;
    if (!last) return this.#noResult("Pi produced no assistant message");
    if (last.stopReason === "error" || last.stopReason === "aborted") {
      const message =
        last.errorMessage ??
        this.#retryFinalError ??
        `the model request ended with stopReason "${last.stopReason}" and no error message`;
      return { kind: "model-error", message };
    }
    if (this.#finalToolName !== undefined)
      return this.#noResult(this.#missingFinalCallReason(this.#finalToolName, last));
    // A turn that ended in a tool call is a step, not an answer: Pi only stops there when a
    // tool terminated the run or the run was cut short.
    if (last.stopReason === "toolUse")
      return this.#noResult("the agent stopped after a tool call without a final answer");
    // Pi's own print mode treats a truncated reply as a failure rather than an answer.
    if (last.stopReason === "length")
      return this.#noResult("the model reached its output token limit before finishing");
    const text = textBlocksOf(last.content).join("\n");
    if (text.length === 0)
      return this.#noResult(`the model's final message contained no text (stopReason "${last.stopReason}")`);
    return { kind: "text", text };
  }

  #observeAssistant(message: AssistantMessage | undefined): void {
    if (!message) return;
    this.#lastAssistant = message;
    const { usage } = message;
    // Pi's report, which the sandbox can write (util/reported-count.ts).
    this.#usage.input = addReported(this.#usage.input, usage.input);
    this.#usage.output = addReported(this.#usage.output, usage.output);
    this.#usage.cacheRead = addReported(this.#usage.cacheRead, usage.cacheRead);
    this.#usage.cacheWrite = addReported(this.#usage.cacheWrite, usage.cacheWrite);
    this.#usage.totalTokens = addReported(this.#usage.totalTokens, usage.totalTokens);
    this.#usage.cost = addReported(this.#usage.cost, usage.cost.total);
  }

  #observeToolEnd(event: PiEvent): void {
    if (this.#finalToolName === undefined || this.#finalClaims.length >= MAX_FINAL_CLAIMS) return;
    const end = asToolExecutionEnd(event);
    if (!end || end.toolName !== this.#finalToolName) return;
    if (end.isError) {
      // Pi rejected the arguments (schema validation) and fed the error back to the model;
      // keep the message in case the model never gets it right.
      this.#rejectedFinalCalls++;
      this.#lastRejection = textBlocksOf(end.result.content ?? []).join("\n") || undefined;
      return;
    }
    // The first accepted call is the answer; the tool terminates the run, so a later one would only
    // come from a model that called it twice, or from a forger. All are kept for the host to check.
    this.#finalClaims.push({ callId: end.toolCallId, value: end.result.details });
  }

  #missingFinalCallReason(tool: string, last: AssistantMessage): string {
    if (this.#rejectedFinalCalls > 0) {
      const times = this.#rejectedFinalCalls === 1 ? "once" : `${this.#rejectedFinalCalls} times`;
      const why = this.#lastRejection ? `; last rejection: ${this.#lastRejection}` : "";
      return `the model called ${tool} ${times} but Pi rejected every call${why}`;
    }
    if (last.stopReason === "toolUse") return `the agent stopped after a tool call without calling ${tool}`;
    if (last.stopReason === "length") return `the model reached its output token limit without calling ${tool}`;
    return `the model ended its turn without calling ${tool} (stopReason "${last.stopReason}")`;
  }

  // A stream that stops before agent_settled means Pi did not finish; say so, since it is
  // usually the real cause.
  #noResult(reason: string): Outcome {
    return {
      kind: "no-result",
      reason: this.#settled ? reason : `${reason} (the event stream ended before Pi settled)`,
    };
  }
}
