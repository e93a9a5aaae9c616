// The gateway's API codecs on real Pi traffic: real engine, real runner image, real Pi 1.6.0 in
// the sandbox, talking through the model gateway to the scripted model server in each API's
// wire format. The server records the raw request bodies and reply bytes; fed through the
// codecs, they must agree with what Pi itself reported in its events and result: tool call
// ids, names and arguments, the final tool's (coerced) value, the final text, stop reasons,
// and the tool results Pi sent back.
import fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { codecFor, type ModelReply, type ModelRequest } from "../../src/gateway/apis/api-codec.js";
import { ConversationLedger } from "../../src/gateway/conversation-ledger.js";
import { FINAL_TOOL_NAME } from "../../src/pi/pi-args.js";
import { parseToolCallArguments, prepareToolArguments } from "../../src/pi/tool-arguments.js";
import type { RunEvent } from "../../src/run/run-events.js";
import {
  type RecordedRequest,
  SCRIPTED_APIS,
  type ScriptedApi,
  type ScriptedModelServer,
} from "../../src/scripted-model/scripted-model-server.js";
import {
  checkNoContainersLeftAfterEach,
  dockerAvailable,
  eventLog,
  makeWorkspace,
  SECRET_KEY,
  startModel,
} from "../support/harness.js";

const SCHEMA = {
  type: "object",
  properties: {
    verdict: { type: "string", enum: ["approve", "reject"] },
    count: { type: "integer" },
    tags: { type: "array", items: { type: "string" } },
  },
  required: ["verdict", "count", "tags"],
  additionalProperties: false,
};
// Needs Pi's coercion to pass: "3" -> 3, "solo" -> ["solo"].
const FINAL_ARGUMENTS = { verdict: "approve", count: "3", tags: "solo" };
const BASH = "printf 'ünï €\\n'; echo done";
const TEXT = "All done:\nünï € 😀";

interface PiToolCall {
  type: "toolCall";
  id: string;
  name: string;
  arguments: unknown;
}
interface PiAssistant {
  role: "assistant";
  content: Array<{ type: string; text?: string } | PiToolCall>;
  stopReason: string;
}

/** The assistant messages Pi reported (message_end), in order. */
function piAssistantMessages(events: RunEvent[]): PiAssistant[] {
  return events
    .filter((e) => e.source === "pi" && e.type === "message_end")
    .map((e) => e.data.message as PiAssistant)
    .filter((m) => m.role === "assistant");
}

function replyOf(api: ScriptedApi, recorded: RecordedRequest): ModelReply {
  const parser = codecFor(api)!.replyParser(String(recorded.response.headers["content-type"]));
  for (const chunk of recorded.response.chunks) parser.push(chunk);
  return parser.end();
}

function requestOf(server: ScriptedModelServer, api: ScriptedApi, recorded: RecordedRequest): ModelRequest {
  const basePath = new URL(server.baseUrlFor(api)).pathname;
  const pathname = new URL(recorded.path, "http://x").pathname.slice(basePath.length);
  const parsed = codecFor(api)!.parseRequest(pathname, recorded.body);
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.request;
}

/** What the codec says about each reply equals what Pi made of it. */
function expectAgreement(api: ScriptedApi, replies: ModelReply[], pi: PiAssistant[]) {
  expect(replies).toHaveLength(pi.length);
  replies.forEach((reply, i) => {
    const message = pi[i]!;
    expect(reply.complete).toBe(true);
    expect(reply.error).toBeUndefined();
    expect(reply.piStopReason).toBe(message.stopReason);
    expect(reply.textBlocks).toEqual(
      message.content.filter((c) => c.type === "text").map((c) => (c as { text: string }).text),
    );
    const piCalls = message.content.filter((c): c is PiToolCall => c.type === "toolCall");
    expect(reply.toolCalls.map((c) => c.name)).toEqual(piCalls.map((c) => c.name));
    reply.toolCalls.forEach((call, j) => {
      const piCall = piCalls[j]!;
      // Pi makes Google call ids up from the clock when the model sends none.
      if (api === "google-generative-ai" && call.id === "")
        expect(piCall.id).toMatch(new RegExp(`^${call.name}_\\d+_\\d+$`));
      else expect(call.id).toBe(piCall.id);
      expect(parseToolCallArguments(call.argumentsJson)).toEqual({ ok: true, value: piCall.arguments });
    });
  });
}

/** Pi's requests, as the model server got them, are one chain: each on-chain, no fork. */
function expectOneChain(server: ScriptedModelServer, api: ScriptedApi, recorded: RecordedRequest[]) {
  const ledger = new ConversationLedger();
  recorded.forEach((r, i) => {
    const verdict = ledger.add({
      seq: i + 1,
      request: requestOf(server, api, r),
      status: 200,
      relay: "complete",
      reply: replyOf(api, r),
    });
    expect(verdict, `request ${i + 1}`).toEqual({ onChain: true, as: i === 0 ? "first" : "extension" });
  });
  expect(ledger.fork()).toBeUndefined();
}

describe.skipIf(!dockerAvailable())("gateway API codecs on real Pi traffic", () => {
  let server: ScriptedModelServer;
  let agent: ContainerPiAgent;
  let ws: string;
  const runs = checkNoContainersLeftAfterEach();

  beforeAll(async () => {
    server = await startModel();
    const providers: Record<string, unknown> = {};
    for (const api of SCRIPTED_APIS) {
      server.setScript(`schema-${api}`, [
        { toolCalls: [{ name: "bash", arguments: { command: BASH } }] },
        { toolCalls: [{ name: FINAL_TOOL_NAME, arguments: FINAL_ARGUMENTS }] },
      ]);
      server.setScript(`text-${api}`, [
        { toolCalls: [{ name: "bash", arguments: { command: "echo step" } }] },
        { text: TEXT },
      ]);
      providers[`scripted-${api}`] = {
        baseUrl: server.baseUrlFor(api),
        api,
        apiKey: SECRET_KEY,
        models: [`schema-${api}`, `text-${api}`].map((id) => ({ id, contextWindow: 32000, maxTokens: 4096 })),
      };
    }
    agent = new ContainerPiAgent({ runtime: "runc", models: { providers }, onEvent: runs.onEvent });
    ws = makeWorkspace({ "README.md": "# project\n" });
  });

  afterAll(async () => {
    await server?.close();
    if (ws) fs.rmSync(ws, { recursive: true, force: true });
  });

  it.each(SCRIPTED_APIS.map((api) => [api]))("%s: a bash step then the final tool", async (api) => {
    const log = eventLog();
    const result = await agent.run("Review the workspace.", {
      cwd: ws,
      model: `scripted-${api}/schema-${api}`,
      schema: SCHEMA,
      onEvent: log.onEvent,
    });
    const recorded = server.requests.filter((r) => r.model === `schema-${api}`);
    expect(recorded.map((r) => r.api)).toEqual([api, api]);
    const replies = recorded.map((r) => replyOf(api, r));
    expectAgreement(api, replies, piAssistantMessages(log.events));
    expectOneChain(server, api, recorded);

    // The final tool's value, prepared on the host from the model's own arguments, is what Pi
    // accepted and what the run returned.
    const finalCall = replies[1]!.toolCalls[0]!;
    const prepared = prepareToolArguments(SCHEMA, finalCall.argumentsJson);
    const finalEnd = log.ofType("tool_execution_end").find((e) => e.data.toolName === FINAL_TOOL_NAME)!;
    expect(finalEnd.data.isError).toBe(false);
    expect(prepared).toEqual({ ok: true, value: (finalEnd.data.result as { details: unknown }).details });
    expect(prepared).toEqual({ ok: true, value: { verdict: "approve", count: 3, tags: ["solo"] } });
    expect(result).toEqual({ verdict: "approve", count: 3, tags: ["solo"] });

    // The second request carries the prompt, the bash call and the output Pi reported for it.
    const conversation = requestOf(server, api, recorded[1]!);
    expect(conversation.model).toBe(`schema-${api}`);
    expect(conversation.tools.map((t) => t.name)).toEqual(expect.arrayContaining(["bash", FINAL_TOOL_NAME]));
    const [user, assistant, tool] = conversation.messages;
    expect(user).toEqual({ role: "user", parts: [{ kind: "text", text: "Review the workspace." }] });
    expect(assistant!.parts).toEqual([
      expect.objectContaining({ kind: "tool-call", name: "bash", arguments: { command: BASH } }),
    ]);
    const bashEnd = log.ofType("tool_execution_end").find((e) => e.data.toolName === "bash")!;
    const bashOutput = (bashEnd.data.result as { content: Array<{ text: string }> }).content
      .map((c) => c.text)
      .join("\n");
    expect(bashOutput).toContain("ünï €\ndone");
    expect(tool!.parts[0]).toMatchObject({ kind: "tool-result" });
    // Mistral's converter trims tool output; the others send it as Pi got it.
    const sent = (tool!.parts[0] as { text: string }).text;
    expect(sent).toBe(api === "mistral-conversations" ? bashOutput.trim() : bashOutput);
  });

  it.each(SCRIPTED_APIS.map((api) => [api]))("%s: text mode", async (api) => {
    const log = eventLog();
    const result = await agent.run("Say when done.", {
      cwd: ws,
      model: `scripted-${api}/text-${api}`,
      onEvent: log.onEvent,
    });
    const recorded = server.requests.filter((r) => r.model === `text-${api}`);
    expectOneChain(server, api, recorded);
    const replies = recorded.map((r) => replyOf(api, r));
    const pi = piAssistantMessages(log.events);
    expectAgreement(api, replies, pi);
    expect(replies.at(-1)!.text).toBe(TEXT);
    expect(result).toBe(replies.at(-1)!.text);
  });
});
