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
