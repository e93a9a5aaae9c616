// The contract between the scripted server and one API's wire module: where the API lives, how
// to read the model and streaming flag from a request, and how to write replies and errors
// exactly as that provider does (as Pi 1.6.0 parses them).
import type http from "node:http";
import type { EndlessStep, ScriptedApi, TextStep, ToolCallStep } from "./script.js";

type ReplyStep = TextStep | ToolCallStep | EndlessStep;

export interface ReplyContext {
  model: string;
  step: ReplyStep;
  stream: boolean;
  /** A number unique to this reply on this server, for response and call ids. */
  seq: number;
}

export interface WireFormat {
  readonly api: ScriptedApi;
  /** The URL path the API is served under (the base URL's path). */
  readonly basePath: string;
  /** What a request below basePath asks for; `subpath` has no query string. */
  route(method: string, subpath: string): "generate" | "list-models" | undefined;
  /** The model the request names (Google: in the path). */
  modelOf(subpath: string, body: Record<string, unknown>): string | undefined;
  /** Whether the request wants a streamed reply. */
  streams(subpath: string, body: Record<string, unknown>): boolean;
  /** The provider's error body for an HTTP error. */
  errorBody(status: number, message: string): unknown;
  /** The provider's model list (for the APIs that have one). */
  modelList?(ids: string[]): unknown;
  /** Writes the whole reply (or, for an endless step, starts it). */
  writeReply(res: http.ServerResponse, context: ReplyContext): void;
}

export function sendJson(res: http.ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

/** Starts an event stream; `send` writes one event, optionally named, ended by `separator`. */
export function startEventStream(
  res: http.ServerResponse,
  separator = "\n\n",
): (value: unknown, event?: string) => void {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  return (value, event) => {
    const name = event === undefined ? "" : `event: ${event}${separator === "\r\n\r\n" ? "\r\n" : "\n"}`;
    res.write(`${name}data: ${typeof value === "string" ? value : JSON.stringify(value)}${separator}`);
  };
}

/** Calls `tick` every few milliseconds until the client goes away. */
export function forever(res: http.ServerResponse, tick: () => void): void {
  const timer = setInterval(() => {
    if (res.destroyed) return clearInterval(timer);
    tick();
  }, 5);
  res.on("close", () => clearInterval(timer));
}
