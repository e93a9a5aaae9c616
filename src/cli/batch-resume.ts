// `sandbox-run batch --resume <results.jsonl>`: the ids an earlier batch answered with success, read
// from its stdout (one envelope per line, `{"id": ..., "ok": true, ...}`), so a rerun after an
// interruption or a few failures runs only what is left. Read line by line (a file of thousands of
// results holds one line in memory at a time). A line that is not a whole envelope (a write cut
// short, something else appended) counts as no answer: its task runs again, never the other way.
// A task's result cannot forge another task's line: the batch writes each envelope with
// JSON.stringify, which escapes every line break inside it, and lines are split on line breaks only.
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { usageError } from "../errors.js";
import { HostDir, HostDirError } from "../util/host-dir.js";
import { openRegularFile } from "../util/read-fd.js";

/**
 * The ids whose last answer in `file` is `"ok": true` (a task that failed after it once succeeded,
 * in a rerun, runs again); none when the file does not exist yet (a first run). The file must be a
 * regular file of this user's, not reached through a link at its name (see openForReading).
 */
export async function succeededTaskIds(file: string): Promise<Set<string>> {
  const last = new Map<string, boolean>();
  try {
    const stream = openForReading(file);
    const lines = readline.createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY });
    for await (const line of lines) {
      const answer = answerOf(line);
      if (answer) last.set(answer.id, answer.ok);
    }
    return new Set([...last].filter(([, ok]) => ok).map(([id]) => id));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return new Set();
    const why = error instanceof HostDirError ? error.message : (code ?? (error as Error).message);
    throw usageError(
      `The --resume file ${file} cannot be read (${why}).`,
      "Pass the file an earlier batch's stdout was appended to (`>> results.jsonl`), or a path that does not exist yet.",
    );
  }
}

/** The id of one stdout line that reports a success, else undefined. */
export function succeededId(line: string): string | undefined {
  const answer = answerOf(line);
  return answer?.ok ? answer.id : undefined;
}

/** A task's answer on one stdout line (an envelope with its id), else undefined. */
function answerOf(line: string): { id: string; ok: boolean } | undefined {
  if (!line.startsWith("{")) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  const envelope = value as { id?: unknown; ok?: unknown };
  return typeof envelope.id === "string" && typeof envelope.ok === "boolean"
    ? { id: envelope.id, ok: envelope.ok }
    : undefined;
}

/**
 * A read stream of the file, opened now (a missing or unreadable file is an error here, not
 * mid-read). What it says decides which tasks are skipped, so it must be this user's (or root's)
 * and writable by no one else, in a folder that is too, reached through no other user's link:
 * another local user's `results.jsonl`, or one they planted where the first run's will be, would
 * choose tasks that never run.
 */
function openForReading(file: string): fs.ReadStream {
  const absolute = path.resolve(file);
  const dir = HostDir.open(path.dirname(absolute));
  let opened: { fd: number; stat: fs.Stats };
  try {
    opened = openRegularFile(dir.at(path.basename(absolute)));
  } finally {
    dir.close();
  }
  const { fd, stat } = opened;
  const uid = process.geteuid?.() ?? 0;
  const problem =
    stat.uid !== uid && stat.uid !== 0
      ? `it belongs to uid ${stat.uid}, not to this user (${uid})`
      : (stat.mode & 0o022) !== 0
        ? `other users may write it (mode ${(stat.mode & 0o777).toString(8)})`
        : undefined;
  if (problem) {
    fs.closeSync(fd);
    throw Object.assign(new Error(problem), { code: problem });
  }
  return fs.createReadStream("", { fd, encoding: "utf8" });
}
