// The first way a request's conversation differs from a recorded one, in one line a person can
// act on (issue 13: strict replay stops at it, lenient replay reports it). Both sides are the
// neutral form (api-codec.ts), which already drops volatile fields; call ids are ignored here
// too, since some are made up per run (Google), so calls and results are matched by order.

import { escapeUnsafeInJson } from "../../util/unsafe-chars.js";
import type { ConversationMessage, ConversationPart, ModelRequest, ModelTool } from "./codec-types.js";

const CONTEXT_BEFORE = 24;
const EXCERPT_LENGTH = 60;

/** A one-line description of the first difference, or undefined when the conversations match. */
export function firstDifference(recorded: ModelRequest, now: ModelRequest): string | undefined {
  if (recorded.model !== now.model)
    return `model differs: recorded ${quoted(recorded.model)}, now ${quoted(now.model)}`;
  if (recorded.system !== now.system) return `system prompt differs: ${contrast(recorded.system, now.system)}`;
  return toolsDifference(recorded.tools, now.tools) ?? messagesDifference(recorded.messages, now.messages);
}

function toolsDifference(recorded: ModelTool[], now: ModelTool[]): string | undefined {
  for (let i = 0; i < Math.max(recorded.length, now.length); i++) {
    const before = recorded[i];
    const after = now[i];
    if (!before) return `tool ${i + 1} (${after!.name}) was not offered in the recording`;
    if (!after) return `tool ${i + 1} (${before.name}) is no longer offered`;
    const label = `tool ${i + 1} (${before.name})`;
    if (before.name !== after.name)
      return `tool ${i + 1} differs: recorded ${quoted(before.name)}, now ${quoted(after.name)}`;
    if (before.description !== after.description)
      return `${label} description differs: ${contrast(before.description, after.description)}`;
    const schemaBefore = canonicalJson(before.parameters);
    const schemaAfter = canonicalJson(after.parameters);
    if (schemaBefore !== schemaAfter) return `${label} parameters differ: ${contrast(schemaBefore, schemaAfter)}`;
  }
  return undefined;
}

interface Numbering {
  /** 1-based number and name of each tool call, in conversation order. */
  calls: Array<{ id: string; name: string }>;
  /** For each (message, part) of a tool result: the 1-based call it answers. */
  resultCall: Map<ConversationPart, number>;
  /** For each tool-call part: its 1-based number. */
  callNumber: Map<ConversationPart, number>;
}

function numberCalls(messages: ConversationMessage[]): Numbering {
  const numbering: Numbering = { calls: [], resultCall: new Map(), callNumber: new Map() };
  // Linear in the calls and results (a request the sandbox shapes can carry 100,000 of each):
  // the first call of each id, and a cursor to the first call not yet answered.
  const firstById = new Map<string, number>();
  const answered = new Set<number>();
  let unanswered = 0;
  for (const message of messages) {
    for (const part of message.parts) {
      if (part.kind === "tool-call") {
        numbering.calls.push({ id: part.id, name: part.name });
        numbering.callNumber.set(part, numbering.calls.length);
        if (!firstById.has(part.id)) firstById.set(part.id, numbering.calls.length - 1);
      } else if (part.kind === "tool-result") {
        // By id where ids exist, else the first call not yet answered.
        let index = part.callId ? (firstById.get(part.callId) ?? -1) : -1;
        if (index === -1) {
          while (unanswered < numbering.calls.length && answered.has(unanswered)) unanswered++;
          index = unanswered < numbering.calls.length ? unanswered : -1;
        }
        if (index !== -1) {
          answered.add(index);
          numbering.resultCall.set(part, index + 1);
        }
      }
    }
  }
  return numbering;
}

function messagesDifference(recorded: ConversationMessage[], now: ConversationMessage[]): string | undefined {
  const before = numberCalls(recorded);
  const after = numberCalls(now);
  for (let i = 0; i < Math.max(recorded.length, now.length); i++) {
    const a = recorded[i];
    const b = now[i];
    if (!a) return `message ${i + 1} (${b!.role}) is new: ${quoted(summary(b!))} was not in the recording`;
    if (!b) return `message ${i + 1} (${a.role}) is missing: recorded ${quoted(summary(a))}`;
    if (a.role !== b.role) return `message ${i + 1} differs: recorded a ${a.role} message, now a ${b.role} message`;
    const difference = partsDifference(i, a, b, before, after);
    if (difference) return difference;
  }
  return undefined;
}

function partsDifference(
  index: number,
  a: ConversationMessage,
  b: ConversationMessage,
  before: Numbering,
  after: Numbering,
): string | undefined {
  const label = `message ${index + 1} (${a.role})`;
  for (let j = 0; j < Math.max(a.parts.length, b.parts.length); j++) {
    const p = a.parts[j];
    const q = b.parts[j];
    if (!p) return `${label} has a new ${describe(q!)}`;
    if (!q) return `${label} lost its ${describe(p)}`;
    if (p.kind !== q.kind) return `${label} differs: recorded a ${describe(p)}, now a ${describe(q)}`;
    switch (p.kind) {
      case "text": {
        const text = (q as typeof p).text;
        if (p.text !== text) return `${label} differs: ${contrast(p.text, text)}`;
        break;
      }
      case "image":
        if (p.sha256 !== (q as typeof p).sha256)
          return `${label} differs: another image (sha256 ${p.sha256.slice(0, 12)}... vs ${(q as typeof p).sha256.slice(0, 12)}...)`;
        break;
      case "tool-call": {
        const call = q as typeof p;
        const name = `tool call ${before.callNumber.get(p) ?? "?"} (${p.name})`;
        if (p.name !== call.name) return `${name} differs: recorded ${quoted(p.name)}, now ${quoted(call.name)}`;
        const argsBefore = canonicalJson(p.arguments);
        const argsAfter = canonicalJson(call.arguments);
        if (argsBefore !== argsAfter) return `${name} arguments differ: ${contrast(argsBefore, argsAfter)}`;
        break;
      }
      case "tool-result": {
        const result = q as typeof p;
        const number = before.resultCall.get(p) ?? after.resultCall.get(result);
        const callName = number !== undefined ? (before.calls[number - 1]?.name ?? p.name) : p.name;
        const name = `tool result of call ${number ?? "?"}${callName ? ` (${callName})` : ""}`;
        if (p.text !== result.text) return `${name} differs: ${contrast(p.text, result.text)}`;
        if ((p.isError ?? false) !== (result.isError ?? false))
          return `${name} differs: recorded ${p.isError ? "an error" : "a success"}, now ${result.isError ? "an error" : "a success"}`;
        break;
      }
    }
  }
  return undefined;
}

function describe(part: ConversationPart): string {
  switch (part.kind) {
    case "text":
      return `text ${quoted(part.text)}`;
    case "image":
      return "image";
    case "tool-call":
      return `tool call (${part.name})`;
    case "tool-result":
      return `tool result${part.name ? ` (${part.name})` : ""}`;
  }
}

function summary(message: ConversationMessage): string {
  return message.parts
    .map((part) => (part.kind === "text" || part.kind === "tool-result" ? part.text : `[${describe(part)}]`))
    .join(" ");
}

/** `recorded "...", now "..."`, both cut around the first character where they differ. */
function contrast(recorded: string, now: string): string {
  let at = 0;
  while (at < recorded.length && at < now.length && recorded[at] === now[at]) at++;
  return `recorded ${excerpt(recorded, at)}, now ${excerpt(now, at)}`;
}

function excerpt(text: string, at: number): string {
  if (text.length <= EXCERPT_LENGTH) return quoted(text);
  const start = Math.max(0, Math.min(at - CONTEXT_BEFORE, text.length - EXCERPT_LENGTH));
  const end = Math.min(text.length, start + EXCERPT_LENGTH);
  return `${start > 0 ? "..." : ""}${quoted(text.slice(start, end))}${end < text.length ? "..." : ""}`;
}

/** JSON-quoted, with what JSON leaves raw that acts on a terminal or hides text escaped too (util/unsafe-chars.ts). */
function quoted(text: string): string {
  return escapeUnsafeInJson(JSON.stringify(text));
}

/**
 * JSON with object keys sorted, so the order a provider or Pi wrote them in does not count. A
 * value nested too deeply to walk (hostile input) gets a marker that never equals another.
 */
export function canonicalJson(value: unknown): string {
  try {
    return canonical(value) ?? "undefined";
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    tooDeep++;
    return `(nested too deeply to compare #${tooDeep})`;
  }
}

let tooDeep = 0;

/**
 * What JSON.stringify writes for the value with every object's keys sorted, written directly: a
 * sorted copy of each object first cost a request of 200,000 messages twice the time and its
 * garbage, on the controller's one thread. Own keys only, as Object.keys gives them (a parsed
 * "__proto__" key is one); undefined, functions and symbols left out of objects and null in arrays,
 * as JSON.stringify does.
 */
function canonical(value: unknown): string | undefined {
  if (Array.isArray(value)) {
    let out = "[";
    for (let i = 0; i < value.length; i++) out += `${i > 0 ? "," : ""}${canonical(value[i]) ?? "null"}`;
    return `${out}]`;
  }
  if (typeof value !== "object" || value === null) return JSON.stringify(value);
  const record = value as Record<string, unknown>;
  let out = "{";
  for (const key of Object.keys(record).sort()) {
    const item = canonical(record[key]);
    if (item !== undefined) out += `${out.length > 1 ? "," : ""}${JSON.stringify(key)}:${item}`;
  }
  return `${out}}`;
}
