// A workflow step that reviews a checkout through the Agent seam: the workflow only knows
// `AgentFunction`; ContainerPiAgent plugs in behind bindAgent().
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { type AgentFunction, bindAgent, ContainerPiAgent, type JsonSchema } from "sandbox-run";

const here = path.dirname(fileURLToPath(import.meta.url));
const schema = JSON.parse(fs.readFileSync(path.join(here, "../review-pr/review.schema.json"), "utf8")) as JsonSchema;
const prompt = fs.readFileSync(path.join(here, "../review-pr/prompt.md"), "utf8");

export interface Review {
  verdict: "approve" | "request-changes" | "comment";
  summary: string;
  risks: Array<{ file: string; severity: "low" | "medium" | "high"; note: string }>;
}

/** The workflow step: knows nothing about containers or Pi. */
export async function reviewCheckout(agent: AgentFunction, checkout: string): Promise<Review> {
  return agent<Review>(prompt, { cwd: checkout, sandbox: "read-only", schema });
}

/** Wiring: a sandboxed Pi agent behind the seam. `models` is optional (custom providers). */
export function sandboxedAgent(model: string, models?: Record<string, unknown>): AgentFunction {
  return bindAgent(new ContainerPiAgent({ model, models }));
}

// Run directly: node --import tsx examples/library/review-workflow.ts <checkout> <provider/model>
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [checkout = ".", model = "anthropic/claude-sonnet-4-5"] = process.argv.slice(2);
  const review = await reviewCheckout(sandboxedAgent(model), checkout);
  console.log(JSON.stringify(review, null, 2));
}
