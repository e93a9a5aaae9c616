// Reads a request body into memory, up to a cap: the gateway has to see the whole body before
// it decides (model, tools, betas), and the sandbox must not make the host buffer without end.
import type http from "node:http";

/** Default cap on a request body: far above what Pi sends (a long conversation with images). */
export const DEFAULT_MAX_REQUEST_BYTES = 32 * 1024 * 1024;

export type BodyRead =
  | { ok: true; body: Buffer }
  | { ok: false; problem: "too-large"; bytes: number }
  | { ok: false; problem: "aborted"; bytes: number };

export function readRequestBody(req: http.IncomingMessage, maxBytes: number): Promise<BodyRead> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > maxBytes) {
    return Promise.resolve({ ok: false, problem: "too-large", bytes: declared });
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    let settled = false;
    const settle = (result: BodyRead) => {
      if (settled) return;
      settled = true;
      req.off("data", onData);
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > maxBytes) {
        chunks.length = 0;
        req.pause();
        settle({ ok: false, problem: "too-large", bytes });
        return;
      }
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.once("end", () => settle({ ok: true, body: Buffer.concat(chunks, bytes) }));
    req.once("error", () => settle({ ok: false, problem: "aborted", bytes }));
    req.once("close", () =>
      settle(
        req.complete ? { ok: true, body: Buffer.concat(chunks, bytes) } : { ok: false, problem: "aborted", bytes },
      ),
    );
  });
}
