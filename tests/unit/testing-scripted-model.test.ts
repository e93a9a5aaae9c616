// `sandbox-run/testing`'s scriptedModel as a user's test meets it: a script that throws (a failed
// expect() inside it) or gives no step is answered at once and fails the test at close(), instead of
// leaving the run waiting on its model for the policy's timeout (review, session 30: 900 s).
import { describe, expect, it } from "vitest";
import { FINAL_TOOL_NAME } from "../../src/pi/pi-args.js";
import { scriptedModel } from "../../src/testing.js";

/** One openai-completions request, as Pi would send it. */
async function ask(baseUrl: string, model: string, tools?: string[]): Promise<{ status: number; text: string }> {
  const response = await fetch(`${baseUrl}/chat/completions`, {
    method: "POST",
    body: JSON.stringify({
      model,
      stream: false,
      messages: [{ role: "user", content: "hi" }],
      ...(tools
        ? { tools: tools.map((name) => ({ type: "function", function: { name, description: name, parameters: {} } })) }
        : {}),
    }),
  });
  return { status: response.status, text: await response.text() };
}

describe("scriptedModel's script mistakes", () => {
  it("a step with none of text, toolCalls, final or httpStatus is refused when the model is made, naming its index", async () => {
    await expect(scriptedModel([{ text: "ok" }, { tool_calls: [] } as never])).rejects.toThrow(
      /^scriptedModel: step 1 has none of text \(a string\), toolCalls \(an array\), final or httpStatus/,
    );
  });

  it("a function script that throws, or gives nothing, is answered with a 400 naming it, and close() rejects with it", async () => {
    const model = await scriptedModel((turn) => {
      if (turn === 0) throw new Error("expected the prompt to name the file");
      return undefined as never;
    });
    const baseUrl = (model.models.providers as { scripted: { baseUrl: string } }).scripted.baseUrl;
    const first = await ask(baseUrl, "model");
    expect(first.status).toBe(400);
    expect(first.text).toContain("the scripted model's script failed: expected the prompt to name the file");
    await expect(model.close()).rejects.toThrow(
      "scriptedModel: the script failed: expected the prompt to name the file",
    );
  });

  it("a { final } step in a run without a schema (no final tool in the request) is answered with a 400 saying so, and close() rejects", async () => {
    const model = await scriptedModel([{ final: { verdict: "approve" } }]);
    const baseUrl = (model.models.providers as { scripted: { baseUrl: string } }).scripted.baseUrl;
    const withSchema = await ask(baseUrl, "model", ["bash", FINAL_TOOL_NAME]);
    expect(withSchema.status).toBe(200);
    expect(withSchema.text).toContain(FINAL_TOOL_NAME);
    const without = await ask(baseUrl, "model", ["bash"]);
    expect(without.status).toBe(400);
    expect(without.text).toContain("is a { final } result, but this run has no schema");
    await expect(model.close()).rejects.toThrow(
      "scriptedModel: the script failed: the step for turn 0 is a { final } result, but this run has no schema",
    );
  });
});
