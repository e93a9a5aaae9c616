// The worker thread of validate-in-worker.ts: the host's checks of a run's results, as the main
// thread would make them (the same modules), answered one message at a time. The main thread stops
// this thread at a check's deadline or when it runs out of its memory.
import { parentPort } from "node:worker_threads";
import type { JsonSchema } from "../agent.js";
import { prepareGuarded } from "./guarded-arguments.js";
import { loadPiSchemaFormats } from "./pi-schema-checks.js";
import { compileResultSchema, type ResultValidator } from "./result-validator.js";

type Request = { id: number; schema?: JsonSchema } & (
  | { kind: "prepare"; schemaId: number; argumentsJson: string }
  | { kind: "validate"; schemaId: number; value: unknown }
);

const port = parentPort!;
const schemas = new Map<number, JsonSchema>();
const validators = new Map<number, ResultValidator>();

// The format checks the validators use (as checkPiAcceptsSchema loads them on the main thread),
// and Ajv (loaded on the first schema): before the thread says it is ready, not in a check's time.
await loadPiSchemaFormats();
compileResultSchema({ type: "object" });

port.on("message", (request: Request) => {
  try {
    if (request.schema !== undefined) schemas.set(request.schemaId, request.schema);
    const schema = schemas.get(request.schemaId);
    if (schema === undefined) throw new Error(`schema ${request.schemaId} was never sent`);
    if (request.kind === "prepare") {
      port.postMessage({ id: request.id, answer: prepareGuarded(schema, request.argumentsJson) });
      return;
    }
    let validator = validators.get(request.schemaId);
    if (!validator) validators.set(request.schemaId, (validator = compileResultSchema(schema)));
    const checked = validator.validate(request.value);
    // A valid value's copy is not sent back: the main thread has the value.
    port.postMessage({ id: request.id, answer: checked.ok ? { ok: true, value: null } : checked });
  } catch (error) {
    port.postMessage({ id: request.id, error: error instanceof Error ? error.message : String(error) });
  }
});
port.postMessage({ ready: true });
