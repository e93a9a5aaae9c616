// Fixtures for the codec tests: requests Pi really sent (tests/fixtures/pi-requests), and for
// replies: build an event stream, feed it to a codec whole and in
// awkward pieces (1, 2, 3, 7 bytes: mid-line, mid-CRLF, mid-character) and check that every
// way of cutting gives the same reply.
import fs from "node:fs";
import { expect } from "vitest";
import { codecFor, type ModelReply, type ReplyLimits } from "../../src/gateway/apis/api-codec.js";

/** `data: <json>` events (optionally named), each ended by a blank line. */
export function sse(events: Array<unknown | [string, unknown]>, eol = "\n"): string {
  return events
    .map((event) => {
      const [name, value] =
        Array.isArray(event) && event.length === 2 && typeof event[0] === "string" ? event : [undefined, event];
      const data = typeof value === "string" ? value : JSON.stringify(value);
      return `${name ? `event: ${name}${eol}` : ""}data: ${data}${eol}${eol}`;
    })
    .join("");
}

export function replyFrom(
  api: string,
  body: string | Buffer,
  options: { contentType?: string; pieceSize?: number; limits?: Partial<ReplyLimits> } = {},
): ModelReply {
  const parser = codecFor(api)!.replyParser(
    "contentType" in options ? options.contentType : "text/event-stream",
    options.limits,
  );
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body);
  const size = options.pieceSize ?? bytes.length;
  for (let i = 0; i < bytes.length; i += Math.max(size, 1)) parser.push(bytes.subarray(i, i + size));
  return parser.end();
}

/** The reply, checked to be the same however the bytes are cut (and with CRLF line ends). */
export function stableReply(api: string, body: string, contentType = "text/event-stream"): ModelReply {
  const whole = replyFrom(api, body, { contentType });
  for (const pieceSize of [1, 2, 3, 7]) expect(replyFrom(api, body, { contentType, pieceSize })).toEqual(whole);
  if (contentType === "text/event-stream") {
    expect(replyFrom(api, body.replaceAll("\n", "\r\n"), { contentType, pieceSize: 3 })).toEqual(whole);
  }
  return whole;
}

export interface Captured {
  path: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

export function captured(api: string): Captured {
  return JSON.parse(
    fs.readFileSync(new URL(`../fixtures/pi-requests/${api}.json`, import.meta.url), "utf8"),
  ) as Captured;
}

/** The path below the provider's base URL, as the gateway hands it to a codec. */
export function subpath(api: string, path: string): string {
  const pathname = new URL(path, "http://x").pathname;
  const base = {
    "openai-completions": "/v1",
    "openai-responses": "/openai-responses/v1",
    "anthropic-messages": "/anthropic",
    "google-generative-ai": "/google/v1beta",
    "mistral-conversations": "/mistral",
  }[api]!;
  return pathname.slice(base.length);
}
