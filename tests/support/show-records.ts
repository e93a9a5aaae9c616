// Run records made by hand for the page tests: the files a run writes (docs/records.md), with
// whatever content a test chooses, and a SHA256SUMS that matches (record-files.ts' rehash).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { rehash } from "./record-files.js";

export interface RecordParts {
  meta?: Record<string, unknown>;
  policy?: Record<string, unknown>;
  plan?: Record<string, unknown>;
  call?: Record<string, unknown>;
  prompt?: string;
  schema?: unknown;
  result?: unknown;
  error?: Record<string, unknown>;
  patch?: string;
  events?: unknown[];
  exchanges?: unknown[];
  /** More files, by name, written as they are (before SHA256SUMS). */
  extra?: Record<string, string>;
}

/** One event envelope as the recorder writes it (docs/events.md). */
export function event(
  seq: number,
  time: number,
  source: "pi" | "sandbox",
  type: string,
  data: Record<string, unknown>,
) {
  return { runId: "0123456789ab", seq, time, source, type, data: source === "pi" ? { type, ...data } : data };
}

/** A turn of Pi's events: turn_start, the assistant message, each tool's start and end, turn_end. */
export function turnEvents(
  start: { seq: number; time: number },
  turn: {
    text?: string;
    tools?: Array<{ id: string; name: string; args: unknown; output: string; isError?: boolean }>;
    usage?: { input: number; output: number; cost: number };
  },
): unknown[] {
  let seq = start.seq;
  let time = start.time;
  const next = (type: string, data: Record<string, unknown>) => event(seq++, (time += 10), "pi", type, data);
  const tools = turn.tools ?? [];
  const message = {
    role: "assistant",
    content: [
      ...(turn.text ? [{ type: "text", text: turn.text }] : []),
      ...tools.map((t) => ({ type: "toolCall", id: t.id, name: t.name, arguments: t.args })),
    ],
    usage: {
      input: turn.usage?.input ?? 100,
      output: turn.usage?.output ?? 20,
      cost: { total: turn.usage?.cost ?? 0.001 },
    },
    stopReason: tools.length > 0 ? "toolUse" : "stop",
  };
  return [
    next("turn_start", {}),
    next("message_end", { message }),
    ...tools.flatMap((t) => [
      next("tool_execution_start", { toolCallId: t.id, toolName: t.name, args: t.args }),
      next("tool_execution_end", {
        toolCallId: t.id,
        toolName: t.name,
        result: { content: [{ type: "text", text: t.output }] },
        isError: t.isError ?? false,
      }),
    ]),
    next("turn_end", { message }),
  ];
}

export function writeRecord(dir: string, parts: RecordParts): string {
  fs.mkdirSync(dir, { recursive: true });
  const json = (name: string, value: unknown) =>
    fs.writeFileSync(path.join(dir, name), `${JSON.stringify(value, null, 2)}\n`);
  json("meta.json", {
    format: 2,
    versions: { sandboxRun: "0.1.0", pi: "1.6.0", node: "24.22.3" },
    ok: !parts.error,
    ...parts.meta,
  });
  json("policy.json", parts.policy ?? { name: "workspace-write", network: "none", runtime: "runc" });
  json(
    "plan.json",
    parts.plan ?? {
      runId: "0123456789ab",
      runtime: "runc",
      workspaceMode: "bind",
      finalToolName: "sandbox_run_final_result",
    },
  );
  json(
    "replay.json",
    parts.call ?? {
      model: "scripted/m",
      workspace: { host: "/nonexistent/workspace", sandbox: "/nonexistent/workspace" },
      writableRoots: [],
    },
  );
  fs.writeFileSync(path.join(dir, "prompt.txt"), parts.prompt ?? "Do the task.");
  if (parts.schema !== undefined) json("schema.json", parts.schema);
  if (parts.error) json("error.json", parts.error);
  else json("result.json", parts.result ?? "done");
  fs.writeFileSync(path.join(dir, "changes.patch"), parts.patch ?? "");
  fs.writeFileSync(path.join(dir, "events.jsonl"), (parts.events ?? []).map((e) => `${JSON.stringify(e)}\n`).join(""));
  fs.writeFileSync(
    path.join(dir, "exchanges.jsonl"),
    (parts.exchanges ?? []).map((e) => `${JSON.stringify(e)}\n`).join(""),
  );
  for (const [name, content] of Object.entries(parts.extra ?? {})) fs.writeFileSync(path.join(dir, name), content);
  rehash(dir);
  return dir;
}

export function tempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/**
 * A record of about `megabytes` MB: many turns, each a bash call with a long output, and the model
 * traffic of each (a request body that repeats the conversation's recent part, a streamed reply).
 */
export function writeLargeRecord(dir: string, megabytes = 50): { dir: string; turns: number; bytes: number } {
  const outputBytes = 24 * 1024;
  const turns = Math.max(1, Math.round((megabytes * 1024 * 1024) / (2 * outputBytes + 2048)));
  const line = "0123456789abcdef ".repeat(4).concat("\n");
  const output = (i: number) =>
    `turn ${i} output\n${line.repeat(Math.ceil(outputBytes / line.length))}`.slice(0, outputBytes);
  const events: unknown[] = [
    event(0, 1, "sandbox", "run.planned", { model: "scripted/m", runtime: "runc", policy: "workspace-write" }),
    event(1, 5, "sandbox", "container.created", {}),
    event(2, 200, "sandbox", "container.started", {}),
  ];
  const exchanges: unknown[] = [];
  let seq = 3;
  for (let i = 1; i <= turns; i++) {
    const time = 300 + i * 100;
    events.push(
      event(seq++, time + 5, "sandbox", "gateway.exchange", {
        seq: i,
        status: 200,
        relay: "complete",
        chain: "extension",
      }),
    );
    const turn = turnEvents(
      { seq, time },
      {
        text: `Step ${i}: looking further.`,
        tools: [{ id: `call_${i}`, name: "bash", args: { command: `make step-${i}` }, output: output(i) }],
      },
    );
    seq += turn.length;
    events.push(...turn);
    exchanges.push({
      seq: i,
      routeId: "scripted",
      api: "openai-completions",
      path: "/scripted/chat/completions",
      status: 200,
      relay: "complete",
      startedMs: time,
      durationMs: 4,
      reply: { text: `Step ${i}`, toolCalls: [{ id: `call_${i}`, name: "bash", argumentsJson: "{}" }], complete: true },
      request: {
        method: "POST",
        target: "/scripted/chat/completions",
        headers: {},
        body: { text: JSON.stringify({ messages: [output(i - 1)] }) },
        bodyTruncated: false,
      },
      response: {
        status: 200,
        headers: {},
        chunks: [{ atMs: 1, text: `data: {"step":${i}}\n\n` }],
        bodyTruncated: false,
      },
    });
  }
  events.push(event(seq++, 300 + (turns + 1) * 100, "sandbox", "container.exited", { exitCode: 0 }));
  writeRecord(dir, { events, exchanges, meta: { runId: "0123456789ab", turns, toolCalls: turns } });
  const bytes = fs.readdirSync(dir).reduce((sum, name) => sum + fs.statSync(path.join(dir, name)).size, 0);
  return { dir, turns, bytes };
}
