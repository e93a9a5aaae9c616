// An engine's build, pull, import and load progress: JSON lines, untrusted input like its other
// answers (E7). docker-modem's followProgress keeps every line's object until the stream ends, lets
// a line without a newline grow without bound, and throws out of a 'data' handler on a line that is
// not JSON, an uncaught exception that ends the whole process. Here a line is read up to a cap and
// parsed on its own, only the first error is kept, and a stream that closes before its end fails.

/** The longest progress line taken; a build step's output arrives as many short lines. */
export const MAX_PROGRESS_LINE_BYTES = 1024 * 1024;

/** What the engine reports on a progress line (only the fields the host reads). */
export interface ProgressEvent {
  stream?: string;
  status?: string;
  error?: string;
}

/** A stream the engine ended wrongly: too long a line, a line that is not JSON, no end. */
export class ProgressStreamError extends Error {}

/** Reads `stream` to its end, each event to `onEvent`; resolves with the first `error` an event carried. */
export function followProgress(
  stream: NodeJS.ReadableStream,
  onEvent: (event: ProgressEvent) => void,
): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    let firstError: string | undefined;
    let done = false;
    const finish = (error?: Error) => {
      if (done) return;
      done = true;
      stream.removeListener("data", onData);
      if (error) {
        (stream as { destroy?: () => void }).destroy?.();
        reject(error);
      } else resolve(firstError);
    };
    const onLine = (line: Buffer) => {
      const text = line.toString("utf8").replace(/\r$/, "");
      if (!text) return;
      let event: unknown;
      try {
        event = JSON.parse(text);
      } catch {
        return finish(new ProgressStreamError(`a progress line is not JSON: ${JSON.stringify(text.slice(0, 80))}`));
      }
      if (!event || typeof event !== "object") return;
      const { stream: out, status, error } = event as Record<string, unknown>;
      if (typeof error === "string") firstError ??= error;
      onEvent({
        ...(typeof out === "string" ? { stream: out } : {}),
        ...(typeof status === "string" ? { status } : {}),
        ...(typeof error === "string" ? { error } : {}),
      });
    };
    const onData = (chunk: Buffer | string) => {
      let data = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      for (let newline = data.indexOf(0x0a); newline >= 0 && !done; newline = data.indexOf(0x0a)) {
        pending.push(data.subarray(0, newline));
        const line = Buffer.concat(pending);
        pending = [];
        pendingBytes = 0;
        data = data.subarray(newline + 1);
        if (line.length > MAX_PROGRESS_LINE_BYTES) return finish(tooLong());
        onLine(line);
      }
      if (done || data.length === 0) return;
      pending.push(data);
      pendingBytes += data.length;
      if (pendingBytes > MAX_PROGRESS_LINE_BYTES) finish(tooLong());
    };
    const tooLong = () =>
      new ProgressStreamError(`a progress line is longer than ${MAX_PROGRESS_LINE_BYTES / 1024 / 1024} MiB`);
    stream.on("data", onData);
    stream.once("error", (error: Error) => finish(error));
    stream.once("end", () => {
      if (pendingBytes > 0) onLine(Buffer.concat(pending));
      finish();
    });
    stream.once("close", () => finish(new ProgressStreamError("the engine closed the stream before its end")));
  });
}
