// The shape of a run record's files that replay reads back (docs/records.md documents all of
// them). Shared by the writer (run-recorder.ts, traffic-log.ts) and the reader (replay/), so the
// two cannot drift apart. Bump RECORD_FORMAT when a change would make an older reader misread
// a record; readers refuse formats they do not know.

/** meta.json `format`: 1 had no model traffic; 2 added replay.json and exchanges.jsonl. */
export const RECORD_FORMAT = 2;

export const RECORD_FILES = {
  prompt: "prompt.txt",
  schema: "schema.json",
  policy: "policy.json",
  plan: "plan.json",
  events: "events.jsonl",
  result: "result.json",
  error: "error.json",
  patch: "changes.patch",
  meta: "meta.json",
  call: "replay.json",
  exchanges: "exchanges.jsonl",
  sums: "SHA256SUMS",
} as const;

/** A record holds about a dozen files: a reader looks at no more names than this. */
export const RECORD_MAX_ENTRIES = 64;

/**
 * The most a reader hashes of a record (replay and show: of the whole folder, and so of one file).
 * The files that grow with the run (events.jsonl, within the run's output limit) are far smaller.
 */
export const RECORD_MAX_HASHED_BYTES = 8 * 1024 * 1024 * 1024;

/**
 * The page `sandbox-run show` writes into a record folder by default: made from the record, not
 * part of it (not in SHA256SUMS), and never read back by replay or by show.
 */
export const RECORD_PAGE = "run.html";

export interface RecordVersions {
  sandboxRun: string;
  /** The Pi version of the runner image the run was planned with. */
  pi: string;
  node: string;
}

/**
 * replay.json: what it takes to make the same call again, beyond prompt, schema and policy (their
 * own files). Written when the record starts; holds no credential (the models.json is the one the
 * sandbox got: the gateway's URL and a placeholder key).
 */
export interface RecordedCall {
  /** "provider/id" as the caller named it. */
  model: string;
  /** The gateway route the model's requests took, its Pi api and the model id the upstream saw. */
  route: { id: string; api: string; model: string };
  /** The models.json Pi inside the sandbox got (only the run's provider, pointing at the gateway). */
  sandboxModelsJson: unknown;
  /** The workspace on the host, and where the sandbox saw it (Pi's cwd, in its system prompt). */
  workspace: { host: string; sandbox: string };
  writableRoots: string[];
  /** The runner image the run used, and whether it was the default one of the recording's version. */
  image: string;
  defaultImage: boolean;
  timeoutMs: number;
  budgets: { maxTurns?: number; maxCostUsd?: number };
  /** Variables the caller set for the sandbox, by name (values are never recorded). */
  sandboxEnvNames: string[];
  extraArgs: string[];
}

/** Bytes as stored in JSON: UTF-8 text when they are valid UTF-8, else base64. */
export type StoredBytes = { text: string } | { base64: string };

/** One line of exchanges.jsonl: a generation request the gateway relayed, and its response. */
export interface RecordedExchange {
  /** The order in which the gateway forwarded generation requests (1, 2, ...). */
  seq: number;
  routeId: string;
  api: string;
  /** The request path (route included), without the query string. */
  path: string;
  /** What the client got: the upstream's status, 502 (unreachable) or 499 (it left first). */
  status: number;
  relay: string;
  startedMs: number;
  headersMs?: number;
  durationMs: number;
  /** What the model said, as the host parsed it (for people reading the record; replay uses the bytes). */
  reply?: {
    text: string;
    toolCalls: Array<{ id: string; name: string; argumentsJson: string }>;
    stopReason?: string;
    error?: string;
    complete: boolean;
  };
  request?: {
    method: string;
    /** Path and query string as the sandbox sent them. */
    target: string;
    /** The sandbox's headers that were relayed: never a credential header. */
    headers: Record<string, string | string[]>;
    body: StoredBytes;
    bodyTruncated: boolean;
  };
  response?: {
    status: number;
    headers: Record<string, string | string[]>;
    /** The body as it streamed: each chunk with its time (ms) since the request was forwarded. */
    chunks: Array<{ atMs: number } & StoredBytes>;
    bodyTruncated: boolean;
  };
  /** The bytes were not stored, and why (the record's size cap). Such an exchange cannot be replayed. */
  omitted?: string;
  /** A credential value was found in the bytes and replaced before anything was written. */
  scrubbed?: true;
}

export function storeBytes(bytes: Buffer): StoredBytes {
  // Invalid UTF-8 (or a character split between two chunks) does not survive the round trip.
  const text = bytes.toString("utf8");
  return Buffer.from(text, "utf8").equals(bytes) ? { text } : { base64: bytes.toString("base64") };
}

export function loadBytes(stored: StoredBytes): Buffer {
  return "text" in stored ? Buffer.from(stored.text, "utf8") : Buffer.from(stored.base64, "base64");
}
