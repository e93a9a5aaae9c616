// Results on the real engine, image and Pi, with the scripted model: text mode, schema mode
// (Pi's validation and the host's), and events delivered while the run is going.
import fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import { FINAL_TOOL_NAME } from "../../src/pi/pi-args.js";
import type { RunEvent } from "../../src/run/run-events.js";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import {
  bashThenFinal,
  checkNoContainersLeftAfterEach,
  dockerAvailable,
  eventLog,
  lastToolResult,
  makeWorkspace,
  modelsFor,
  runtimes,
  startModel,
} from "../support/harness.js";

const final = (args: unknown) => ({ toolCalls: [{ name: FINAL_TOOL_NAME, arguments: args }] });

describe.skipIf(!dockerAvailable()).each(runtimes())("ContainerPiAgent results (%s)", (runtime) => {
  let server: ScriptedModelServer;
  let agent: ContainerPiAgent;
  let ws: string;
  const runs = checkNoContainersLeftAfterEach();

  beforeAll(async () => {
    server = await startModel({
      text: [{ text: "The answer is 42." }],
      "text-after-bash": [
        { toolCalls: [{ name: "bash", arguments: { command: "echo tool-output-not-the-answer" } }] },
        { text: "Final words." },
      ],
      "schema-retry": [
        // Wrong type and a missing required property: Pi rejects the call and tells the model.
        final({ files: { oops: true } }),
        final({ files: ["a.txt", "b.txt"], count: 2 }),
      ],
      // A format only the host checks (ajv-formats' int32; pi-schema knows no such format): see the test below.
      "schema-int32": [final({ port: 2 ** 40 })],
      events: bashThenFinal("echo working", { done: true }),
      stream: bashThenFinal("echo streaming", { done: true }),
    });
    agent = new ContainerPiAgent({
      runtime,
      models: modelsFor(server, ["text", "text-after-bash", "schema-retry", "schema-int32", "events", "stream"]),
      onEvent: runs.onEvent,
    });
    ws = makeWorkspace({ "README.md": "# project\n" });
  });

  afterAll(async () => {
    await server?.close();
    if (ws) fs.rmSync(ws, { recursive: true, force: true });
  });

  it("text mode: the result is the final assistant text", async () => {
    const result = await agent.run("What is the answer?", { cwd: ws, model: "scripted/text" });
    expect(result).toBe("The answer is 42.");
    // The prompt reached the model through stdin, the gateway and Pi.
    const request = server.requests.find((r) => r.body.model === "text")!;
    expect(JSON.stringify(request.body.messages)).toContain("What is the answer?");
  });

  it("text mode: after a tool step, the result is the last message's text, not the tool output", async () => {
    const details = await agent.runDetailed<string>("Work, then answer.", {
      cwd: ws,
      model: "scripted/text-after-bash",
    });
    expect(details.result).toBe("Final words.");
    expect(details.toolCalls).toBe(1);
    expect(details.turns).toBe(2);
    expect(details.exitCode).toBe(0); // also when the host stopped the container after Pi settled
    expect(lastToolResult(server, "text-after-bash")).toContain("tool-output-not-the-answer");
  });

  it("schema mode: Pi rejects an invalid final call, the model retries, the result is the valid second call", async () => {
    const log = eventLog();
    const schema = {
      type: "object",
      properties: { files: { type: "array", items: { type: "string" } }, count: { type: "integer" } },
      required: ["files", "count"],
      additionalProperties: false,
    };
    const result = await agent.run<{ files: string[]; count: number }>("List the files.", {
      cwd: ws,
      model: "scripted/schema-retry",
      schema,
      onEvent: log.onEvent,
    });
    expect(result).toEqual({ files: ["a.txt", "b.txt"], count: 2 });
    const finalEnds = log.ofType("tool_execution_end").filter((e) => e.data.toolName === FINAL_TOOL_NAME);
    expect(finalEnds.map((e) => e.data.isError)).toEqual([true, false]);
    // The model was told why its first call failed.
    const retryRequest = server.requests.filter((r) => r.body.model === "schema-retry")[1]!;
    const toolMessage = retryRequest.body.messages.find((m) => m.role === "tool");
    expect(JSON.stringify(toolMessage?.content)).toContain("Validation failed");
    expect(log.ofType("run.result")[0]?.data).toEqual({ kind: "structured" });
  });

  it("schema mode: the host re-validates what Pi accepted and fails with code validation", async () => {
    // Pi 1.6.0 validates tool arguments with pi-schema (JSON Schema 2020-12 with formats, after
    // coercing "42" -> 42, "x" -> ["x"], null -> "null"), and the final tool returns the coerced
    // value, which the host's Ajv then accepts too: coercion alone never reaches the host check.
    // Every format pi-schema knows, the host checks with pi-schema's own check (review, session 31:
    // `ops@localhost` was an email to Pi and not to ajv-formats); what Pi accepts and the host
    // rejects is a format only ajv-formats knows (int32, ...; tests/integration/result-schema.test.ts).
    const log = eventLog();
    const schema = {
      type: "object",
      properties: { port: { type: "integer", format: "int32" } },
      required: ["port"],
    };
    const error = await agent
      .run("Which port?", { cwd: ws, model: "scripted/schema-int32", schema, onEvent: log.onEvent })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(isSandboxRunError(error)).toBe(true);
    const failure = error as SandboxRunError;
    expect(failure.code).toBe("validation");
    expect(failure.shortMessage).toContain("host-side schema validation");
    expect(failure.shortMessage).toContain("port");
    expect(failure.containerId).toMatch(/^[0-9a-f]{64}$/);
    // Pi itself accepted the call: this failure comes from the host's check.
    const finalEnd = log.ofType("tool_execution_end").find((e) => e.data.toolName === FINAL_TOOL_NAME);
    expect(finalEnd?.data.isError).toBe(false);
  });

  it("onEvent receives Pi's events in order while the run is still going", async () => {
    const events: RunEvent[] = [];
    let settled = false;
    let settledAtToolStart: boolean | undefined;
    const promise = agent.run("Do it.", {
      cwd: ws,
      model: "scripted/events",
      schema: { type: "object", properties: { done: { type: "boolean" } }, required: ["done"] },
      onEvent: (event) => {
        events.push(event);
        if (event.type === "tool_execution_start" && event.data.toolName === "bash") settledAtToolStart = settled;
      },
    });
    void promise.then(() => (settled = true));
    expect(await promise).toEqual({ done: true });
    expect(settledAtToolStart).toBe(false);

    expect(new Set(events.map((e) => e.runId)).size).toBe(1);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
    const types = events.map((e) => `${e.source}:${e.type}`);
    const order = [
      "sandbox:container.created",
      "sandbox:container.started",
      "pi:agent_start",
      "pi:turn_start",
      "pi:tool_execution_start",
      "pi:tool_execution_end",
      "pi:agent_end",
      "sandbox:container.exited",
      "sandbox:run.result",
      "sandbox:container.removed",
    ];
    const positions = order.map((t) => types.indexOf(t));
    expect(positions.every((p) => p >= 0)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    const bashEnd = events.find((e) => e.type === "tool_execution_end" && e.data.toolName === "bash");
    expect(JSON.stringify(bashEnd?.data.result)).toContain("working");
    // Pi's last record makes the host stop the container at once (the benchmark measures what
    // that saves); Pi may still get to exit by itself first. Either way the exit is a clean one.
    expect(types.indexOf("pi:agent_settled")).toBeLessThan(types.indexOf("sandbox:container.exited"));
    const exited = events.find((e) => e.type === "container.exited")?.data;
    expect([
      { exitCode: 0, oomKilled: false },
      { exitCode: 137, oomKilled: false, stoppedByHost: true },
    ]).toContainEqual(exited);
  });

  it("stream(): async iteration yields the same events as onEvent, then the result", async () => {
    const viaListener: RunEvent[] = [];
    const stream = agent.stream<{ done: boolean }>("Stream it.", {
      cwd: ws,
      model: "scripted/stream",
      schema: { type: "object", properties: { done: { type: "boolean" } }, required: ["done"] },
      onEvent: (event) => void viaListener.push(event),
    });
    const viaIterator: RunEvent[] = [];
    for await (const event of stream) viaIterator.push(event);
    const details = await stream.result;
    expect(details.result).toEqual({ done: true });
    expect(viaIterator.length).toBeGreaterThan(5);
    expect(viaIterator).toEqual(viaListener);
    expect(viaIterator.some((e) => e.type === "tool_execution_start")).toBe(true);
    expect(viaIterator.at(-1)?.type).toBe("container.removed");
    expect(viaIterator.every((e) => e.runId === details.runId)).toBe(true);
  });
});
