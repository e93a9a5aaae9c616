// The run's result comes from what the model said, as the host-side gateway relayed it, never from
// Pi's stdout: code in the sandbox (a git fsmonitor, a test runner, a postinstall script) can write
// Pi-shaped records there. Pi's stream still says *which* reply is the answer (its final-tool call
// id, its last message); the gateway's record of Pi's conversation says *what* the model answered.
// Where they disagree, the run fails: the sandbox's output contradicted the model.
import { isDeepStrictEqual } from "node:util";
import type { JsonSchema } from "../agent.js";
import type { Outcome } from "../pi/result-collector.js";
import { type GuardedArguments, prepareGuarded } from "./guarded-arguments.js";

/** The host's view of Pi's conversation with the model (the gateway's conversation ledger). */
export interface ModelEvidence {
  /** A tool call the model made in Pi's conversation, by id (`seq`, `index`: its exchange and place in that reply). */
  toolCall(id: string): EvidenceCall | undefined;
  /** Every call of one tool in Pi's conversation, in the conversation's order (exchange, then place in its reply). */
  callsOf(name: string): EvidenceCall[];
  /** The model's last reply in Pi's conversation (`stopReason`: the one Pi would record, when the reply says). */
  lastReply(): { text: string; toolCallCount: number; complete: boolean; stopReason?: string } | undefined;
  /**
   * Replies the client cut before their end, after which Pi asked the same again (`finished`: the
   * provider had finished it; `stopReason`: the one Pi would record).
   */
  withheld?(): Array<{
    seq: number;
    finished: boolean;
    text: string;
    toolCalls: Array<{ name: string; argumentsJson: string; index: number }>;
    stopReason?: string;
  }>;
  /** Two different continuations of one exchange of Pi's conversation (one was not Pi's), if any. */
  fork?(): { seq: number; other: number; continues: number } | undefined;
  /** The latest model request that failed or was refused since a reply last reached Pi whole, in the host's words. */
  failureSinceLastReply(): string | undefined;
}

interface EvidenceCall {
  /** The model's id for it ("" where its API gives none). */
  id?: string;
  name: string;
  argumentsJson: string;
  seq: number;
  index: number;
}

type Confirmation = { ok: true; outcome: Outcome } | { ok: false; contradiction: string };

export function confirmOutcome(
  claim: Outcome,
  evidence: ModelEvidence,
  context: {
    finalToolName?: string;
    schema?: JsonSchema;
    /** Pi's preparation of a call's arguments: prepareGuarded, or the run's check worker's answer (validate-in-worker.ts). */
    prepare?: (schema: JsonSchema, argumentsJson: string) => GuardedArguments;
  },
): Confirmation {
  const contradiction = (why: string): Confirmation => ({ ok: false, contradiction: why });
  // Which branch was Pi's cannot be told, so neither is evidence, whatever the claim.
  const fork = evidence.fork?.();
  if (fork) {
    return contradiction(
      `two different requests continued the model's reply of exchange ${fork.continues} (exchanges ${fork.seq} and ${fork.other}): one came from inside the sandbox, not from Pi`,
    );
  }
  if (claim.kind === "structured") {
    // Patterns first in a worker with a time bound (guarded-arguments.ts): the model chose the strings.
    const prepare = (argumentsJson: string) => (context.prepare ?? prepareGuarded)(context.schema ?? {}, argumentsJson);
    // A final call begun in a reply cut before its end counts whatever its (cut) arguments say.
    const discarded = withheldAnswer(evidence, (reply) =>
      reply.toolCalls.some(
        (call) => call.name === context.finalToolName && (!reply.finished || prepare(call.argumentsJson).ok),
      ),
    );
    if (discarded) return contradiction(discarded);
    // The answer is the model's first final call Pi accepts, in the conversation's order: Pi's
    // final tool ends its loop there. Not the first claim on Pi's stdout, whose order the sandbox
    // writes, nor a later call: code in the sandbox that took over Pi's requests (Node's debugger
    // through SIGUSR1, /proc/<pid>/mem) could answer the model's accepted call with a forged
    // rejection and ask again until it liked the answer (review, session 36).
    let answer: (EvidenceCall & { value: unknown }) | undefined;
    for (const call of context.finalToolName ? evidence.callsOf(context.finalToolName) : []) {
      const prepared = prepare(call.argumentsJson);
      if (prepared.ok) {
        answer = { ...call, value: prepared.value };
        break;
      }
      // One the host cannot check (a pattern past its bound, too many items for uniqueItems) may
      // be one Pi accepted: which call is the answer cannot be told (review of session 36's fixes).
      if ("uncheckable" in prepared)
        return contradiction(
          `the host cannot check the model's final call ${call.index + 1} of exchange ${call.seq} (${prepared.reason}), so which of its final calls is the answer cannot be told`,
        );
    }
    let confirmed: { value: unknown } | undefined;
    for (const { callId, value } of claim.claims) {
      const call = evidence.toolCall(callId);
      if (!call)
        return contradiction(
          `Pi's output reports a final result for call ${quote(callId)}, which the model never made`,
        );
      if (call.name !== context.finalToolName) {
        return contradiction(
          `Pi's output reports call ${quote(callId)} as the final result; the model called ${quote(call.name)}`,
        );
      }
      const prepared = prepare(call.argumentsJson);
      if (!prepared.ok) {
        return contradiction(
          `Pi's output reports call ${quote(callId)} as accepted; the model's arguments fail Pi's own check (${prepared.reason})`,
        );
      }
      if (!isDeepStrictEqual(prepared.value, value)) {
        return contradiction(
          `Pi's output reports ${excerpt(value)} for call ${quote(callId)}; the model sent ${excerpt(prepared.value)}`,
        );
      }
      // Pi names a call without an id (Google's) by a number of its own, which the ledger places at
      // the newest such call: one without an id is the answer when it says the answer's value.
      const isAnswer =
        answer !== undefined &&
        ((call.seq === answer.seq && call.index === answer.index) ||
          (answer.id === "" && call.id === "" && isDeepStrictEqual(prepared.value, answer.value)));
      if (isAnswer && !confirmed) confirmed = { value: prepared.value };
    }
    if (!confirmed) {
      return contradiction(
        answer
          ? `Pi's output reports no final result for the model's first final call Pi accepts (exchange ${answer.seq}, call ${answer.index + 1} of its reply), which ended Pi's conversation, but for ${claim.claims.length} other call(s): the model was asked again after it had answered`
          : "Pi's output reports a final result, but the model made no final call that passes Pi's check",
      );
    }
    return { ok: true, outcome: { ...claim, value: confirmed.value } };
  }
  if (claim.kind === "text") {
    // Text with no tool call: an answer, ended (an ordinary stop) or being written when it was cut.
    const discarded = withheldAnswer(
      evidence,
      (reply) =>
        reply.toolCalls.length === 0 &&
        (reply.finished ? (reply.stopReason ?? "stop") === "stop" : reply.text.trim() !== ""),
    );
    if (discarded) return contradiction(discarded);
    const reply = evidence.lastReply();
    if (!reply) return contradiction(`Pi's output reports the answer ${excerpt(claim.text)}; the model sent no reply`);
    if (!reply.complete)
      return contradiction("the model's last reply did not reach the host complete, so it cannot be confirmed");
    if (reply.text !== claim.text) {
      return contradiction(
        `Pi's output reports the answer ${excerpt(claim.text)}; the model's last reply was ${excerpt(reply.text)}`,
      );
    }
    // Pi answers with a reply that ends the conversation. One that called tools was a step (Pi ran
    // them and would have asked again), and one cut at the token limit Pi reports as no result.
    if (reply.toolCallCount > 0) {
      return contradiction(
        `Pi's output reports the answer ${excerpt(claim.text)}; the model's last reply with that text also called ${reply.toolCallCount} tool(s), so it was a step, not the answer`,
      );
    }
    if (reply.stopReason !== undefined && reply.stopReason !== "stop") {
      return contradiction(
        `Pi's output reports the answer ${excerpt(claim.text)}; the model's last reply ended with stop reason ${quote(reply.stopReason)}, not an answer`,
      );
    }
    return { ok: true, outcome: { kind: "text", text: reply.text } };
  }
  if (claim.kind === "model-error") {
    // After a reply that reached Pi whole and ended the conversation (no tool call, an ordinary
    // stop), Pi asks the model nothing more: no request is left to fail.
    const reply = evidence.lastReply();
    if (reply?.complete && reply.toolCallCount === 0 && (reply.stopReason ?? "stop") === "stop") {
      return contradiction(
        "Pi's output reports a model error, but the model's last reply reached Pi whole and ended the conversation",
      );
    }
    // The kind passes as claimed (the sandbox can make a request fail for real anyway); the words
    // are the host's, never Pi's, which the sandbox could have written ("rotate the key at ...").
    const failure = evidence.failureSinceLastReply();
    return {
      ok: true,
      outcome: {
        kind: "model-error",
        message:
          failure ??
          "Pi reported a model error, but no model request failed after the model's last reply reached it (the report came from inside the sandbox; its words are in the run's events)",
      },
    };
  }
  // A failure cannot be forged into a success: missing results pass as claimed.
  return { ok: true, outcome: claim };
}

/**
 * A reply in which the model answered or had begun to (`answered`), which the client cut before its
 * end and asked again for: the words of the contradiction, or undefined. Code in the sandbox that
 * took over Pi's requests could otherwise discard every answer it disliked until the model gave one
 * it liked (review, session 36), cutting it as soon as its first words showed what it was (review of
 * session 38's fix); an honest Pi reads a reply to its end.
 */
function withheldAnswer(
  evidence: ModelEvidence,
  answered: (reply: ReturnType<NonNullable<ModelEvidence["withheld"]>>[number]) => boolean,
): string | undefined {
  const reply = evidence.withheld?.().find(answered);
  return reply
    ? `the model ${reply.finished ? "answered" : "had begun to answer"} in exchange ${reply.seq}, and the client cut that reply before its end and asked the same again, as code in the sandbox that discards answers it dislikes would (Pi reads a reply to its end)`
    : undefined;
}

function quote(value: string): string {
  return JSON.stringify(value.length > 80 ? `${value.slice(0, 79)}…` : value);
}

function excerpt(value: unknown): string {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return quote(text ?? String(value));
}
