// The host's view of what the model said in Pi's conversation, built only from what the gateway
// relayed (never from Pi's stdout, which code in the sandbox can write to). Pure: fed the
// gateway's exchanges in the order they ended.
//
// The chain: the run's first generation request comes from Pi (nothing else runs before its
// first tool call). A later request is Pi's ("on-chain") when it
//   - extends the previous on-chain request: the same messages, then the model's reply to it
//     (its text and tool calls), then one result for each of those tool calls; or
//   - repeats the previous on-chain request whose reply did not reach Pi whole (a retry).
// Anything else, e.g. code in the sandbox calling the gateway itself, is off-chain: relayed,
// counted and reported, but never evidence. Model, system prompt and tools must stay as they were.
//
// What Pi legitimately changes between two requests of one conversation, and how it is absorbed:
// - cache markers, thinking blocks and signatures, item ids, prompt-cache keys: dropped by the
//   api codecs' neutral form (api-codec.ts);
// - whitespace-only text blocks are not sent back, text blocks may be joined into one string,
//   and thinking without a signature may come back as text before the reply's text: the
//   assistant message's text must contain the reply's non-blank text, not equal it;
// - call ids: openai-responses replies carry "call_id|item_id" while requests carry call_id;
//   Google requests carry none (Pi makes ids up): ids are compared where both sides have one,
//   calls and results are otherwise matched by order and name;
// - tool arguments are sent back as the parsed object: compared as parsed JSON (Pi's parse);
// - Anthropic puts images of failed tool results in a user message after the results.
// Not absorbed (the chain breaks and later requests are off-chain): Pi's context compaction,
// which rewrites the history, and a second branch racing Pi's own request (first one wins).

import { parseToolCallArguments } from "../pi/tool-arguments.js";
import type {
  ConversationMessage,
  ConversationPart,
  ModelReply,
  ModelReplyToolCall,
  ModelRequest,
  PiStopReason,
} from "./apis/api-codec.js";
import { short } from "./apis/codec-support.js";
import { canonicalJson } from "./apis/conversation-diff.js";
import { sanitizeSurrogates } from "./apis/reply-support.js";

/** The parts of a GatewayExchange the ledger reads. */
export interface LedgerExchange {
  seq: number;
  request: ModelRequest;
  status: number;
  reply?: ModelReply;
  /** How the relay ended ("complete" when the whole response reached the client). */
  relay: string;
}

type OffChainReason =
  /** Another model, system prompt or tool list than Pi's conversation. */
  | "other-context"
  /** The same messages as a request whose reply already reached Pi. */
  | "repeat"
  /** Messages that do not continue Pi's conversation. */
  | "not-an-extension";

type ChainVerdict =
  | { onChain: true; as: "first" | "extension" | "retry" }
  | { onChain: false; reason: OffChainReason; detail: string };

interface OnChainExchange {
  seq: number;
  status: number;
  /** The whole reply reached Pi: 2xx, relayed to the end, complete, no error. */
  delivered: boolean;
  reply?: ModelReply;
}

interface LedgerToolCall extends ModelReplyToolCall {
  /** The exchange whose reply made the call. */
  seq: number;
  /** Its position among that reply's tool calls. */
  index: number;
}

export class ConversationLedger {
  #head: (OnChainExchange & { request: ModelRequest }) | undefined;
  #onChain = 0;
  #offChain = 0;
  readonly #toolCalls = new Map<string, LedgerToolCall>();
  /** Calls without an id, per exchange, in the order their replies were indexed. */
  readonly #idless = new Map<number, LedgerToolCall[]>();
  readonly #indexed = new Set<number>();

  /** Classifies an exchange and, when it is on-chain, makes it the conversation's latest. */
  add(exchange: LedgerExchange): ChainVerdict {
    const verdict = this.#classify(exchange);
    if (!verdict.onChain) {
      this.#offChain++;
      return verdict;
    }
    // An extension proves Pi received the reply it extends, whatever the relay said.
    if (verdict.as === "extension" && this.#head) this.#index(this.#head);
    this.#onChain++;
    this.#head = {
      seq: exchange.seq,
      status: exchange.status,
      delivered: delivered(exchange),
      ...(exchange.reply ? { reply: exchange.reply } : {}),
      request: exchange.request,
    };
    if (this.#head.delivered) this.#index(this.#head);
    return verdict;
  }

  /** The latest on-chain exchange: the reply the run's outcome is decided from. */
  get last(): OnChainExchange | undefined {
    if (!this.#head) return undefined;
    const { request: _request, ...last } = this.#head;
    return last;
  }

  /**
   * A tool call the model made in an on-chain reply that reached Pi, by the id Pi gives it. Google
   * replies may carry no ids; Pi then names a call `<tool>_<time>_<n>`: such an id finds the
   * newest reply's id-less call of that tool, when there is exactly one.
   */
  toolCall(id: string): LedgerToolCall | undefined {
    if (id === "") return undefined;
    const known = this.#toolCalls.get(id);
    if (known) return known;
    const made = /^(.+)_\d+_\d+$/.exec(id);
    if (!made) return undefined;
    for (const calls of [...this.#idless.values()].reverse()) {
      const named = calls.filter((call) => call.name === made[1]);
      if (named.length > 0) return named.length === 1 ? named[0] : undefined;
    }
    return undefined;
  }

  /** The model's last reply in Pi's conversation, as run outcomes check it (confirm-outcome.ts). */
  lastReply():
    | { seq: number; text: string; toolCallCount: number; complete: boolean; stopReason?: PiStopReason }
    | undefined {
    const head = this.#head;
    if (!head?.reply) return undefined;
    const { text, toolCalls, piStopReason } = head.reply;
    return {
      seq: head.seq,
      text,
      toolCallCount: toolCalls.length,
      complete: head.delivered,
      ...(piStopReason ? { stopReason: piStopReason } : {}),
    };
  }

  get onChainCount(): number {
    return this.#onChain;
  }

  /** Generations relayed that were not part of Pi's conversation. */
  get offChainCount(): number {
    return this.#offChain;
  }

  #classify(exchange: LedgerExchange): ChainVerdict {
    const head = this.#head;
    if (!head) return { onChain: true, as: "first" };
    const { request } = exchange;
    const context = contextDifference(head.request, request);
    if (context) return { onChain: false, reason: "other-context", detail: context };
    if (sameMessages(request.messages, head.request.messages)) {
      return head.delivered
        ? { onChain: false, reason: "repeat", detail: `repeats exchange ${head.seq}, whose reply reached the client` }
        : { onChain: true, as: "retry" };
    }
    const why = extensionProblem(head.request.messages, head.reply, request.messages);
    if (why)
      return { onChain: false, reason: "not-an-extension", detail: `does not continue exchange ${head.seq}: ${why}` };
    return { onChain: true, as: "extension" };
  }

  #index(head: OnChainExchange): void {
    if (this.#indexed.has(head.seq)) return;
    this.#indexed.add(head.seq);
    const idless: LedgerToolCall[] = [];
    for (const [index, call] of (head.reply?.toolCalls ?? []).entries()) {
      if (call.id !== "") this.#toolCalls.set(call.id, { ...call, seq: head.seq, index });
      else idless.push({ ...call, seq: head.seq, index });
    }
    if (idless.length > 0) this.#idless.set(head.seq, idless);
  }
}

function delivered(exchange: LedgerExchange): boolean {
  const { status, reply, relay } = exchange;
  if (status < 200 || status > 299 || relay !== "complete" || !reply) return false;
  return reply.complete && !reply.truncated && reply.error === undefined && reply.piStopReason !== "error";
}

function contextDifference(before: ModelRequest, now: ModelRequest): string | undefined {
  if (before.api !== now.api || before.model !== now.model) return `another model (${short(now.model)})`;
  if (before.system !== now.system) return "another system prompt";
  if (canonicalJson(before.tools) !== canonicalJson(now.tools)) return "other tools";
  return undefined;
}

function sameMessages(a: readonly ConversationMessage[], b: readonly ConversationMessage[]): boolean {
  return a.length === b.length && canonicalJson(a) === canonicalJson(b);
}

/** Why `now` is not `before` + the reply + its tool results, or undefined when it is. */
function extensionProblem(
  before: readonly ConversationMessage[],
  reply: ModelReply | undefined,
  now: readonly ConversationMessage[],
): string | undefined {
  if (!reply || reply.toolCalls.length === 0) return "that reply called no tool, so Pi had nothing to continue with";
  if (now.length < before.length + 2) return "too few messages";
  if (canonicalJson(now.slice(0, before.length)) !== canonicalJson(before)) return "an earlier message differs";
  const assistant = now[before.length]!;
  if (assistant.role !== "assistant") return `message ${before.length + 1} is not the model's reply`;
  const calls = assistant.parts.filter(
    (p): p is Extract<ConversationPart, { kind: "tool-call" }> => p.kind === "tool-call",
  );
  const callProblem = callsProblem(reply.toolCalls, calls);
  if (callProblem) return callProblem;
  if (
    !visibleText(assistant.parts.flatMap((p) => (p.kind === "text" ? [p.text] : []))).includes(
      visibleText(reply.textBlocks),
    )
  ) {
    return "the model's text differs";
  }
  return resultsProblem(calls, now.slice(before.length + 1));
}

/** The reply's calls, in order, as the request carries them back. */
function callsProblem(
  replied: readonly ModelReplyToolCall[],
  sent: ReadonlyArray<Extract<ConversationPart, { kind: "tool-call" }>>,
): string | undefined {
  if (replied.length !== sent.length)
    return `the model made ${replied.length} tool calls, the request carries ${sent.length}`;
  for (const [i, call] of replied.entries()) {
    const back = sent[i]!;
    if (back.name !== call.name) return `tool call ${i + 1} is ${back.name}, the model called ${call.name}`;
    if (call.id !== "" && back.id !== "" && call.id !== back.id && call.id.split("|")[0] !== back.id) {
      return `tool call ${i + 1} has another id`;
    }
    const parsed = parseToolCallArguments(call.argumentsJson);
    // Arguments Pi could not parse reach the request as whatever Pi made of them; only parsed ones are compared.
    if (parsed.ok && canonicalJson(parsed.value) !== canonicalJson(back.arguments)) {
      return `tool call ${i + 1} (${call.name}) has other arguments`;
    }
  }
  return undefined;
}

/** One result per call (by id where there are ids, else in order), and nothing else but images. */
function resultsProblem(
  calls: ReadonlyArray<Extract<ConversationPart, { kind: "tool-call" }>>,
  after: readonly ConversationMessage[],
): string | undefined {
  const answered = new Array<boolean>(calls.length).fill(false);
  let next = 0;
  for (const message of after) {
    const results = message.parts.filter((p) => p.kind === "tool-result");
    if (message.role === "user" && results.length === 0) {
      // Anthropic: images of failed results follow them in a user message, with a caption.
      if (message.parts.some((p) => p.kind === "image")) continue;
      return "a user message follows the tool results";
    }
    if (message.role === "assistant") return "another model message follows the tool results";
    for (const part of results) {
      if (part.kind !== "tool-result") continue;
      let at = part.callId === "" ? -1 : calls.findIndex((c, i) => !answered[i] && c.id === part.callId);
      if (at < 0 && (part.callId === "" || calls.every((c) => c.id === ""))) {
        while (next < calls.length && answered[next]) next++;
        at = next < calls.length && (part.name === undefined || part.name === calls[next]!.name) ? next : -1;
      }
      if (at < 0) return `a tool result answers no call of the model's reply (${part.callId || "no id"})`;
      answered[at] = true;
    }
  }
  const missing = answered.indexOf(false);
  return missing < 0 ? undefined : `tool call ${missing + 1} (${calls[missing]!.name}) has no result`;
}

/** Non-blank text blocks, joined, without unpaired surrogates (Pi drops those). */
function visibleText(blocks: readonly string[]): string {
  return sanitizeSurrogates(blocks.filter((b) => b.trim() !== "").join(""));
}
