// What replay checks in a record's JSON files (record/record-format.ts describes them): the fields
// it relies on, with their types; other fields pass through (newer writers may add some).
import { z } from "../util/zod.js";

const stringArray = z.array(z.string());
const changedFilesSchema = z.object({ created: stringArray, modified: stringArray, deleted: stringArray });
const versionsSchema = z.object({ sandboxRun: z.string(), pi: z.string(), node: z.string() });
export const metaSchema = z
  .object({
    format: z.number().int().optional(),
    versions: versionsSchema.optional(),
    ok: z.boolean(),
    changedFiles: changedFilesSchema.optional(),
  })
  .loose();
export const callSchema = z
  .object({
    model: z.string().min(1),
    route: z.object({ id: z.string(), api: z.string(), model: z.string() }),
    sandboxModelsJson: z.object({ providers: z.record(z.string(), z.unknown()) }),
    workspace: z.object({ host: z.string(), sandbox: z.string() }),
    writableRoots: stringArray,
    image: z.string(),
    defaultImage: z.boolean(),
    timeoutMs: z.number().positive(),
    budgets: z.object({ maxTurns: z.number().optional(), maxCostUsd: z.number().optional() }),
    sandboxEnvNames: stringArray,
    extraArgs: stringArray,
  })
  .loose();
const storedBytes = z.union([z.object({ text: z.string() }), z.object({ base64: z.string() })]);
const headers = z.record(z.string(), z.union([z.string(), stringArray]));
export const exchangeSchema = z
  .object({
    seq: z.number().int().positive(),
    routeId: z.string(),
    api: z.string(),
    path: z.string(),
    status: z.number().int(),
    relay: z.string(),
    startedMs: z.number(),
    headersMs: z.number().optional(),
    durationMs: z.number(),
    request: z
      .object({
        method: z.string(),
        target: z.string(),
        headers,
        body: storedBytes,
        bodyTruncated: z.boolean(),
      })
      .optional(),
    response: z
      .object({
        status: z.number().int().min(100).max(599),
        headers,
        chunks: z.array(z.intersection(z.object({ atMs: z.number().nonnegative() }), storedBytes)),
        bodyTruncated: z.boolean(),
      })
      .optional(),
    omitted: z.string().optional(),
    scrubbed: z.literal(true).optional(),
  })
  .loose();
