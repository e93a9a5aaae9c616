// Reads a request body into memory, up to a cap: the gateway has to see the whole body before
// it decides (model, tools, betas), and the sandbox must not make the host buffer without end.
// Every byte held is taken from the run's byte pool first (gateway-capacity.ts): a body that does
// not fit is dropped at once, so unfinished requests cannot add up past the pool.
import type http from "node:http";
import type { CapacityLease } from "./gateway-capacity.js";

/** Default cap on a request body: far above what Pi sends (a long conversation with images). */
export const DEFAULT_MAX_REQUEST_BYTES = 32 * 1024 * 1024;

type BodyRead =
  | { ok: true; body: Buffer }
  | { ok: false; problem: "too-large"; bytes: number }
  /** The run's byte pool is held by other requests. */
  | { ok: false; problem: "no-room"; bytes: number }
  | { ok: false; problem: "aborted"; bytes: number };

export function readRequestBody(req: http.IncomingMessage, maxBytes: number, pool?: CapacityLease): Promise<BodyRead> {
  const declared = Number(req.headers["content-length"]);
  const known = req.headers["content-length"] !== undefined && Number.isSafeInteger(declared) && declared >= 0;
  if (known && declared > maxBytes) return Promise.resolve({ ok: false, problem: "too-large", bytes: declared });
  // A declared length is taken from the pool up front and read into one buffer of that size.
  if (known && pool && !pool.reserve(declared)) return Promise.resolve({ ok: false, problem: "no-room", bytes: 0 });
  return new Promise((resolve) => {
    const whole = known ? Buffer.allocUnsafe(declared) : undefined;
    const chunks: Buffer[] = [];
    let bytes = 0;
    let settled = false;
    const settle = (result: BodyRead) => {
      if (settled) return;
      settled = true;
      req.off("data", onData);
      resolve(result);
    };
    const body = () => (whole ? whole.subarray(0, bytes) : Buffer.concat(chunks, bytes));
    const drop = (result: BodyRead) => {
      chunks.length = 0;
      req.pause();
      settle(result);
    };
    const onData = (chunk: Buffer) => {
      if (bytes + chunk.length > maxBytes || (whole && bytes + chunk.length > whole.length))
        return drop({ ok: false, problem: "too-large", bytes: bytes + chunk.length });
      if (!whole && pool && !pool.reserve(chunk.length)) return drop({ ok: false, problem: "no-room", bytes });
      if (whole) chunk.copy(whole, bytes);
      else chunks.push(chunk);
      bytes += chunk.length;
    };
    req.on("data", onData);
    req.once("end", () => settle({ ok: true, body: body() }));
    req.once("error", () => settle({ ok: false, problem: "aborted", bytes }));
    req.once("close", () =>
      settle(req.complete ? { ok: true, body: body() } : { ok: false, problem: "aborted", bytes }),
    );
  });
}
