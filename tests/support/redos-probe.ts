// Run as a child process by run-result-validator.test.ts: every host-side check of a final result
// against a schema whose pattern backtracks catastrophically on the model's string (`^(a|a)*$` on
// "a"×40 + "!": about 2^40 steps). Prints each answer and how long it took, as JSON. On a host that
// runs the pattern on its main thread, this process never prints anything.
import type { ModelReply } from "../../src/gateway/apis/api-codec.js";
import { confirmOutcome } from "../../src/run/confirm-outcome.js";
import { prepareGuarded } from "../../src/run/guarded-arguments.js";
import { InvalidResultWatch } from "../../src/run/invalid-result-watch.js";
import { compileResultSchema } from "../../src/run/result-validator.js";

const FINAL = "sandbox_run_final_result";
const schema = {
  type: "object",
  properties: {
    v: { type: "string", pattern: "^(a|a)*$" },
    tags: { type: "object", patternProperties: { "^(b|b)*$": {} } },
  },
};
const evil = `${"a".repeat(40)}!`;
const args = JSON.stringify({ v: evil });
const timed = <T>(run: () => T) => {
  const started = performance.now();
  const answer = run();
  return { answer, ms: Math.round(performance.now() - started) };
};
const validator = compileResultSchema(schema);
const reply: ModelReply = {
  text: "",
  textBlocks: [],
  toolCalls: [{ id: "call_0", name: FINAL, argumentsJson: args }],
  complete: true,
};
const out = {
  validate: timed(() => validator.validate({ v: evil })),
  // The key of an object under patternProperties.
  validateKey: timed(() => compileResultSchema(schema).validate({ tags: { [`${"b".repeat(40)}!`]: 1 } })),
  prepare: timed(() => prepareGuarded(schema, args)),
  watch: timed(() => new InvalidResultWatch({ finalToolName: FINAL, schema, validator }).observe(reply)),
  confirm: timed(() =>
    confirmOutcome(
      { kind: "structured", value: { v: evil }, claims: [{ callId: "call_0", value: { v: evil } }] },
      {
        toolCall: () => ({ name: FINAL, argumentsJson: args, seq: 1, index: 0 }),
        callsOf: () => [{ name: FINAL, argumentsJson: args, seq: 1, index: 0 }],
        lastReply: () => undefined,
        failureSinceLastReply: () => undefined,
      },
      { finalToolName: FINAL, schema },
    ),
  ),
  fine: timed(() => validator.validate({ v: "aaaa" })),
};
process.stdout.write(`${JSON.stringify(out)}\n`);
