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
//
// A warm sandbox (`config.warm`) is started before any call: the launcher starts the relay, loads
// Pi's modules (everything Pi's CLI imports, and the lazily imported pieces a run needs) and
// waits. It holds no workspace, no run configuration and no socket to the host until a claim
// arrives through the relay (one command carrying the run's configuration, with its trees); then
// it writes the run's models.json, takes the run's environment, forwards the run's ports, changes
// to the workspace and calls Pi's CLI entry (`main`) with the run's argv, in this same process, so
// the host reads exactly the event stream of a cold call. A warm sandbox no call claims stops at
// its idle deadline (exit 93); once claimed, the run's deadline applies.
import fs from "node:fs";
import { constants, enableCompileCache, getCompileCacheDir } from "node:module";
import net from "node:net";
import path from "node:path";

const EXIT_SETUP_FAILED = 90;
const EXIT_CONTROLLER_GONE = 91;
const EXIT_DEADLINE_PASSED = 92;
const EXIT_IDLE_DEADLINE_PASSED = 93;
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
async function startRelay(relay, hooks = {}) {
  const relayModule = await import(RELAY_MODULE);
  const server = net.createServer();
  server.once("connection", (socket) => {
    server.close();
    void relayModule.runRelay(relay, socket, (code, message) => fail(code, message), hooks);
  });
  fs.rmSync(relay.bridgeSocket, { force: true });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(relay.bridgeSocket, resolve);
  });
  return relayModule;
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

/** Stops the sandbox after `ms` (a lost controller, host or link cannot keep it past this). */
function stopAfter(ms, code, message) {
  const timer = setTimeout(() => fail(code, message), ms);
  timer.unref();
  return timer;
}

// Lazily imported pieces of Pi every run needs (the extension loader, for the final tool): loaded
// before the claim so the call does not wait for them. Names are esbuild's chunk names; the
// controller adds the provider APIs its calls are likely to use (config.warm.preload).
const PRELOADED_CHUNKS = ["jiti-static-loader", "virtual-modules"];

/**
 * Pi's CLI without running it: the modules its entry (dist/bundle/cli-runtime.js, esbuild's output:
 * `import{configureHttpDispatcher,main}from"./chunks/...";import"./chunks/...";...`) imports, in
 * its order, and the bindings it calls. Fails when the entry no longer looks like that (another Pi
 * version): the pool then reports why it cannot warm a sandbox, and calls start cold.
 */
async function loadPi(piCli, preload) {
  const bundle = path.dirname(piCli);
  const entry = fs.readFileSync(`${bundle}/cli-runtime.js`, "utf8");
  const bindings = {};
  for (const [, names, spec] of entry.matchAll(/import\s*(?:\{([^}]*)\}\s*from\s*)?"(\.\/chunks\/[^"]+\.js)"/g)) {
    const module = await import(`${bundle}/${spec.slice(2)}`);
    for (const name of (names ?? "").split(",")) {
      const [exported, local = exported] = name.split(" as ").map((part) => part.trim());
      if (exported) bindings[local] = module[exported];
    }
  }
  const { main, configureHttpDispatcher, APP_NAME } = bindings;
  if (typeof main !== "function" || typeof configureHttpDispatcher !== "function" || typeof APP_NAME !== "string")
    throw new Error(`Pi's CLI entry ${bundle}/cli-runtime.js is not the one this launcher knows`);
  const prefixes = [...PRELOADED_CHUNKS, ...preload.filter((name) => /^[a-z][a-z0-9-]*$/.test(name))];
  const wanted = (name) => prefixes.some((prefix) => new RegExp(`^${prefix}-[A-Z0-9]+\\.js$`).test(name));
  for (const name of fs.readdirSync(`${bundle}/chunks`).filter(wanted)) {
    const module = await import(`${bundle}/chunks/${name}`);
    // The extension loader requires jiti on its first use: once now, so the final tool's load is quick.
    try {
      module.createJiti?.(import.meta.url);
    } catch {
      // Only a speed-up.
    }
  }
  return {
    /** What the entry does after its imports (setupCli, then main), with the run's argv. */
    start(args) {
      process.title = APP_NAME;
      process.env.PI_CODING_AGENT = "true";
      process.env.AI_AGENT = "pi";
      process.emitWarning = () => {};
      configureHttpDispatcher();
      process.argv = [process.argv[0], piCli, ...args];
      return main(args);
    },
  };
}

/** Writes Pi's models.json (placeholders only) and hands the final tool's definition to its extension. */
function writePiConfig(run) {
  fs.mkdirSync(run.agentDir, { recursive: true, mode: 0o700 });
  fs.writeFileSync(`${run.agentDir}/models.json`, JSON.stringify(run.modelsJson), { mode: 0o600 });
  // The final-tool extension (loaded by Pi in this process) reads its definition from here.
  globalThis.__sandboxRunFinalTool = run.finalTool ?? null;
}

/** A warm sandbox: everything before the claim, then the claimed run. */
async function runWarm(warm) {
  const loadStarted = performance.now();
  const idle = stopAfter(
    warm.idleMs,
    EXIT_IDLE_DEADLINE_PASSED,
    `no call claimed this warm sandbox within ${warm.idleMs / 1000} s; stopping`,
  );
  let claimed;
  const claim = new Promise((resolve) => (claimed = resolve));
  let pi;
  try {
    // First: the controller's bridge exec is on its way. The relay listens on no socket until a claim.
    // The idle deadline ends when a claim is read, not once its trees are in: a claim that came
    // just before it must not be cut off while its workspace is unpacked.
    const relay = await startRelay(warm.relay, {
      onClaimRead: (run) => {
        clearTimeout(idle);
        stopAfter(
          run.deadlineMs,
          EXIT_DEADLINE_PASSED,
          `the run's deadline (${run.deadlineMs / 1000} s) passed; stopping`,
        );
      },
      onClaim: (run) => claimed(run),
    });
    if (process.env.HOME) enableBakedCompileCache(process.env.HOME);
    pi = await loadPi(warm.piCli, warm.preload ?? []);
    relay.announceLoaded(Math.round(performance.now() - loadStarted));
  } catch (error) {
    fail(EXIT_SETUP_FAILED, `could not prepare the warm sandbox: ${error?.message ?? error}`);
  }
  const run = await claim;
  try {
    // The run's environment (its tools inherit it); the variables the sandbox started with stay.
    for (const [name, value] of Object.entries(run.env)) process.env[name] = value;
    writePiConfig(run);
    await Promise.all(run.forwards.map((f) => forward(f.port, f.socketPath)));
    process.chdir(run.cwd);
  } catch (error) {
    fail(EXIT_SETUP_FAILED, `could not prepare the claimed run: ${error?.message ?? error}`);
  }
  // The relay's session holds this process after Pi is done (the controller reads the trees back).
  await pi.start(run.argv);
}

async function runCold() {
  if (config.deadlineMs) {
    stopAfter(
      config.deadlineMs,
      EXIT_DEADLINE_PASSED,
      `the run's deadline (${config.deadlineMs / 1000} s) passed; stopping`,
    );
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
    writePiConfig(config);
  } catch (error) {
    fail(EXIT_SETUP_FAILED, `could not prepare the sandbox: ${error?.message ?? error}`);
  }
  process.argv = [process.argv[0], config.piCli, ...process.argv.slice(2)];
  await import(config.piCli);
}

if (config.warm) await runWarm(config.warm);
else await runCold();
