// `GET /__sandbox-run/alive`: the in-container launcher holds this response open for the whole
// run, so when the host controller goes away the sandbox sees EOF and stops itself (launcher exit
// 91). The host learns that the container ended from the engine, not from here.
import type http from "node:http";

/** The path the in-container launcher holds open for the whole run. */
export const GATEWAY_LIVENESS_PATH = "/__sandbox-run/alive";

/** Opens the held response; `onClose` runs when either side ends it. */
export function holdLiveness(req: http.IncomingMessage, res: http.ServerResponse, onClose: () => void): void {
  res.writeHead(200, { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" });
  res.flushHeaders();
  req.socket.setTimeout(0);
  res.once("close", onClose);
}
