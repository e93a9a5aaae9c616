// The host's view of what the model said in Pi's conversation, built only from what the gateway
// relayed (never from Pi's stdout, which code in the sandbox can write to). Pure: fed the
// gateway's exchanges in the order they ended.
//
// The chain: the run's first generation request comes from Pi (nothing else runs before its
// first tool call). A later request is Pi's ("on-chain") when it
//   - extends the previous on-chain request: the same messages, then the model's reply to it
//     (its text and tool calls, exactly), then one result for each of those tool calls and
//     nothing else Pi would not send; or
//   - repeats the previous on-chain request whose reply did not reach Pi whole (a retry).
// Anything else, e.g. code in the sandbox calling the gateway itself, is off-chain: relayed,
// counted and reported, but never evidence. Model, system prompt, tools, streaming and every
// other request field that reaches the upstream (tool_choice, sampling settings, logit_bias,
// response_format, stop, ...: the neutral form's `settings`) must stay as they were.
//
// What Pi legitimately changes between two requests of one conversation, and how it is absorbed:
// - cache markers, thinking blocks and signatures, item ids, prompt-cache keys: dropped by the
//   api codecs' neutral form (api-codec.ts);
// - output limits and thinking budgets: Pi fits them to the room left in the context window, and
//   the gateway caps output limits; left out of `settings` (requestSettings in codec-support.ts);
// - whitespace-only text blocks are not sent back, text blocks may be joined into one string,
//   and unpaired surrogates are dropped: the assistant message's non-blank text parts, joined,
//   must EQUAL the reply's non-blank text blocks, each without unpaired surrogates, joined;
// - thinking Pi sends back as text (ModelReply.thinkingAsText: Anthropic thinking without a
//   signature, as a text block in its place; openai-completions reasoning with the
//   requiresThinkingAsText compat flag, first): the text may instead equal the reply's own text
//   blocks and thinking, in that order, joined the same way. Nothing else may be added;
// - call ids: openai-responses replies carry "call_id|item_id" while requests carry call_id;
//   Google requests carry none (Pi makes ids up): ids are compared where both sides have one,
//   calls and results are otherwise matched by order and name;
// - tool arguments are sent back as the parsed object: compared as parsed JSON (Pi's parse);
// - images of tool results where Pi cannot put them in the result, after the results, each
//   with Pi's own caption and nothing else (PI_IMAGE_CAPTIONS): openai-completions, one user
//   message "Attached image(s) from tool result:" (with requiresAssistantAfterToolResult after
//   an assistant message "I have processed the tool results."); anthropic-messages, for each
//   error result with images, "Images from the error result of tool call <id> (<tool>):"; Google
//   (Gemini before 3), a user message "Tool result image:" after that result. A message with a
//   tool result carries that one result and its images, nothing else (openai-completions: no
//   images either).
// Not absorbed (the chain breaks and later requests are off-chain): Pi's context compaction,
// which rewrites the history. Two different continuations of one on-chain request (a second
// branch racing Pi's own request): the first to end stays on-chain, the other is off-chain
// ("forked") and the ledger records the fork (fork()): which one was Pi's cannot be told, so
// the run's outcome must not be taken from either.

import { createHash } from "node:crypto";
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
  /** When the gateway answered 502 itself: what it told the client. */
  gatewayError?: string;
}

type OffChainReason =
  /** Another model, system prompt, tool list or request setting than Pi's conversation. */
  | "other-context"
  /** The same messages as a request whose reply already reached Pi. */
  | "repeat"
  /** Messages that do not continue Pi's conversation. */
  | "not-an-extension"
  /** Another continuation of an on-chain request that an on-chain exchange already continued. */
  | "forked";

type ChainVerdict =
  | { onChain: true; as: "first" | "extension" | "retry" }
  | { onChain: false; reason: OffChainReason; detail: string };

interface OnChainExchange {
  seq: number;
  status: number;
  /** The whole reply reached Pi: 2xx, relayed to the end, complete, no error. */
  delivered: boolean;
  /** The provider finished the reply (2xx, complete, no error), whether or not it reached Pi whole. */
  finished: boolean;
  /** How the relay ended ("client-gone": the client left before the reply's end). */
  relay: string;
  reply?: ModelReply;
}

/** Two different continuations of one on-chain request: the conversation forked. */
export interface ConversationFork {
  /** The on-chain exchange that continued it first. */
  seq: number;
  /** The exchange that continued it differently (off-chain, reason "forked"). */
  other: number;
  /** The on-chain exchange both continue. */
  continues: number;
}

interface LedgerToolCall extends ModelReplyToolCall {
  /** The exchange whose reply made the call. */
  seq: number;
  /** Its position among that reply's tool calls. */
  index: number;
}

/**
 * One on-chain request, kept small (its messages' digest, not the messages): enough to tell
 * whether a later request continues it. Retries of it update `seq` and `reply`.
 */
interface ChainLink {
  seq: number;
  count: number;
  digest: string;
  reply?: ModelReply;
  /** The on-chain exchange that continued it, and the digest of that exchange's messages. */
  continuedBy?: { seq: number; digest: string };
}

export class ConversationLedger {
  #head: (OnChainExchange & { request: ModelRequest }) | undefined;
  /** Every on-chain request, oldest first; the last is the head's. */
  readonly #links: ChainLink[] = [];
  #fork: ConversationFork | undefined;
  #onChain = 0;
  #offChain = 0;
  readonly #toolCalls = new Map<string, LedgerToolCall>();
  /** Calls without an id, per exchange, in the order their replies were indexed. */
  readonly #idless = new Map<number, LedgerToolCall[]>();
  readonly #indexed = new Set<number>();
  /** Exchanges whose reply was cut at the token limit (Pi ran none of its calls). */
  readonly #cut = new Set<number>();
  /** Replies the client cut before their end, finished by the provider or not, after which Pi was asked the same again. */
  readonly #withheld: Array<{ seq: number; reply: ModelReply; finished: boolean }> = [];
  /** The host's account of the latest model request that failed since a reply last reached Pi whole. */
  #failure: string | undefined;

  /**
   * `reminder`: the message the final-tool extension sends after a plain-text reply in a schema run
   * (FINAL_TOOL_REMINDER); only then may a reply that called no tool be continued. A text run has
   * none: its last reply ends Pi's conversation.
   */
  constructor(private readonly options: { reminder?: string } = {}) {}

  /** Classifies an exchange and, when it is on-chain, makes it the conversation's latest. */
  add(exchange: LedgerExchange): ChainVerdict {
    const digests = new PrefixDigests(
      exchange.request.messages,
      this.#links.map((link) => link.count),
    );
    const verdict = this.#classify(exchange, digests);
    // Only Pi's own requests: a provider's error often echoes what the request carried (an unknown
    // field's name), and an off-chain request carries what the sandbox chose (review: "Unrecognized
    // request argument supplied: <the sandbox's sentence>" became the run's model error).
    if (verdict.onChain) this.#failure = failureOf(exchange) ?? this.#failure;
    if (!verdict.onChain) {
      this.#offChain++;
      return verdict;
    }
    // An extension proves Pi received the reply it extends, whatever the relay said.
    if (verdict.as === "extension" && this.#head) this.#index(this.#head);
    // A retry of a reply the client (inside the sandbox) cut before its end: what the model had
    // answered so far is kept. Not one the provider or the way to it broke off (upstream-aborted).
    const head = this.#head;
    if (verdict.as === "retry" && head && !head.delivered && head.relay === "client-gone" && head.reply)
      this.#withheld.push({ seq: head.seq, reply: head.reply, finished: head.finished });
    this.#onChain++;
    this.#head = {
      seq: exchange.seq,
      status: exchange.status,
      delivered: delivered(exchange),
      finished: finished(exchange),
      relay: exchange.relay,
      ...(exchange.reply ? { reply: exchange.reply } : {}),
      request: exchange.request,
    };
    const link: ChainLink = {
      seq: exchange.seq,
      count: exchange.request.messages.length,
      digest: digests.whole,
      ...(exchange.reply ? { reply: exchange.reply } : {}),
    };
    if (verdict.as === "retry") this.#links[this.#links.length - 1] = link;
    else {
      const previous = this.#links.at(-1);
      if (previous) previous.continuedBy = { seq: exchange.seq, digest: link.digest };
      this.#links.push(link);
    }
    if (this.#head.delivered) {
      this.#index(this.#head);
      this.#failure = undefined;
    }
    return verdict;
  }

  /** A model request the gateway refused (it never reached the model): its refusal code and status. */
  refused(what: string): void {
    this.#failure = `the gateway refused a model request (${short(what, 80)})`;
  }

  /**
   * What the host saw fail since the model's last reply reached Pi whole: the latest failed or
   * refused model request, in the host's words. A model error Pi reports is told in these, never in
   * Pi's (its stdout is the sandbox's to write); undefined when nothing failed.
   */
  failureSinceLastReply(): string | undefined {
    return this.#failure;
  }

  /** The latest on-chain exchange: the reply the run's outcome is decided from. */
  get last(): OnChainExchange | undefined {
    if (!this.#head) return undefined;
    const { request: _request, ...last } = this.#head;
    return last;
  }

  /**
   * The first fork of Pi's conversation, if any: an exchange that continued an on-chain request
   * in another way than the on-chain exchange that continued it. One of the two was not Pi's
   * and either may be the one on-chain, so the run's outcome cannot be taken from the chain.
   */
  fork(): ConversationFork | undefined {
    return this.#fork ? { ...this.#fork } : undefined;
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

  /**
   * Every call of tool `name` in the on-chain replies that reached Pi, in the conversation's order
   * (exchange, then the model's order in its reply): the first that passes Pi's check ended Pi's
   * conversation, whatever followed it (confirm-outcome.ts).
   */
  callsOf(name: string): LedgerToolCall[] {
    return [...this.#toolCalls.values(), ...[...this.#idless.values()].flat()]
      .filter((call) => call.name === name && !this.#cut.has(call.seq))
      .sort((a, b) => a.seq - b.seq || a.index - b.index);
  }

  /**
   * Replies of Pi's conversation that the client cut before their end (relay "client-gone"), after
   * which Pi asked the same again (a retry): an honest Pi reads a reply to its end, so each is an
   * answer, finished by the provider or only begun, that the client discarded (confirm-outcome.ts).
   * A cut reply's calls are as far as they came (`finished` false: their arguments may be cut too).
   */
  withheld(): Array<{
    seq: number;
    finished: boolean;
    text: string;
    toolCalls: Array<{ name: string; argumentsJson: string; index: number }>;
    stopReason?: PiStopReason;
  }> {
    return this.#withheld.map(({ seq, reply, finished }) => ({
      seq,
      finished,
      text: reply.text,
      toolCalls: reply.toolCalls.map((call, index) => ({ name: call.name, argumentsJson: call.argumentsJson, index })),
      ...(reply.piStopReason ? { stopReason: reply.piStopReason } : {}),
    }));
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

  #classify(exchange: LedgerExchange, digests: PrefixDigests): ChainVerdict {
    const head = this.#head;
    const headLink = this.#links.at(-1);
    if (!head || !headLink) return { onChain: true, as: "first" };
    const { request } = exchange;
    const context = contextDifference(head.request, request);
    if (context) return { onChain: false, reason: "other-context", detail: context };
    const count = request.messages.length;
    if (count === headLink.count && digests.at(count) === headLink.digest) {
      return head.delivered
        ? { onChain: false, reason: "repeat", detail: `repeats exchange ${head.seq}, whose reply reached the client` }
        : { onChain: true, as: "retry" };
    }
    const why = continuationProblem(
      request.api,
      headLink,
      head.reply,
      request.messages,
      digests,
      this.options.reminder,
    );
    if (!why) return { onChain: true, as: "extension" };
    const fork = this.#forkOf(exchange, digests);
    if (fork) return fork;
    return { onChain: false, reason: "not-an-extension", detail: `does not continue exchange ${head.seq}: ${why}` };
  }

  /** An exchange that continues an earlier on-chain request than the head, as its on-chain continuation did not. */
  #forkOf(exchange: LedgerExchange, digests: PrefixDigests): ChainVerdict | undefined {
    const { request } = exchange;
    for (const link of this.#links.slice(0, -1).reverse()) {
      const continuedBy = link.continuedBy;
      if (!continuedBy) continue;
      if (continuationProblem(request.api, link, link.reply, request.messages, digests, this.options.reminder))
        continue;
      // The same messages as the on-chain continuation: a late copy of it, not another branch.
      if (digests.whole === continuedBy.digest) {
        return {
          onChain: false,
          reason: "repeat",
          detail: `repeats exchange ${continuedBy.seq}, which the conversation went past`,
        };
      }
      this.#fork ??= { seq: continuedBy.seq, other: exchange.seq, continues: link.seq };
      return {
        onChain: false,
        reason: "forked",
        detail: `continues exchange ${link.seq}, which exchange ${continuedBy.seq} continued differently: the conversation forked`,
      };
    }
    return undefined;
  }

  #index(head: OnChainExchange): void {
    if (this.#indexed.has(head.seq)) return;
    this.#indexed.add(head.seq);
    // Pi fails every tool call of a reply cut at the token limit and asks again: none of them is an
    // answer (review of session 36's fixes: a complete final call in such a reply was taken for one).
    if (head.reply?.piStopReason === "length") this.#cut.add(head.seq);
    const idless: LedgerToolCall[] = [];
    for (const [index, call] of (head.reply?.toolCalls ?? []).entries()) {
      if (call.id !== "") this.#toolCalls.set(call.id, { ...call, seq: head.seq, index });
      else idless.push({ ...call, seq: head.seq, index });
    }
    if (idless.length > 0) this.#idless.set(head.seq, idless);
  }
}

/** Why an exchange's reply did not reach Pi whole, in the host's words; undefined when it did. */
function failureOf(exchange: LedgerExchange): string | undefined {
  if (delivered(exchange)) return undefined;
  const { status, reply, relay, gatewayError } = exchange;
  const said = reply?.error !== undefined ? `: ${short(reply.error, 300)}` : "";
  if (gatewayError !== undefined) return short(gatewayError, 400);
  if (relay === "client-gone") return "the request was given up before its reply was complete (the client left)";
  if (status < 200 || status > 299) return `the provider answered HTTP ${status}${said}`;
  if (relay === "upstream-aborted") return "the provider's reply broke off";
  if (reply?.error !== undefined) return `the provider's reply carried an error${said}`;
  if (reply?.truncated) return `the reply was too large to read (${reply.truncation ?? "a cap"})`;
  return "the provider's reply ended before it was complete";
}

function delivered(exchange: LedgerExchange): boolean {
  return exchange.relay === "complete" && finished(exchange);
}

/** The provider's whole reply, with no error in it, reached the gateway (to Pi or not). */
function finished(exchange: LedgerExchange): boolean {
  const { status, reply } = exchange;
  if (status < 200 || status > 299 || !reply) return false;
  return reply.complete && !reply.truncated && reply.error === undefined && reply.piStopReason !== "error";
}

function contextDifference(before: ModelRequest, now: ModelRequest): string | undefined {
  if (before.api !== now.api || before.model !== now.model) return `another model (${short(now.model)})`;
  if (before.system !== now.system) return "another system prompt";
  if (canonicalJson(before.tools) !== canonicalJson(now.tools)) return "other tools";
  if (before.stream !== now.stream) return now.stream ? "streamed where Pi's requests are not" : "not streamed";
  const keys = new Set([...Object.keys(before.settings), ...Object.keys(now.settings)]);
  for (const key of keys) {
    const was = Object.hasOwn(before.settings, key) ? canonicalJson(before.settings[key]) : undefined;
    const is = Object.hasOwn(now.settings, key) ? canonicalJson(now.settings[key]) : undefined;
    if (was !== is) return `another ${short(key, 40)} setting`;
  }
  return undefined;
}

/**
 * Digests of a request's first k messages (canonical JSON, so key order does not count), for the k
 * the ledger compares: its links' counts, and the whole request. One running hash over the
 * messages, one line each (JSON has no raw newline, so lines cannot run together), copied at
 * those counts: a digest per message cost a hash, its hex and their garbage for each of them,
 * ~0.5 s of the shared controller's thread for a request of 200,000 messages.
 */
class PrefixDigests {
  readonly #at = new Map<number, string>();
  readonly whole: string;

  constructor(messages: readonly ConversationMessage[], counts: readonly number[]) {
    const wanted = new Set(counts);
    const hash = createHash("sha256");
    if (wanted.has(0)) this.#at.set(0, hash.copy().digest("hex"));
    for (const [i, message] of messages.entries()) {
      hash.update(canonicalJson(message)).update("\n");
      if (wanted.has(i + 1)) this.#at.set(i + 1, hash.copy().digest("hex"));
    }
    this.whole = hash.digest("hex");
    this.#at.set(messages.length, this.whole);
  }

  /** The digest of the first `count` messages; undefined for a count the ledger did not ask for or past the end. */
  at(count: number): string | undefined {
    return this.#at.get(count);
  }
}

/** Why `now` is not the link's messages + its reply + the reply's tool results, or undefined when it is. */
function continuationProblem(
  api: string,
  link: ChainLink,
  reply: ModelReply | undefined,
  now: readonly ConversationMessage[],
  digests: PrefixDigests,
  reminder: string | undefined,
): string | undefined {
  if (reply && reply.toolCalls.length === 0 && reminder !== undefined)
    return reminderProblem(link, reply, now, digests, reminder);
  if (!reply || reply.toolCalls.length === 0) return "that reply called no tool, so Pi had nothing to continue with";
  const before = link.count;
  if (now.length < before + 2) return "too few messages";
  if (digests.at(before) !== link.digest) return "an earlier message differs";
  const assistant = now[before]!;
  if (assistant.role !== "assistant") return `message ${before + 1} is not the model's reply`;
  if (assistant.parts.some((p) => p.kind !== "text" && p.kind !== "tool-call"))
    return "the model's message carries more than text and tool calls";
  const calls = assistant.parts.filter(
    (p): p is Extract<ConversationPart, { kind: "tool-call" }> => p.kind === "tool-call",
  );
  const callProblem = callsProblem(reply.toolCalls, calls);
  if (callProblem) return callProblem;
  if (!echoes(reply).includes(sentTextOf(assistant))) return "the model's text differs";
  return resultsProblem(api, calls, now.slice(before + 1));
}

/**
 * After a reply that called no tool, Pi continues only in a schema run whose model answered in plain
 * text: the final-tool extension adds its reminder (pi-args.ts FINAL_TOOL_REMINDER), and nothing
 * else (session 29).
 */
function reminderProblem(
  link: ChainLink,
  reply: ModelReply,
  now: readonly ConversationMessage[],
  digests: PrefixDigests,
  text: string,
): string | undefined {
  const nothing = "that reply called no tool, so Pi had nothing to continue with";
  const before = link.count;
  if (now.length !== before + 2 || digests.at(before) !== link.digest) return nothing;
  const assistant = now[before]!;
  if (assistant.role !== "assistant" || assistant.parts.some((p) => p.kind !== "text")) return nothing;
  if (!echoes(reply).includes(sentTextOf(assistant))) return "the model's text differs";
  const reminder = now[before + 1]!;
  return reminder.role === "user" && onlyText(reminder, text) ? undefined : nothing;
}

/** The text of the model's message as a request carries it back: its non-blank text parts, joined. */
function sentTextOf(assistant: ConversationMessage): string {
  return assistant.parts.flatMap((p) => (p.kind === "text" && p.text.trim() !== "" ? [p.text] : [])).join("");
}

/**
 * The text Pi sends back for a reply: its non-blank text blocks, each without unpaired
 * surrogates, joined; or, when the reply has thinking Pi may send back as text, the same with
 * that thinking in its place.
 */
function echoes(reply: ModelReply): string[] {
  const visible = (blocks: readonly string[]) =>
    blocks
      .filter((b) => b.trim() !== "")
      .map(sanitizeSurrogates)
      .join("");
  const plain = visible(reply.textBlocks);
  const thinking = reply.thinkingAsText ?? [];
  if (thinking.length === 0) return [plain];
  const blocks = [...reply.textBlocks];
  // From the last: each goes in before the text block it preceded (blocks after it move on).
  for (const block of [...thinking].reverse())
    blocks.splice(Math.min(block.at, reply.textBlocks.length), 0, block.text);
  return [plain, visible(blocks)];
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

/** The captions Pi puts before images of tool results it sends outside the results (pi-ai 1.6.0). */
export const PI_IMAGE_CAPTIONS = {
  /** openai-completions.js convertMessages: one user message after all results. */
  completions: "Attached image(s) from tool result:",
  /** ...with the requiresAssistantAfterToolResult compat flag, after this assistant message. */
  completionsBridge: "I have processed the tool results.",
  /** google-shared.js convertMessages (Gemini before 3): a user message after that result. */
  google: "Tool result image:",
  /** transform-messages.js splitErrorToolResultImages (Anthropic): per error result, after all results. */
  anthropic: (callId: string, toolName: string) => `Images from the error result of tool call ${callId} (${toolName}):`,
} as const;

type ToolCallPart = Extract<ConversationPart, { kind: "tool-call" }>;
type ToolResultPart = Extract<ConversationPart, { kind: "tool-result" }>;

/**
 * One result per call (by id where there are ids, else in order), and nothing else but the
 * images Pi sends after results, with its captions (PI_IMAGE_CAPTIONS), per api.
 */
function resultsProblem(
  api: string,
  calls: readonly ToolCallPart[],
  after: readonly ConversationMessage[],
): string | undefined {
  const answered = new Array<boolean>(calls.length).fill(false);
  /** Error results of this turn, in order, with the call each answers: Anthropic captions name them. */
  const errors: Array<{ result: ToolResultPart; call: ToolCallPart }> = [];
  let next = 0;
  for (const [i, message] of after.entries()) {
    if (message.role === "assistant") {
      // openai-completions, requiresAssistantAfterToolResult: Pi's own line before the images.
      const bridge =
        api === "openai-completions" &&
        i === after.length - 2 &&
        onlyText(message, PI_IMAGE_CAPTIONS.completionsBridge) &&
        after[i + 1]!.role === "user";
      if (bridge) continue;
      return "another model message follows the tool results";
    }
    if (message.role === "user") {
      const problem = imagesProblem(api, message, after, i, errors);
      if (problem) return problem;
      continue;
    }
    const [result, ...rest] = message.parts;
    if (result?.kind !== "tool-result") return "a tool message carries no tool result";
    if (rest.some((p) => p.kind !== "image") || (api === "openai-completions" && rest.length > 0))
      return "a tool result carries more than Pi sends with one";
    let at = result.callId === "" ? -1 : calls.findIndex((c, j) => !answered[j] && c.id === result.callId);
    if (at < 0 && (result.callId === "" || calls.every((c) => c.id === ""))) {
      while (next < calls.length && answered[next]) next++;
      at = next < calls.length && (result.name === undefined || result.name === calls[next]!.name) ? next : -1;
    }
    if (at < 0) return `a tool result answers no call of the model's reply (${result.callId || "no id"})`;
    answered[at] = true;
    if (result.isError) errors.push({ result, call: calls[at]! });
  }
  const missing = answered.indexOf(false);
  return missing < 0 ? undefined : `tool call ${missing + 1} (${calls[missing]!.name}) has no result`;
}

/** Why a user message among the tool results is not images of results as Pi sends them. */
function imagesProblem(
  api: string,
  message: ConversationMessage,
  after: readonly ConversationMessage[],
  index: number,
  errors: ReadonlyArray<{ result: ToolResultPart; call: ToolCallPart }>,
): string | undefined {
  const refused = "a user message follows the tool results";
  const last = index === after.length - 1;
  switch (api) {
    case "openai-completions":
      return last && captioned(message.parts, PI_IMAGE_CAPTIONS.completions) ? undefined : refused;
    case "google-generative-ai":
      return after[index - 1]?.role === "tool" && captioned(message.parts, PI_IMAGE_CAPTIONS.google)
        ? undefined
        : refused;
    case "anthropic-messages": {
      if (!last) return refused;
      // Caption, images; caption, images; ...: one group per error result with images, in order.
      let parts = message.parts;
      let from = 0;
      while (parts.length > 0) {
        const at = errors
          .slice(from)
          .findIndex(({ result, call }) =>
            [call.name, call.name.toLowerCase()].some((name) =>
              captionedGroup(parts, PI_IMAGE_CAPTIONS.anthropic(result.callId, name)),
            ),
          );
        if (at < 0) return refused;
        from += at + 1;
        const images = parts.slice(1).findIndex((p) => p.kind !== "image");
        parts = images < 0 ? [] : parts.slice(1 + images);
      }
      return undefined;
    }
    default:
      return refused;
  }
}

/** The caption, then one or more images, and nothing else. */
function captioned(parts: readonly ConversationPart[], caption: string): boolean {
  return captionedGroup(parts, caption) && parts.slice(1).every((p) => p.kind === "image");
}

/** Starts with the caption and at least one image. */
function captionedGroup(parts: readonly ConversationPart[], caption: string): boolean {
  const [first, second] = parts;
  return first?.kind === "text" && first.text === caption && second?.kind === "image";
}

function onlyText(message: ConversationMessage, text: string): boolean {
  return message.parts.length === 1 && message.parts[0]!.kind === "text" && message.parts[0]!.text === text;
}
