// Checks a record's result against its schema again, the way the run did (zod's JSON Schema
// reader, as run/plan/resolve-options.ts compiles it). Both come from the record: a schema's
// `pattern` is a regular expression the record chose, and some take exponential time on a
// chosen string. So the check runs in a worker thread that is stopped after a few seconds; the
// page then says the check did not finish instead of never appearing.
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type { ResultView } from "./run-view.js";

const TIMEOUT_MS = 5_000;

// A plain script (eval'd workers run as CommonJS): nothing of this package's TypeScript is loaded.
const WORKER = `
const { parentPort, workerData } = require("node:worker_threads");
const { z } = require(workerData.zod);
let answer;
try {
  const schema = z.fromJSONSchema(JSON.parse(workerData.schema));
  const parsed = schema.safeParse(JSON.parse(workerData.result));
  answer = parsed.success
    ? { valid: true }
    : { valid: false, issues: parsed.error.issues.slice(0, 20).map((i) => ({ path: i.path.map(String), message: String(i.message) })) };
} catch (error) {
  answer = { unusable: String((error && error.message) || error) };
}
parentPort.postMessage(answer);
`;

type Answer =
  | { valid: true }
  | { valid: false; issues: Array<{ path: string[]; message: string }> }
  | { unusable: string };

export async function checkResult(
  schema: unknown,
  result: unknown,
  timeoutMs = TIMEOUT_MS,
): Promise<ResultView["check"]> {
  const zod = createRequire(import.meta.url).resolve("zod");
  let texts: { schema: string; result: string };
  try {
    texts = { schema: JSON.stringify(schema), result: JSON.stringify(result ?? null) };
  } catch (error) {
    // Only nesting too deep for the stack gets here (values parsed from JSON): say so, not crash.
    return { state: "not-checked", detail: `the result or schema cannot be written out: ${(error as Error).message}` };
  }
  const worker = new Worker(WORKER, {
    eval: true,
    workerData: { zod, ...texts },
    resourceLimits: { maxOldGenerationSizeMb: 256 },
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    const answer = await new Promise<Answer | "timeout">((resolve, reject) => {
      timer = setTimeout(() => resolve("timeout"), timeoutMs);
      worker.once("message", resolve);
      worker.once("error", reject);
    });
    if (answer === "timeout") {
      return {
        state: "not-checked",
        detail: `the check did not finish in ${timeoutMs / 1000} s (a pattern of the schema may be too slow on this result)`,
      };
    }
    if ("unusable" in answer) return { state: "not-checked", detail: `the schema cannot be used: ${answer.unusable}` };
    if (answer.valid) return { state: "valid" };
    const issues = answer.issues.map((i) => `${i.path.length ? i.path.join(".") : "(root)"}: ${i.message}`);
    return { state: "invalid", detail: issues.join("; ") };
  } catch (error) {
    return { state: "not-checked", detail: `the check failed: ${(error as Error).message}` };
  } finally {
    clearTimeout(timer);
    await worker.terminate();
  }
}
