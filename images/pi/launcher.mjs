// In-container launcher: one Node process that prepares Pi's world and then becomes Pi.
//
// 1. Reads its configuration from SANDBOX_RUN_CONFIG and removes it from the environment that
//    Pi and its tools inherit. (The container's initial environment in /proc/<pid>/environ
//    still shows it; it holds nothing secret: socket paths, placeholders, the schema.)
// 2. Opens loopback TCP ports forwarded to the host's unix sockets (model gateway, egress
//    proxy). The container has no network; these sockets are the only way out. Pi is started
//    only after every port listens, so its first model request never races the bridge.
// 3. Holds a liveness connection to the gateway: if the host controller dies, the connection
//    closes and the launcher ends the container instead of leaving it to run unsupervised.
//    In copy mode the gateway's socket is the relay's (images/pi/relay.mjs, run in this process;
//    the controller reaches it through an exec bridged to a loopback port): the launcher waits
//    for it to appear, and the controller answers the liveness request only once the workspace
//    is copied in, so Pi never sees a half-filled workspace. Then the launcher stays up after Pi is done (the controller
//    reads the workspace back from the running container, then stops it).
//    Whatever the mode, the launcher stops the sandbox at its deadline (the run's timeout plus a
//    grace period), so a lost host or link cannot leave it running.
// 4. Writes Pi's models.json (placeholders only, real keys stay on the host) and imports
//    Pi's CLI in this same process: no second Node start-up.
// 5. Points Node's compile cache at the one baked into the image at build time, so Pi starts
//    from compiled code (see enableBakedCompileCache).
import fs from "node:fs";
import { constants, enableCompileCache, getCompileCacheDir } from "node:module";
import net from "node:net";
import path from "node:path";

const EXIT_SETUP_FAILED = 90;
const EXIT_CONTROLLER_GONE = 91;
const EXIT_DEADLINE_PASSED = 92;
const RELAY_POLL_MS = 5;
const RELAY_MODULE = "/opt/sandbox-run/relay.mjs";
const BAKED_COMPILE_CACHE = "/opt/sandbox-run/compile-cache";

function fail(code, message) {
  process.stderr.write(`sandbox-run launcher: ${message}\n`);
  process.exit(code);
}

const raw = process.env.SANDBOX_RUN_CONFIG;
delete process.env.SANDBOX_RUN_CONFIG;
if (!raw) fail(EXIT_SETUP_FAILED, "SANDBOX_RUN_CONFIG is not set; this image is started by sandbox-run");
const config = JSON.parse(raw);

function forward(port, socketPath) {
  // noDelay: Pi reads the model's streamed reply through this socket, in many small writes;
  // with Nagle's algorithm on, a write waiting for the previous one's (delayed) ACK stalls the
  // stream for up to 40 ms per exchange.
  // allowHalfOpen: each direction ends on its own (a client that sends its request and then
  // shuts down writing still gets the answer; a server that answers and closes still receives
  // the client's remaining bytes), as in the host-side proxy's tunnels.
  const server = net.createServer({ noDelay: true, allowHalfOpen: true }, (client) => {
    const upstream = net.connect({ path: socketPath, allowHalfOpen: true });
    // Pi's HTTP client holds its own reference while a request is in flight; ours must not
    // keep Pi alive for the keep-alive timeout once it is done.
    client.unref();
    upstream.unref();
    client.pipe(upstream).pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", close);
    upstream.on("error", close);
  });
  server.unref();
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", resolve);
  });
}

/**
 * `hold`: the connection keeps this process alive after Pi is done (copy mode). A connection that
 * closes before the answer means the controller (or its relay) is gone too.
 */
function holdLiveness(socket, hold) {
  return new Promise((resolve, reject) => {
    let answered = false;
    socket.write("GET /__sandbox-run/alive HTTP/1.1\r\nHost: gateway\r\n\r\n");
    socket.once("data", () => {
      answered = true;
      if (!hold) socket.unref();
      resolve();
    });
    socket.on("error", (error) => (answered ? undefined : reject(error)));
    socket.on("close", () => {
      if (answered || hold) fail(EXIT_CONTROLLER_GONE, "the host controller went away; stopping");
    });
  });
}

function connect(socketPath) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(socketPath);
    socket.once("connect", () => {
      socket.off("error", reject);
      resolve(socket);
    });
    socket.once("error", reject);
  });
}

/**
 * Copy mode: the relay (relay.mjs) runs in this process. The controller reaches it with an exec
 * that joins its stdio to this unix socket; the first connection is the controller's (nothing of
 * the sandbox runs before Pi, and Pi waits for the relay), so the socket goes once it arrives.
 */
async function startRelay(relay) {
  const { runRelay } = await import(RELAY_MODULE);
  const server = net.createServer();
  server.once("connection", (socket) => {
    server.close();
    void runRelay(relay, socket, (code, message) => fail(code, message));
  });
  fs.rmSync(relay.bridgeSocket, { force: true });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(relay.bridgeSocket, resolve);
  });
}

/** Copy mode: the relay's socket appears (and listens) once the controller has started the relay. */
async function connectWhenListening(socketPath, waitMs) {
  const until = Date.now() + waitMs;
  for (;;) {
    try {
      return await connect(socketPath);
    } catch (error) {
      if ((error.code !== "ENOENT" && error.code !== "ECONNREFUSED") || Date.now() > until) {
        throw new Error(`the host's relay did not start within ${waitMs / 1000} s (${error.message})`);
      }
      await new Promise((resolve) => setTimeout(resolve, RELAY_POLL_MS));
    }
  }
}

// Node keys its compile cache directory by version, V8 flags and uid
// (`v24.22.3-x64-<flags hash>-<uid>`), and the image bakes it as root while the sandbox runs
// as 65532 or as the calling user: a cache under another uid is never read, which costs
// ~200 ms of Pi start-up on every call. So enable the cache in the private home tmpfs, ask
// Node which directory name it chose, and make that name a link to the baked directory with
// the same version and flags. Node only reads it (the root filesystem is read-only, so new
// entries are silently not written back) and checks every entry against the source's hash,
// so a stale or missing entry is just a miss.
function enableBakedCompileCache(home) {
  try {
    const dir = `${home}/.cache/node-compile-cache`;
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (enableCompileCache(dir).status !== constants.compileCacheStatus.ENABLED) return;
    const ours = getCompileCacheDir();
    const prefix = path.basename(ours).replace(/-\d+$/, "-");
    const baked = fs.readdirSync(BAKED_COMPILE_CACHE).find((name) => name.startsWith(prefix));
    if (!baked) return;
    // Node created `ours` empty and reads entries from it lazily, by path, module by module.
    fs.rmdirSync(ours);
    fs.symlinkSync(`${BAKED_COMPILE_CACHE}/${baked}`, ours);
  } catch {
    // Only a speed-up: without it Pi compiles from source, as on a first run on a host.
  }
}

if (config.deadlineMs) {
  setTimeout(
    () => fail(EXIT_DEADLINE_PASSED, `the run's deadline (${config.deadlineMs / 1000} s) passed; stopping`),
    config.deadlineMs,
  ).unref();
}

try {
  // First: the controller's bridge exec is on its way.
  if (config.relay) await startRelay(config.relay);
  if (process.env.HOME) enableBakedCompileCache(process.env.HOME);
  await Promise.all(config.forwards.map((f) => forward(f.port, f.socketPath)));
  if (config.livenessSocket) {
    const socket = config.relayWaitMs
      ? await connectWhenListening(config.livenessSocket, config.relayWaitMs)
      : await connect(config.livenessSocket);
    await holdLiveness(socket, Boolean(config.holdAfterPi));
  }
  fs.mkdirSync(config.agentDir, { recursive: true, mode: 0o700 });
  fs.writeFileSync(`${config.agentDir}/models.json`, JSON.stringify(config.modelsJson), { mode: 0o600 });
} catch (error) {
  fail(EXIT_SETUP_FAILED, `could not prepare the sandbox: ${error?.message ?? error}`);
}

// The final-tool extension (loaded by Pi in this process) reads its definition from here.
globalThis.__sandboxRunFinalTool = config.finalTool ?? null;

process.argv = [process.argv[0], config.piCli, ...process.argv.slice(2)];
await import(config.piCli);
