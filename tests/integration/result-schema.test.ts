// Result schemas with the keywords any JSON Schema validator handles, through real Pi and the
// scripted model: Pi (pi-schema) refuses a final result the schema's conditions make invalid and the
// model corrects it; the host's Ajv check accepts the corrected one. A keyword only the host's
// validator checks (ajv-formats' int32) fails the run with code validation after Pi accepted it.
import fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { isSandboxRunError } from "../../src/errors.js";
import { FINAL_TOOL_NAME } from "../../src/pi/pi-args.js";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import {
  checkNoContainersLeftAfterEach,
  dockerAvailable,
  eventLog,
  makeWorkspace,
  modelsFor,
  startModel,
} from "../support/harness.js";

const final = (args: unknown) => ({ toolCalls: [{ name: FINAL_TOOL_NAME, arguments: args }] });

// JSON text: a `then` key in an object literal reads as a thenable to the linter.
const verdictSchema = JSON.parse(
  '{"type":"object","properties":{"verdict":{"enum":["approve","reject"]},"reason":{"type":"string"}},' +
    '"required":["verdict"],"if":{"properties":{"verdict":{"const":"reject"}}},"then":{"required":["reason"]},' +
    '"else":{"not":{"required":["reason"]}}}',
) as Record<string, unknown>;

describe.skipIf(!dockerAvailable())("result schemas through real Pi and the host's Ajv check", () => {
  let server: ScriptedModelServer;
  let agent: ContainerPiAgent;
  let ws: string;
  const runs = checkNoContainersLeftAfterEach();

  beforeAll(async () => {
    server = await startModel({
      "if-then": [final({ verdict: "reject" }), final({ verdict: "reject", reason: "the tests fail" })],
      dependent: [final({ card: "4111" }), final({ card: "4111", billing: "1 Main St" })],
      int32: [final({ count: 2 ** 40 })],
      "text-first": [{ text: "The change looks fine to me." }, final({ verdict: "approve" })],
      "text-only": [{ text: "Looks fine." }, { text: "Still fine." }, { text: "Fine." }, { text: "Fine!" }],
    });
    agent = new ContainerPiAgent({
      models: modelsFor(server, ["if-then", "dependent", "int32", "text-first", "text-only"]),
      onEvent: runs.onEvent,
    });
    ws = makeWorkspace({ "README.md": "# project\n" });
  });

  afterAll(async () => {
    await server?.close();
    if (ws) fs.rmSync(ws, { recursive: true, force: true });
  });

  /** What Pi told the model about its final result before the n-th reply (the tool result text). */
  const toolResultsSentTo = (model: string) =>
    server.requests
      .filter((r) => r.body.model === model)
      .flatMap((r) => (r.body.messages ?? []).filter((m) => m.role === "tool").map((m) => JSON.stringify(m.content)));

  it("a model that answers in plain text first is reminded to call the final tool, at most twice (session 29: the run failed at once)", async () => {
    const result = await agent.run("Review the change.", {
      cwd: ws,
      model: "scripted/text-first",
      schema: verdictSchema,
    });
    expect(result).toEqual({ verdict: "approve" });
    const asked = (model: string) => server.requests.filter((r) => r.body.model === model);
    expect(asked("text-first")).toHaveLength(2);
    expect(JSON.stringify(asked("text-first")[1]!.body.messages)).toContain(`call ${FINAL_TOOL_NAME} now`);
    // A model that never calls it: two reminders, then the run fails as before, with no result.
    const error = await agent
      .run("Review the change.", { cwd: ws, model: "scripted/text-only", schema: verdictSchema })
      .catch((e: unknown) => e);
    expect(isSandboxRunError(error) && error.code).toBe("no-result");
    expect(String(error)).toMatch(/without calling/);
    expect(asked("text-only")).toHaveLength(3);
  });

  it("if/then/else: Pi refuses a rejection without a reason, the model adds one, the host accepts it", async () => {
    const log = eventLog();
    const result = await agent.run("Review the change.", {
      cwd: ws,
      model: "scripted/if-then",
      schema: verdictSchema,
      onEvent: log.onEvent,
    });
    expect(result).toEqual({ verdict: "reject", reason: "the tests fail" });
    const finals = log.ofType("tool_execution_end").filter((e) => e.data.toolName === FINAL_TOOL_NAME);
    expect(finals.map((e) => e.data.isError)).toEqual([true, false]);
    expect(toolResultsSentTo("if-then").join("\n")).toMatch(/Validation failed[\s\S]*reason/);
  });

  it("dependentRequired: a card needs a billing address, in Pi and on the host", async () => {
    const result = await agent.run("Fill in the payment.", {
      cwd: ws,
      model: "scripted/dependent",
      schema: {
        type: "object",
        properties: { card: { type: "string" }, billing: { type: "string" } },
        dependentRequired: { card: ["billing"] },
      },
    });
    expect(result).toEqual({ card: "4111", billing: "1 Main St" });
    expect(toolResultsSentTo("dependent").join("\n")).toMatch(/Validation failed[\s\S]*billing/);
  });

  it("a keyword only the host checks (format int32): Pi accepts the result, the host fails the run with code validation", async () => {
    const log = eventLog();
    const error = await agent
      .run("Count them.", {
        cwd: ws,
        model: "scripted/int32",
        schema: { type: "object", properties: { count: { type: "integer", format: "int32" } }, required: ["count"] },
        onEvent: log.onEvent,
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(isSandboxRunError(error) && error.code).toBe("validation");
    expect((error as Error).message).toContain('count: must match format "int32"');
    const finalEnd = log.ofType("tool_execution_end").find((e) => e.data.toolName === FINAL_TOOL_NAME);
    expect(finalEnd?.data.isError).toBe(false);
  });
});
