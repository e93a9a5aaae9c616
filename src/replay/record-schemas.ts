// What replay checks in a record's JSON files (record/record-format.ts describes them): the fields
// it relies on, with their types and bounds. A record is untrusted input (a committed fixture, an
// artifact, a pull request): every string, list and map has a cap, and what could name something on
// the host is checked for shape here and never used as a host path, command or credential source.
// Other fields pass through (newer writers may add some), within the file's size and depth caps.
import http from "node:http";
import path from "node:path";
import { lazily, z } from "../util/zod.js";

/** The most items of any list a record's replay.json or meta.json may hold. */
const MAX_LIST = 100_000;
const MAX_NAME = 256;
const MAX_PATH = 4096;

/** Whether Node's HTTP would send this header (its name a token, its values without CR, LF or NUL). */
function httpHeaderOk(name: string, value: string | string[]): boolean {
  try {
    http.validateHeaderName(name);
    for (const one of Array.isArray(value) ? value : [value]) http.validateHeaderValue(name, one);
    return true;
  } catch {
    return false;
  }
}

/** The record files' schemas, built on first use: importing the library loads no zod (session 27). */
export const recordSchemas = lazily(() => {
  const name = z.string().max(MAX_NAME);
  const stringArray = z.array(z.string().max(MAX_PATH)).max(MAX_LIST);
  /** No control characters: these strings end up in messages and comparisons. */
  const plain = (max: number) =>
    z
      .string()
      .max(max)
      // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
      .refine((s) => !/[\u0000-\u001f\u007f]/.test(s), { message: "holds control characters" });
  /** An absolute, normalised path: only ever compared (host) or used as a place inside the sandbox. */
  const absolutePath = plain(MAX_PATH).refine(
    (p) => path.posix.isAbsolute(p) && path.posix.normalize(p) === p && (p === "/" || !p.endsWith("/")),
    { message: "must be an absolute, normalised path" },
  );

  const changedFilesSchema = z.object({ created: stringArray, modified: stringArray, deleted: stringArray });
  const versionsSchema = z.object({ sandboxRun: name, pi: name, node: name });
  const metaSchema = z
    .object({
      format: z.number().int().optional(),
      versions: versionsSchema.optional(),
      ok: z.boolean(),
      changedFiles: changedFilesSchema.optional(),
    })
    .loose();

  /** A models.json value that is a command ("!..."): never taken from a record. */
  function holdsCommand(value: unknown, depth = 0): boolean {
    if (depth > 32) return true;
    if (typeof value === "string") return value.startsWith("!");
    if (Array.isArray(value)) return value.some((v) => holdsCommand(v, depth + 1));
    if (value && typeof value === "object") return Object.values(value).some((v) => holdsCommand(v, depth + 1));
    return false;
  }

  const sandboxModelsJsonSchema = z
    .object({
      providers: z
        .record(name, z.record(name, z.unknown()))
        .refine((providers) => Object.keys(providers).length <= 8, { message: "names more than 8 providers" }),
    })
    .refine((value) => !holdsCommand(value), {
      message: 'holds a "!command" value: a record never names a command for the host',
    });

  const callSchema = z
    .object({
      model: plain(MAX_NAME).regex(/^[^/]+\/.+$/, "must be provider/id"),
      route: z.object({ id: name, api: name, model: name }),
      sandboxModelsJson: sandboxModelsJsonSchema,
      workspace: z.object({ host: absolutePath, sandbox: absolutePath }),
      writableRoots: z.array(absolutePath).max(64),
      image: plain(MAX_NAME),
      defaultImage: z.boolean(),
      timeoutMs: z.number().positive().finite(),
      budgets: z.object({
        maxTurns: z.number().int().positive().optional(),
        maxCostUsd: z.number().positive().finite().optional(),
      }),
      sandboxEnvNames: z
        .array(
          z
            .string()
            .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
            .max(MAX_NAME),
        )
        .max(1024),
      extraArgs: z.array(plain(MAX_PATH)).max(64),
    })
    .loose();

  const storedBytes = z.union([z.object({ text: z.string() }), z.object({ base64: z.string() })]);
  const headers = z
    .record(z.string().max(MAX_NAME), z.union([z.string(), z.array(z.string()).max(64)]))
    .refine((h) => Object.keys(h).length <= 256, { message: "has more than 256 headers" })
    // Replay writes a response's headers back to Pi: one HTTP cannot carry (CR/LF in a value) threw
    // from a timer of the paced replay and ended the controller mid-run (review, session 44).
    .refine((h) => Object.entries(h).every(([name, value]) => httpHeaderOk(name, value)), {
      message: "holds a header name or value HTTP cannot carry",
    });
  const exchangeSchema = z
    .object({
      seq: z.number().int().positive(),
      routeId: name,
      api: name,
      path: z.string().max(MAX_PATH),
      status: z.number().int(),
      relay: name,
      startedMs: z.number(),
      headersMs: z.number().optional(),
      durationMs: z.number(),
      request: z
        .object({
          method: name,
          target: z.string().max(MAX_PATH * 4),
          headers,
          body: storedBytes,
          bodyTruncated: z.boolean(),
        })
        .optional(),
      response: z
        .object({
          status: z.number().int().min(100).max(599),
          headers,
          chunks: z.array(z.intersection(z.object({ atMs: z.number().nonnegative() }), storedBytes)).max(1_000_000),
          bodyTruncated: z.boolean(),
        })
        .optional(),
      omitted: z.string().max(MAX_PATH).optional(),
      scrubbed: z.literal(true).optional(),
    })
    .loose();
  return { metaSchema, callSchema, exchangeSchema };
});
