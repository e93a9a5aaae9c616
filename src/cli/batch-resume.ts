// `sandbox-run batch --resume <results.jsonl>`: the ids an earlier batch answered with success, read
// from its stdout (one envelope per line, `{"id": ..., "ok": true, ...}`), so a rerun after an
// interruption or a few failures runs only what is left. Read line by line (a file of thousands of
// results holds one line in memory at a time). A line that is not a whole envelope (a write cut
// short, something else appended) counts as no answer: its task runs again, never the other way.
// A task's result cannot forge another task's line: the batch writes each envelope with
// JSON.stringify, which escapes every line break inside it, and lines are split on line breaks only.
import fs from "node:fs";
import readline from "node:readline";
import { usageError } from "../errors.js";

/** The ids `file` answers with `"ok": true`; none when the file does not exist yet (a first run). */
export async function succeededTaskIds(file: string): Promise<Set<string>> {
  const done = new Set<string>();
  try {
    const stream = await openForReading(file);
    const lines = readline.createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY });
    for await (const line of lines) {
      const id = succeededId(line);
      if (id !== undefined) done.add(id);
    }
    return done;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return done;
    throw usageError(
      `The --resume file ${file} cannot be read (${code ?? (error as Error).message}).`,
      "Pass the file an earlier batch's stdout was appended to (`>> results.jsonl`), or a path that does not exist yet.",
    );
  }
}

/** The id of one stdout line that reports a success, else undefined. */
export function succeededId(line: string): string | undefined {
  if (!line.startsWith("{")) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  const envelope = value as { id?: unknown; ok?: unknown };
  return typeof envelope.id === "string" && envelope.ok === true ? envelope.id : undefined;
}

/** A read stream once the file is open (so a missing or unreadable file is an error here, not mid-read). */
function openForReading(file: string): Promise<fs.ReadStream> {
  return new Promise((resolve, reject) => {
    const stream = fs.createReadStream(file, { encoding: "utf8" });
    stream.once("open", () => {
      stream.off("error", reject);
      resolve(stream);
    });
    stream.once("error", reject);
  });
}
