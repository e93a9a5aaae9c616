// Removing containers once this process is gone. `process.exit()` runs only synchronous code
// ('exit' listeners), so nothing here can talk to the engine; what can still be done is to start
// a process of its own that does, and outlives this one. It is a plain `node -e` with no access to
// this program's modules or environment: it lists the containers carrying every given label over
// the engine's unix socket and force-removes them. Engines reached another way (tcp, ssh) leave
// such containers to stop by themselves and to `gc`.
import { spawn } from "node:child_process";

/** The helper's code: argv = [socket path, labels as JSON]. Ids are checked before they go into a path. */
const HELPER = `
const http = require("node:http");
const [socketPath, labels] = process.argv.slice(1);
const call = (method, path) => new Promise((resolve) => {
  const request = http.request({ socketPath, method, path, timeout: 20000 }, (response) => {
    let body = "";
    response.setEncoding("utf8");
    response.on("data", (chunk) => { if (body.length < 4194304) body += chunk; });
    response.on("end", () => resolve(body));
  });
  request.on("error", () => resolve(""));
  request.on("timeout", () => request.destroy());
  request.end();
});
(async () => {
  const filters = encodeURIComponent(JSON.stringify({ label: JSON.parse(labels) }));
  let found = [];
  try { found = JSON.parse(await call("GET", "/containers/json?all=1&filters=" + filters)); } catch {}
  if (!Array.isArray(found)) return;
  const ids = found.map((c) => c && c.Id).filter((id) => typeof id === "string" && /^[0-9a-f]{64}$/.test(id));
  await Promise.all(ids.map((id) => call("DELETE", "/containers/" + id + "?force=1&v=1")));
})();
`;

/**
 * Starts the helper for the containers carrying every one of `labels` on the engine at
 * `socketPath`. Synchronous (callable from an 'exit' listener); never throws.
 */
export function spawnRemovalHelper(socketPath: string, labels: string[]): void {
  try {
    spawn(process.execPath, ["-e", HELPER, socketPath, JSON.stringify(labels)], {
      detached: true,
      stdio: "ignore",
      env: {},
    }).unref();
  } catch {
    // Best effort: the containers stop by themselves, and gc removes them.
  }
}
