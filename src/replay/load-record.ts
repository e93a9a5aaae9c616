// Reads a run record back for replay, and refuses one that does not check out: every file must be
// listed in SHA256SUMS with the right hash and nothing else may be in the folder. A record is input
// from elsewhere (a committed fixture, a CI artifact, a pull request), and SHA256SUMS proves nothing
// against whoever wrote it (anyone can recompute it): so the folder is read through one descriptor,
// every file through its own (no link followed; what is hashed is what is parsed), with caps on the
// number of files, their sizes, the lines and the nesting of their JSON, and every part is
// validated (record-schemas.ts; policy.json as a policy). Nothing read here is ever used as a host
// path, a command or a credential source: replay compares the recorded policy, image and paths with
// the caller's (compare-record.ts), it does not obey them.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { z } from "zod";
import type { JsonSchema } from "../agent.js";
import { usageError } from "../errors.js";
import { type Policy, policySchemas } from "../policy/policy-schema.js";
import {
  loadBytes,
  RECORD_FILES,
  RECORD_FORMAT,
  RECORD_MAX_ENTRIES,
  RECORD_MAX_HASHED_BYTES,
  RECORD_PAGE,
  type RecordedCall,
  type RecordedExchange,
  type RecordVersions,
} from "../record/record-format.js";
import { formatZodIssues } from "../util/config-file.js";
import { DEFAULT_JSON_SHAPE_LIMITS, jsonShape } from "../util/json-shape.js";
import { openRegularFile } from "../util/read-fd.js";
import type { ChangedFiles } from "../workspace/workspace-snapshot.js";
import { recordSchemaCostProblem } from "./record-schema-cost.js";
import { recordSchemas } from "./record-schemas.js";

export interface LoadedRecord {
  /** The record folder, absolute. */
  dir: string;
  format: number;
  versions: RecordVersions;
  prompt: string;
  schema?: JsonSchema;
  /** policy.json: the policy the run was recorded under (compared with the replay's, never applied). */
  policy: Policy;
  call: RecordedCall;
  /** The generations, in the order the gateway forwarded them. */
  exchanges: RecordedExchange[];
  outcome: RecordedOutcome;
}

export type RecordedOutcome =
  | { ok: true; result: unknown; changedFiles?: ChangedFiles }
  | { ok: false; error: { code: string; message: string } };

/**
 * Largest file of a record that replay reads whole (exchanges.jsonl; the others are far smaller).
 * Twice what a recording keeps (128 MiB of bytes, a little more once escaped as JSON text), and
 * well below V8's longest string (2^29 - 24 characters): the file is never made one string (its
 * lines are decoded one by one), but a line as long as the file must still fit in one.
 */
const MAX_READ_BYTES = 256 * 1024 * 1024;
const MAX_SMALL_FILE_BYTES = 64 * 1024 * 1024;
/** Largest file replay only hashes (events.jsonl and the patch): bounded by the run's output cap. */
const MAX_HASHED_BYTES = RECORD_MAX_HASHED_BYTES;
const HASH_CHUNK = 1024 * 1024;
const MAX_ENTRIES = RECORD_MAX_ENTRIES;
const MAX_EXCHANGES = 100_000;
/** JSON values (containers and list items) one line of exchanges.jsonl, and all its lines, may hold. */
const MAX_LINE_VALUES = 2_000_000;
const MAX_EXCHANGE_VALUES = 8_000_000;

/** How deeply JSON may nest, per file (a result follows the caller's schema, so it may nest deeper). */
const MAX_DEPTH: Record<string, number> = {
  [RECORD_FILES.policy]: 16,
  [RECORD_FILES.call]: 32,
  [RECORD_FILES.meta]: 32,
  [RECORD_FILES.error]: 32,
  [RECORD_FILES.exchanges]: 16,
  [RECORD_FILES.schema]: 128,
  [RECORD_FILES.result]: 256,
};
const NEEDED: ReadonlySet<string> = new Set([
  RECORD_FILES.prompt,
  RECORD_FILES.schema,
  RECORD_FILES.policy,
  RECORD_FILES.call,
  RECORD_FILES.exchanges,
  RECORD_FILES.meta,
  RECORD_FILES.result,
  RECORD_FILES.error,
]);

const HINT = "Replay the folder --record wrote, unchanged; if it was edited or damaged, record the run again.";

export function loadRecord(dir: string): LoadedRecord {
  const root = path.resolve(dir);
  const folder = openFolder(root);
  let files: Map<string, Buffer>;
  try {
    files = verifiedFiles(root, folder);
  } finally {
    fs.closeSync(folder);
  }
  const text = (name: string) => files.get(name)?.toString("utf8");
  const json = (name: string) => {
    const content = text(name);
    if (content === undefined) return undefined;
    return parseJson(root, name, content, MAX_DEPTH[name] ?? 32);
  };

  const meta = parse(
    root,
    RECORD_FILES.meta,
    recordSchemas().metaSchema,
    json(RECORD_FILES.meta) ?? missing(root, RECORD_FILES.meta),
  );
  if (meta.format === undefined || meta.format < 2) {
    throw usageError(
      `The record ${root} holds no model traffic: it was written before sandbox-run recorded the model's replies (record format ${meta.format ?? 1}).`,
      "Record the run again with this version of sandbox-run (--record), then replay that folder.",
    );
  }
  if (meta.format > RECORD_FORMAT) {
    throw usageError(
      `The record ${root} has format ${meta.format}, newer than this sandbox-run reads (${RECORD_FORMAT}); it was written by sandbox-run ${meta.versions?.sandboxRun ?? "?"}.`,
      "Replay it with that version of sandbox-run or a newer one.",
    );
  }
  const call = parse(
    root,
    RECORD_FILES.call,
    recordSchemas().callSchema,
    json(RECORD_FILES.call) ?? missing(root, RECORD_FILES.call),
  );
  const prompt = text(RECORD_FILES.prompt) ?? missing(root, RECORD_FILES.prompt);
  const schema = json(RECORD_FILES.schema) as JsonSchema | undefined;
  if (schema !== undefined && (typeof schema !== "object" || schema === null || Array.isArray(schema))) {
    throw invalid(root, `${RECORD_FILES.schema} is not a JSON Schema object`);
  }
  const costly = schema === undefined ? undefined : recordSchemaCostProblem(schema);
  if (costly) throw invalid(root, `${RECORD_FILES.schema} cannot be checked at a bounded cost: ${costly}`);
  const policy = parse(
    root,
    RECORD_FILES.policy,
    policySchemas().policySchema,
    json(RECORD_FILES.policy) ?? missing(root, RECORD_FILES.policy),
  );
  const exchanges = parseExchanges(root, files.get(RECORD_FILES.exchanges) ?? missing(root, RECORD_FILES.exchanges));
  const error = json(RECORD_FILES.error) as { code?: unknown; message?: unknown } | undefined;
  const outcome: RecordedOutcome = meta.ok
    ? {
        ok: true,
        result: json(RECORD_FILES.result) ?? null,
        ...(meta.changedFiles ? { changedFiles: meta.changedFiles } : {}),
      }
    : { ok: false, error: { code: String(error?.code ?? "unknown"), message: String(error?.message ?? "") } };
  return {
    dir: root,
    format: meta.format,
    versions: meta.versions ?? { sandboxRun: "unknown", pi: "unknown", node: "unknown" },
    prompt,
    ...(schema !== undefined ? { schema } : {}),
    policy,
    call: call as RecordedCall,
    exchanges,
    outcome,
  };
}

/** The record folder, opened once: every file is read relative to this descriptor. */
function openFolder(root: string): number {
  try {
    return fs.openSync(root, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  } catch (error) {
    throw usageError(
      `Cannot read the record ${root}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}.`,
      "Pass the folder a run wrote with --record.",
    );
  }
}

/** Every file of the folder, checked against SHA256SUMS; the contents of the ones replay reads. */
function verifiedFiles(root: string, folder: number): Map<string, Buffer> {
  let entries: string[];
  try {
    entries = fs.readdirSync(`/proc/self/fd/${folder}`);
  } catch (error) {
    throw usageError(
      `Cannot read the record ${root}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}.`,
      "Pass the folder a run wrote with --record.",
    );
  }
  if (entries.length > MAX_ENTRIES) {
    throw usageError(`The record ${root} holds ${entries.length} entries; a record has at most ${MAX_ENTRIES}.`, HINT);
  }
  const names = new Set(entries);
  const at = (name: string) => `/proc/self/fd/${folder}/${name}`;
  if (!names.has(RECORD_FILES.sums)) {
    // A library's `recordTo` folder: one record per call, in 1, 2, ... (review, session 30: read
    // as a damaged record).
    const calls = entries.filter((name) => /^[1-9]\d*$/.test(name)).sort((a, b) => Number(a) - Number(b));
    if (calls.length > 0)
      throw usageError(
        `${root} is a folder of ${calls.length} record(s), one per call (what the library's recordTo writes), not one record.`,
        `Replay one call's record (\`sandbox-run replay ${path.join(root, calls[0]!)}\`), or the whole workflow with the library's replayRecord(${JSON.stringify(root)}).`,
      );
    throw usageError(
      `The record ${root} has no ${RECORD_FILES.sums}, so it cannot be checked.`,
      names.size === 0 ? "Pass the folder a run wrote with --record." : HINT,
    );
  }
  const sums = parseSums(
    root,
    readVerbatim(root, at(RECORD_FILES.sums), RECORD_FILES.sums, 1024 * 1024).toString("utf8"),
  );
  const problems: string[] = [];
  const contents = new Map<string, Buffer>();
  for (const entry of entries) {
    // The page `sandbox-run show` leaves in the folder is made from the record, not part of it.
    if (entry === RECORD_FILES.sums || (entry === RECORD_PAGE && !sums.has(RECORD_PAGE))) continue;
    if (!sums.has(entry)) problems.push(`${entry} is not listed in ${RECORD_FILES.sums}`);
  }
  // The listed files' sizes, summed before any is read: each has its own cap, but 64 of them at 8 GiB
  // each took ~25 minutes to hash before the refusal (review, session 44). A size that changes while
  // it is hashed is held to what is left of the budget (hashFile's `budget`).
  let listedBytes = 0;
  for (const name of sums.keys()) {
    if (names.has(name)) listedBytes += sizeOf(at(name));
  }
  if (listedBytes > MAX_HASHED_BYTES)
    throw usageError(
      `The record ${root} holds ${Math.round(listedBytes / 1024 / 1024)} MiB in the files ${RECORD_FILES.sums} lists, more than replay reads (${MAX_HASHED_BYTES / 1024 / 1024 / 1024} GiB in all).`,
      HINT,
    );
  let hashedBytes = 0;
  for (const [name, expected] of sums) {
    if (!names.has(name)) {
      problems.push(`${name} is listed in ${RECORD_FILES.sums} but missing`);
      continue;
    }
    const read = hashFile(at(name), name, NEEDED.has(name), MAX_HASHED_BYTES - hashedBytes);
    hashedBytes += read.bytes ?? 0;
    if ("problem" in read) problems.push(read.problem);
    else if (read.sha256 !== expected) problems.push(`${name} does not match its sha256 in ${RECORD_FILES.sums}`);
    else if (read.content) contents.set(name, read.content);
  }
  if (problems.length > 0) {
    const shown = problems.slice(0, 5).join("; ");
    throw usageError(
      `The record ${root} failed its checksum check, so it is not replayed: ${shown}${problems.length > 5 ? ` (and ${problems.length - 5} more)` : ""}.`,
      HINT,
    );
  }
  return contents;
}

function parseSums(root: string, text: string): Map<string, string> {
  const sums = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const match = /^([0-9a-f]{64}) [ *]([^/\\\0]+)$/.exec(line);
    if (!match || match[2] === "." || match[2] === ".." || sums.has(match[2]!)) {
      throw usageError(
        `The record ${root} has a malformed ${RECORD_FILES.sums} line: ${JSON.stringify(line.slice(0, 120))}.`,
        HINT,
      );
    }
    sums.set(match[2]!, match[1]!);
  }
  return sums;
}

/** A listed entry's size, its link's own (never followed); 0 where it cannot be read (hashFile says why). */
function sizeOf(file: string): number {
  try {
    return fs.lstatSync(file).size;
  } catch {
    return 0;
  }
}

/**
 * The file's sha256 and size, read through one descriptor; its content too when `keep`. Never follows
 * a link. At most `budget` bytes are read (what is left of the record's: a file that grew since its
 * size was summed).
 */
function hashFile(
  file: string,
  name: string,
  keep: boolean,
  budget = Number.POSITIVE_INFINITY,
): { sha256: string; bytes: number; content?: Buffer } | { problem: string; bytes?: number } {
  let opened: { fd: number; stat: fs.Stats };
  try {
    // Its kind is checked before anything is opened: a record extracted as root may hold a device.
    opened = openRegularFile(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "not a regular file") return { problem: `${name} is not a regular file` };
    return { problem: `${name} cannot be read (${code ?? (error as Error).message})` };
  }
  const { fd, stat } = opened;
  try {
    const cap = Math.min(
      budget,
      !keep ? MAX_HASHED_BYTES : name === RECORD_FILES.exchanges ? MAX_READ_BYTES : MAX_SMALL_FILE_BYTES,
    );
    if (stat.size > cap) return { problem: tooLarge(name, cap) };
    const hash = crypto.createHash("sha256");
    const parts: Buffer[] = [];
    const chunk = Buffer.alloc(HASH_CHUNK);
    let total = 0;
    for (;;) {
      const n = fs.readSync(fd, chunk, 0, chunk.length, null);
      if (n === 0) break;
      total += n;
      // What was read counts against the record's budget too (a file that grew while it was read).
      if (total > cap) return { problem: tooLarge(name, cap), bytes: total };
      hash.update(chunk.subarray(0, n));
      if (keep) parts.push(Buffer.from(chunk.subarray(0, n)));
    }
    return { sha256: hash.digest("hex"), bytes: total, ...(keep ? { content: Buffer.concat(parts) } : {}) };
  } finally {
    fs.closeSync(fd);
  }
}

function tooLarge(name: string, cap: number): string {
  const size = cap >= 1024 * 1024 ? `${Math.round(cap / 1024 / 1024)} MiB` : `${cap} bytes`;
  return `${name} is larger than replay reads (${size})`;
}

function readVerbatim(root: string, file: string, name: string, cap: number): Buffer {
  const read = hashFile(file, name, true);
  if ("problem" in read) throw usageError(`The record ${root}: ${read.problem}.`, HINT);
  if (read.content!.length > cap) throw usageError(`The record ${root}: ${name} is too large.`, HINT);
  return read.content!;
}

/** One exchange per line, each line decoded on its own (the file as one string could pass V8's longest). */
function parseExchanges(root: string, bytes: Buffer): RecordedExchange[] {
  const exchanges: RecordedExchange[] = [];
  let index = 0;
  let valuesLeft = MAX_EXCHANGE_VALUES;
  for (let start = 0; start <= bytes.length; index++) {
    if (index > MAX_EXCHANGES) throw invalid(root, `${RECORD_FILES.exchanges} has more than ${MAX_EXCHANGES} lines`);
    let end = bytes.indexOf(0x0a, start);
    if (end < 0) end = bytes.length;
    // Values are counted before a line is parsed: bytes alone do not bound what parsing costs (a
    // 240 MB line of `{}` took 14 minutes and ended replay out of memory).
    const shape = jsonShape(bytes.subarray(start, end), {
      maxValues: Math.min(MAX_LINE_VALUES, valuesLeft),
      maxDepth: MAX_DEPTH[RECORD_FILES.exchanges]!,
    });
    if (shape.problem)
      throw invalid(
        root,
        `${RECORD_FILES.exchanges} line ${index + 1} cannot be parsed at a bounded cost: ${shape.problem} (replay parses at most ${MAX_LINE_VALUES} values a line, ${MAX_EXCHANGE_VALUES} in all)`,
      );
    valuesLeft -= shape.values;
    const line = bytes.toString("utf8", start, end);
    start = end + 1;
    if (line.trim() === "") continue;
    const value = parseJson(
      root,
      `${RECORD_FILES.exchanges} line ${index + 1}`,
      line,
      MAX_DEPTH[RECORD_FILES.exchanges]!,
    );
    const exchange = parse(
      root,
      `${RECORD_FILES.exchanges} line ${index + 1}`,
      recordSchemas().exchangeSchema,
      value,
    ) as RecordedExchange;
    // The recorded request's body is JSON text inside one string: replay parses it at each request it
    // is matched against, so its values count too, within what the live gateway would have taken
    // (DEFAULT_JSON_SHAPE_LIMITS; review, session 44: a 120 MiB body of `{}` counted as one value held
    // the controller 91 s and 4 GB).
    if (exchange.request) {
      const body = jsonShape(loadBytes(exchange.request.body), {
        maxValues: Math.min(DEFAULT_JSON_SHAPE_LIMITS.maxValues, valuesLeft),
        maxDepth: DEFAULT_JSON_SHAPE_LIMITS.maxDepth,
      });
      if (body.problem)
        throw invalid(
          root,
          `${RECORD_FILES.exchanges} line ${index + 1}: the recorded request's body cannot be parsed at a bounded cost: ${body.problem} (the gateway takes at most ${DEFAULT_JSON_SHAPE_LIMITS.maxValues} values a request)`,
        );
      valuesLeft -= body.values;
    }
    exchanges.push(exchange);
  }
  return exchanges.sort((a, b) => a.seq - b.seq);
}

/** JSON.parse, after a check that the text nests no deeper than `maxDepth` (deep nesting overflows the stack of what reads it next). */
function parseJson(root: string, what: string, text: string, maxDepth: number): unknown {
  const depth = jsonDepth(text, maxDepth);
  if (depth > maxDepth) throw invalid(root, `${what} nests deeper than ${maxDepth} levels`);
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw invalid(root, `${what} is not valid JSON (${(error as Error).message})`);
  }
}

/** The deepest nesting of arrays and objects in JSON text (outside strings); stops counting past `stopAt`. */
export function jsonDepth(text: string, stopAt: number): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      depth++;
      if (depth > deepest) {
        deepest = depth;
        if (deepest > stopAt) return deepest;
      }
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return deepest;
}

function parse<T extends z.ZodType>(root: string, what: string, schema: T, value: unknown): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw invalid(root, `${what}: ${formatZodIssues(parsed.error.issues, "; ")}`);
  return parsed.data;
}

function invalid(root: string, why: string) {
  return usageError(`The record ${root} cannot be replayed: ${why}.`, HINT);
}

function missing(root: string, name: string): never {
  throw usageError(`The record ${root} has no ${name}.`, HINT);
}
