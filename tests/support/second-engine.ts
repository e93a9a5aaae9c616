// A second Docker engine on this machine that behaves like one on another machine: its own network
// namespace (reached only over TCP with mutual TLS, through a proxy on this host's loopback), its
// own mount namespace with /tmp, /work, /home and /root hidden (so no path of the controller exists
// there and bind mounts cannot work), its own data root, exec root and cgroup parent. Certificates
// are made with openssl when it starts. CI starts one for the whole run (`start`), tests that find
// none start their own; `stop` removes everything it made.
//
//   node --import tsx tests/support/second-engine.ts start|stop
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import { tlsFilesIn } from "../../src/engine/engine-endpoint.js";

export interface SecondEngineState {
  name: string;
  netns: string;
  /** Data root, config, certificates, logs: /var/lib/sandbox-run-test-engine/<name>. */
  dir: string;
  execRoot: string;
  dockerdPid: number;
  /** The proxy on this host's loopback that carries TCP into the namespace. */
  proxyPid: number;
  port: number;
  /** ca.pem, cert.pem, key.pem of the client (DOCKER_CERT_PATH layout). */
  clientCertDir: string;
}

/** Where CI's shared engine writes its state; tests look here first. */
export const SHARED_STATE_FILE = "/run/sandbox-run-test-engine/state.json";
const BASE_DIR = "/var/lib/sandbox-run-test-engine";
const ENGINE_PORT = 2376;
const HIDDEN = ["/tmp", "/work", "/home", "/root"];
const proxyScript = fileURLToPath(new URL("./netns-proxy.mjs", import.meta.url));

/**
 * The environment the engine's processes start with: their own, not the test run's. A test run
 * points TMPDIR at a folder of its own, which does not exist in the engine's mount namespace
 * (/tmp is hidden there); dockerd hands TMPDIR down to runc, which writes every exec's process
 * file there, so every exec failed ("OCI runtime exec failed: open .../runc-process...").
 */
export function daemonEnv(): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    HOME: "/root",
    LANG: "C.UTF-8",
  };
}

/** Whether this machine can run a second engine (root, dockerd, nsenter). */
export function canStartSecondEngine(): boolean {
  if (process.getuid?.() !== 0) return false;
  return ["dockerd", "nsenter", "unshare", "openssl", "ip"].every((cmd) => {
    try {
      execFileSync("sh", ["-c", `command -v ${cmd}`], { stdio: "ignore" });
      return true;
    } catch {
      return false;
    }
  });
}

/** The engine as sandbox-run sees it: tcp:// with mutual TLS, on another machine. */
export function remoteEngine(state: SecondEngineState, port = state.port): DockerEngine {
  return new DockerEngine({
    name: state.name,
    endpoint: { kind: "tcp", host: "127.0.0.1", port, tls: tlsFilesIn(state.clientCertDir) },
    // Loopback here, but the engine is in its own mount namespace: it shares nothing with us.
    sharesHostFilesystem: false,
  });
}

/** An engines-file entry for it. */
export function engineFileEntry(state: SecondEngineState, capacity: number, port = state.port) {
  return {
    name: state.name,
    host: `tcp://127.0.0.1:${port}`,
    tls: state.clientCertDir,
    capacity,
    sharesHostFilesystem: false,
  };
}

export function readSharedState(file = SHARED_STATE_FILE): SecondEngineState | undefined {
  try {
    const state = JSON.parse(fs.readFileSync(file, "utf8")) as SecondEngineState;
    process.kill(state.dockerdPid, 0);
    process.kill(state.proxyPid, 0);
    return state;
  } catch {
    return undefined;
  }
}

export async function startSecondEngine(name = `e2e-${process.pid}`): Promise<SecondEngineState> {
  const dir = path.join(BASE_DIR, name);
  const execRoot = `/run/sandbox-run-test-engine/${name}`;
  const netns = `sandbox-run-${name}`;
  // What a killed run of the same name left (a session ended, a crash): its namespace and exec root.
  try {
    execFileSync("ip", ["netns", "del", netns], { stdio: "ignore" });
  } catch {
    // None left.
  }
  fs.rmSync(execRoot, { recursive: true, force: true });
  fs.mkdirSync(path.join(dir, "data"), { recursive: true });
  fs.mkdirSync(execRoot, { recursive: true });
  const certs = makeCertificates(path.join(dir, "certs"));
  fs.writeFileSync(
    path.join(dir, "daemon.json"),
    JSON.stringify({
      runtimes: {
        runsc: { path: "/usr/bin/runsc", runtimeArgs: ["--network=none", "--host-uds=open", "--oci-seccomp"] },
      },
    }),
  );
  execFileSync("ip", ["netns", "add", netns]);
  execFileSync("ip", ["-n", netns, "link", "set", "lo", "up"]);
  const hide = HIDDEN.filter((d) => fs.existsSync(d))
    .map((d) => `mount -t tmpfs -o size=1m,mode=755 sandbox-run-hidden ${d}`)
    .join(" && ");
  const dockerd = [
    "dockerd",
    `--config-file=${dir}/daemon.json`,
    `--data-root=${dir}/data`,
    `--exec-root=${execRoot}/exec`,
    `--pidfile=${execRoot}/dockerd.pid`,
    `-H=tcp://127.0.0.1:${ENGINE_PORT}`,
    "--tlsverify",
    `--tlscacert=${certs.ca}`,
    `--tlscert=${certs.serverCert}`,
    `--tlskey=${certs.serverKey}`,
    "--bridge=none",
    "--iptables=false",
    "--ip-forward=false",
    "--ip-masq=false",
    `--cgroup-parent=/sandbox-run-${name}`,
  ].join(" ");
  const log = fs.openSync(path.join(dir, "dockerd.log"), "a");
  // nsenter --net, not `ip netns exec` (which remounts /sys and hides cgroup v1 mounts).
  const daemon = spawn(
    "nsenter",
    [
      `--net=/run/netns/${netns}`,
      "unshare",
      "--mount",
      "--propagation",
      "private",
      "sh",
      "-c",
      `${hide} && exec ${dockerd}`,
    ],
    { detached: true, stdio: ["ignore", log, log], env: daemonEnv() },
  );
  daemon.unref();
  fs.closeSync(log);
  const proxy = await startProxy(netns, dir);
  const state: SecondEngineState = {
    name,
    netns,
    dir,
    execRoot,
    dockerdPid: daemon.pid!,
    proxyPid: proxy.pid,
    port: proxy.port,
    clientCertDir: certs.clientDir,
  };
  fs.writeFileSync(path.join(execRoot, "state.json"), JSON.stringify(state, null, 2));
  const engine = remoteEngine(state);
  try {
    await waitFor(
      () => engine.ping().then(() => true),
      60_000,
      () => tail(path.join(dir, "dockerd.log")),
    );
  } catch (error) {
    await stopSecondEngine(state);
    throw error;
  }
  return state;
}

/** Whether a test file should use a second engine: always on CI (missing is a failure there). */
export function secondEngineExpected(): boolean {
  return Boolean(process.env.CI) || readSharedState() !== undefined || canStartSecondEngine();
}

/**
 * For a test file: CI's shared engine when it runs, else one of the file's own (stopped by the
 * returned `release`). Undefined only outside CI on a machine that cannot start one (not root, no
 * dockerd): on CI that is a failure, never a skip.
 */
export async function useSecondEngine(): Promise<{ state: SecondEngineState; release: () => Promise<void> }> {
  const shared = readSharedState();
  if (shared) return { state: shared, release: async () => {} };
  if (!canStartSecondEngine())
    throw new Error("No second engine: .ci/run starts one (node --import tsx tests/support/second-engine.ts start)");
  const state = await startSecondEngine();
  return { state, release: () => stopSecondEngine(state) };
}

/** Another way in (a second proxy), for a test that cuts it mid-run: kill `pid` and it is gone. */
export function openExtraLink(state: SecondEngineState): Promise<{ port: number; pid: number }> {
  return startProxy(state.netns, state.dir);
}

export async function stopSecondEngine(state: SecondEngineState, options: { keepData?: boolean } = {}): Promise<void> {
  killQuietly(state.proxyPid, "SIGKILL");
  killQuietly(state.dockerdPid, "SIGTERM");
  // dockerd stops its containers and its containerd, then exits (and its mount namespace goes).
  await waitFor(
    async () => !alive(state.dockerdPid),
    60_000,
    () => "dockerd did not stop",
  ).catch(() => killQuietly(state.dockerdPid, "SIGKILL"));
  try {
    execFileSync("ip", ["netns", "del", state.netns], { stdio: "ignore" });
  } catch {
    // Already gone.
  }
  fs.rmSync(state.execRoot, { recursive: true, force: true });
  if (!options.keepData) fs.rmSync(state.dir, { recursive: true, force: true });
}

function startProxy(netns: string, dir: string): Promise<{ port: number; pid: number }> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port;
      const log = fs.openSync(path.join(dir, "proxy.log"), "a");
      const child: ChildProcess = spawn(
        "nsenter",
        [`--net=/run/netns/${netns}`, process.execPath, proxyScript, "127.0.0.1", String(ENGINE_PORT)],
        { detached: true, stdio: ["ignore", log, log, "ipc"], env: daemonEnv() },
      );
      fs.closeSync(log);
      child.once("error", reject);
      // The listening socket was made here, in this host's namespace; the child accepts on it
      // and connects from inside the engine's namespace.
      child.send("listen", server, (error) => {
        if (error) return reject(error);
        child.once("message", () => {
          server.close();
          child.disconnect();
          child.unref();
          resolve({ port, pid: child.pid! });
        });
      });
    });
  });
}

function makeCertificates(dir: string) {
  fs.mkdirSync(path.join(dir, "client"), { recursive: true });
  const ssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
  const ext = (name: string, text: string) => {
    fs.writeFileSync(path.join(dir, name), text);
    return name;
  };
  ssl("genrsa", "-out", "ca-key.pem", "2048");
  ssl("req", "-x509", "-new", "-key", "ca-key.pem", "-days", "7", "-subj", "/CN=sandbox-run test CA", "-out", "ca.pem");
  for (const [who, subject, extensions] of [
    ["server", "/CN=localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"],
    ["client", "/CN=sandbox-run-tests", "extendedKeyUsage=clientAuth\n"],
  ] as const) {
    ssl("genrsa", "-out", `${who}-key.pem`, "2048");
    ssl("req", "-new", "-key", `${who}-key.pem`, "-subj", subject, "-out", `${who}.csr`);
    ssl(
      "x509",
      "-req",
      "-in",
      `${who}.csr`,
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca-key.pem",
      "-CAcreateserial",
      "-days",
      "7",
      "-extfile",
      ext(`${who}.ext`, extensions),
      "-out",
      `${who}-cert.pem`,
    );
  }
  fs.copyFileSync(path.join(dir, "ca.pem"), path.join(dir, "client", "ca.pem"));
  fs.copyFileSync(path.join(dir, "client-cert.pem"), path.join(dir, "client", "cert.pem"));
  fs.copyFileSync(path.join(dir, "client-key.pem"), path.join(dir, "client", "key.pem"));
  return {
    ca: path.join(dir, "ca.pem"),
    serverCert: path.join(dir, "server-cert.pem"),
    serverKey: path.join(dir, "server-key.pem"),
    clientDir: path.join(dir, "client"),
  };
}

async function waitFor(check: () => Promise<boolean>, ms: number, explain: () => string): Promise<void> {
  const until = Date.now() + ms;
  let last: unknown;
  while (Date.now() < until) {
    try {
      if (await check()) return;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`second engine: gave up after ${ms / 1000} s (${(last as Error)?.message ?? ""})\n${explain()}`);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}

function tail(file: string): string {
  try {
    return fs.readFileSync(file, "utf8").split("\n").slice(-15).join("\n");
  } catch {
    return "";
  }
}

// The command line CI uses: start one engine for the whole run, stop it at the end.
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const command = process.argv[2];
  if (command === "start") {
    const state = await startSecondEngine("ci");
    fs.mkdirSync(path.dirname(SHARED_STATE_FILE), { recursive: true });
    fs.writeFileSync(SHARED_STATE_FILE, JSON.stringify(state, null, 2));
    console.log(`second engine "${state.name}" answers on tcp://127.0.0.1:${state.port} (mutual TLS)`);
  } else if (command === "stop") {
    const state = readSharedState() ?? JSON.parse(fs.readFileSync(SHARED_STATE_FILE, "utf8"));
    // SANDBOX_RUN_TEST_ENGINE_KEEP=1 keeps the data root (and its loaded images) for the next start.
    await stopSecondEngine(state, { keepData: process.env.SANDBOX_RUN_TEST_ENGINE_KEEP === "1" });
    fs.rmSync(SHARED_STATE_FILE, { force: true });
    console.log(`second engine "${state.name}" stopped and removed`);
  } else {
    console.error("usage: second-engine.ts start|stop");
    process.exit(2);
  }
}
