// One line of exchanges.jsonl as the page shows it: the request and response as the gateway
// relayed them, bodies cut to the page's budget, and no header that looks like a credential
// (a record never holds one: the gateway drops them before anything is written; a hand-made or
// tampered record might, so the page names such a header and leaves its value out).
import type { ExchangeView, HeaderLine } from "./run-view.js";
import { CAPS, FRAME, TextBudget } from "./text-budget.js";

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const num = (value: unknown): number => (typeof value === "number" && Number.isFinite(value) ? value : 0);
const CREDENTIAL_HEADER =
  /^(authorization|proxy-authorization|cookie|set-cookie)$|auth|api-?key|token|secret|session|password/i;
const MAX_HEADERS = 200;
/** Bodies up to this size are pretty-printed when they are JSON. */
const PRETTY_MAX = 1024 * 1024;

/**
 * The exchange's view, its short texts charged to the page's outline (`budget.admit`); undefined
 * when it is no exchange or the outline has no room for it. `chain`: Pi's conversation, from events.
 */
export function exchangeView(line: unknown, budget: TextBudget, chain = ""): ExchangeView | undefined {
  if (!isObject(line) || typeof line.seq !== "number") return undefined;
  const request = isObject(line.request) ? line.request : undefined;
  const response = isObject(line.response) ? line.response : undefined;
  const method = TextBudget.label(request?.method ?? "POST");
  const target = TextBudget.line(request?.target ?? line.path);
  const relay = TextBudget.label(line.relay);
  if (!budget.admit(FRAME.exchange, method, target, relay, chain)) return undefined;
  const hiddenHeaders: string[] = [];
  const view: ExchangeView = {
    seq: line.seq,
    method,
    target,
    status: num(line.status),
    relay,
    durationMs: num(line.durationMs),
    ...(chain ? { chain } : {}),
    requestHeaders: headers(request?.headers, hiddenHeaders, budget),
    responseHeaders: headers(response?.headers, hiddenHeaders, budget),
    hiddenHeaders,
  };
  if (isObject(line.reply)) {
    const reply = line.reply;
    view.reply = {
      text: budget.take(typeof reply.text === "string" ? reply.text : "", CAPS.modelText),
      toolCalls: (Array.isArray(reply.toolCalls) ? reply.toolCalls : [])
        .slice(0, 100)
        .map((call) => ({ call, name: TextBudget.label(isObject(call) ? call.name : "") }))
        .filter(({ name }) => budget.admit(FRAME.part, name))
        .map(({ call, name }) => ({
          name,
          args: budget.take(
            prettyJson(isObject(call) && typeof call.argumentsJson === "string" ? call.argumentsJson : ""),
            CAPS.toolArgs,
          ),
        })),
      ...(typeof reply.stopReason === "string" ? { stopReason: TextBudget.label(reply.stopReason) } : {}),
      ...(typeof reply.error === "string" ? { error: TextBudget.line(reply.error) } : {}),
    };
    if (!budget.admit(FRAME.part, view.reply.stopReason, view.reply.error)) {
      delete view.reply.stopReason;
      delete view.reply.error;
    }
  }
  if (typeof line.omitted === "string") {
    const omitted = TextBudget.line(line.omitted);
    view.omitted = budget.admit(FRAME.part, omitted) ? omitted : "";
  }
  if (line.scrubbed === true) view.scrubbed = true;
  return view;
}

/**
 * The bodies, charged to the budget separately and after every exchange's summary: they are the
 * largest and least read part of a record, so they are the first to be cut when the page is full.
 */
export function addBodies(view: ExchangeView, line: unknown, budget: TextBudget): void {
  if (!isObject(line)) return;
  const request = isObject(line.request) ? line.request : undefined;
  const response = isObject(line.response) ? line.response : undefined;
  if (budget.spent) {
    // Nothing of it would be kept: say how much there is without decoding it.
    if (request && isObject(request.body)) view.requestBody = leftOut([request.body], budget);
    if (response && Array.isArray(response.chunks)) view.responseBody = leftOut(response.chunks, budget);
    return;
  }
  if (request && isObject(request.body)) {
    view.requestBody = budget.take(prettyJson(bodyText([request.body])), CAPS.body);
    if (request.bodyTruncated === true) view.requestBodyCut = true;
  }
  if (response && Array.isArray(response.chunks)) {
    view.responseBody = budget.take(bodyText(response.chunks), CAPS.body);
    if (response.bodyTruncated === true) view.responseBodyCut = true;
  }
}

function leftOut(parts: unknown[], budget: TextBudget): { text: string; omitted: number } {
  let omitted = 0;
  for (const part of parts) {
    if (!isObject(part)) continue;
    if (typeof part.text === "string") omitted += part.text.length;
    else if (typeof part.base64 === "string") omitted += Math.floor((part.base64.length * 3) / 4);
  }
  budget.starved++;
  budget.omittedChars += omitted;
  return { text: "", omitted };
}

/** Header lines, each charged to the page's outline; those past it are left out. */
function headers(value: unknown, hidden: string[], budget: TextBudget): HeaderLine[] {
  if (!isObject(value)) return [];
  const lines: HeaderLine[] = [];
  for (const [name, raw] of Object.entries(value).slice(0, MAX_HEADERS)) {
    const label = TextBudget.label(name);
    if (CREDENTIAL_HEADER.test(name)) {
      if (!hidden.includes(label) && budget.admit(FRAME.part, label)) hidden.push(label);
      continue;
    }
    for (const v of Array.isArray(raw) ? raw.slice(0, 20) : [raw]) {
      const line = { name: label, value: TextBudget.line(v) };
      if (budget.admit(FRAME.part, line.name, line.value)) lines.push(line);
    }
  }
  return lines;
}

/** Stored bytes ({text} or {base64}) joined, then read as UTF-8 (bytes that are not UTF-8 show as U+FFFD). */
function bodyText(parts: unknown[]): string {
  const buffers: Buffer[] = [];
  for (const part of parts) {
    if (!isObject(part)) continue;
    if (typeof part.text === "string") buffers.push(Buffer.from(part.text, "utf8"));
    else if (typeof part.base64 === "string") buffers.push(Buffer.from(part.base64, "base64"));
  }
  const bytes = Buffer.concat(buffers);
  const text = bytes.toString("utf8");
  return Buffer.byteLength(text) === bytes.length || !text.includes("\ufffd")
    ? text
    : `[bytes that are not UTF-8 are shown as \ufffd]\n${text}`;
}

function prettyJson(text: string): string {
  if (text.length > PRETTY_MAX || !/^\s*[{[]/.test(text)) return text;
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
