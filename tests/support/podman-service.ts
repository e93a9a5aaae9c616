// Podman's Docker-compatible service for the tests: rootful (as root) and rootless (as an
// unprivileged user made for it), each on its own socket. CI starts both for the whole run
// (`start`); a test file that finds none starts its own rootful one.
//
//   node --import tsx tests/support/podman-service.ts start|stop
//
// The service runs with `--runtime runc` (crun 1.8 cannot run containers on this machine's hybrid
// cgroup v1 layout) and a containers.conf whose default ulimits are this host's own hard limits
// (Podman's defaults, 1048576, need CAP_SYS_RESOURCE, which a CI runner in a container lacks).
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { daemonEnv } from "./second-engine.js";

export const ROOTFUL_SOCKET = "/run/sandbox-run-test-podman/podman.sock";
export const ROOTLESS_USER = "sandbox-run-podman";
const STATE_DIR = "/run/sandbox-run-test-podman";

export function podmanInstalled(): boolean {
  return process.getuid?.() === 0 && fs.existsSync("/usr/bin/podman");
}

/** Whether the service on this socket answers. */
export function serviceAnswers(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(socketPath);
    socket.once("connect", () => socket.end("GET /_ping HTTP/1.0\r\n\r\n"));
    socket.once("data", (d) => resolve(d.toString().includes(" 200 ")));
    socket.once("error", () => resolve(false));
  });
}

export function rootlessSocket(): string | undefined {
  try {
    const uid = execFileSync("id", ["-u", ROOTLESS_USER]).toString().trim();
    return `/run/user/${uid}/podman.sock`;
  } catch {
    return undefined;
  }
}

/** This process's hard limit of a resource, from /proc/self/limits ("Max open files" ...). */
function hardLimit(name: string): number {
  const line = fs
    .readFileSync("/proc/self/limits", "utf8")
    .split("\n")
    .find((l) => l.startsWith(name));
  const hard = line?.slice(26).trim().split(/\s+/)[1];
  return hard && /^\d+$/.test(hard) ? Number(hard) : 1048576;
}

function containersConf(): string {
  const nofile = hardLimit("Max open files");
  // Podman's own process lowers its nproc to 32768 where it cannot raise it; stay at or below.
  const nproc = Math.min(hardLimit("Max processes"), 32768);
  return `[containers]\ndefault_ulimits = ["nofile=${nofile}:${nofile}", "nproc=${nproc}:${nproc}"]\n`;
}

/** The rootful service on ROOTFUL_SOCKET; returns a stop function (a no-op when it already ran). */
export async function startRootfulService(): Promise<() => void> {
  if (await serviceAnswers(ROOTFUL_SOCKET)) return () => {};
  fs.mkdirSync(STATE_DIR, { recursive: true });
  const conf = path.join(STATE_DIR, "containers.conf");
  fs.writeFileSync(conf, containersConf());
  const log = fs.openSync(path.join(STATE_DIR, "service.log"), "a");
  const service = spawn("podman", ["--runtime", "runc", "system", "service", "--time=0", `unix://${ROOTFUL_SOCKET}`], {
    detached: true,
    stdio: ["ignore", log, log],
    // Its own environment, not the test run's (whose TMPDIR goes away with it): see daemonEnv.
    env: { ...daemonEnv(), CONTAINERS_CONF: conf },
    // Its own folder as working directory: conmon writes an `oom` file where it runs.
    cwd: STATE_DIR,
  });
  service.unref();
  fs.writeFileSync(path.join(STATE_DIR, "service.pid"), String(service.pid));
  await waitUntil(() => serviceAnswers(ROOTFUL_SOCKET), "the rootful Podman service");
  return () => stopPid(path.join(STATE_DIR, "service.pid"));
}

/** The rootless service of ROOTLESS_USER (created with subordinate ids when missing). */
export async function startRootlessService(): Promise<() => void> {
  try {
    execFileSync("id", [ROOTLESS_USER], { stdio: "ignore" });
  } catch {
    // useradd gives it a subordinate uid/gid range in /etc/subuid and /etc/subgid.
    execFileSync("useradd", ["--create-home", "--shell", "/bin/sh", ROOTLESS_USER]);
  }
  const socket = rootlessSocket()!;
  if (await serviceAnswers(socket)) return () => {};
  const uid = Number(execFileSync("id", ["-u", ROOTLESS_USER]).toString().trim());
  const runtimeDir = path.dirname(socket);
  fs.mkdirSync(runtimeDir, { recursive: true, mode: 0o700 });
  fs.chownSync(runtimeDir, uid, uid);
  const home = `/home/${ROOTLESS_USER}`;
  const configDir = path.join(home, ".config", "containers");
  fs.mkdirSync(configDir, { recursive: true });
  // Native overlay (kernel >= 5.13): /dev/fuse is root's only here, so no fuse-overlayfs.
  fs.writeFileSync(path.join(configDir, "storage.conf"), '[storage]\ndriver = "overlay"\n');
  fs.writeFileSync(path.join(configDir, "containers.conf"), containersConf());
  execFileSync("chown", ["-R", `${uid}:${uid}`, path.join(home, ".config")]);
  fs.mkdirSync(STATE_DIR, { recursive: true });
  const log = fs.openSync(path.join(STATE_DIR, "rootless-service.log"), "a");
  // setpriv and env exec in place: the pid recorded is the service's own.
  const service = spawn(
    "setpriv",
    [
      `--reuid=${uid}`,
      `--regid=${uid}`,
      "--init-groups",
      "--reset-env",
      "env",
      `XDG_RUNTIME_DIR=${runtimeDir}`,
      "podman",
      "--runtime",
      "runc",
      "system",
      "service",
      "--time=0",
      `unix://${socket}`,
    ],
    { detached: true, stdio: ["ignore", log, log], cwd: home },
  );
  service.unref();
  fs.writeFileSync(path.join(STATE_DIR, "rootless-service.pid"), String(service.pid));
  await waitUntil(() => serviceAnswers(socket), "the rootless Podman service");
  return stopRootless;
}

/** The rootless service, and the pause process Podman keeps its user namespace in. */
function stopRootless(): void {
  stopPid(path.join(STATE_DIR, "rootless-service.pid"));
  const socket = rootlessSocket();
  if (socket) stopPid(path.join(path.dirname(socket), "libpod", "tmp", "pause.pid"), { keep: true, group: false });
}

/** Stops the process a pid file names, with its process group (rootless Podman re-executes itself). */
function stopPid(file: string, options: { keep?: boolean; group?: boolean } = {}): void {
  try {
    const pid = Number(fs.readFileSync(file, "utf8"));
    process.kill(options.group === false ? pid : -pid, "SIGTERM");
  } catch {
    // Already gone.
  }
  if (!options.keep) fs.rmSync(file, { force: true });
}

async function waitUntil(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 120; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${what} did not answer within 30 s (see ${STATE_DIR}/*.log)`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  if (process.argv[2] === "start") {
    await startRootfulService();
    await startRootlessService();
    console.log(`podman services answer on ${ROOTFUL_SOCKET} (rootful) and ${rootlessSocket()} (rootless)`);
  } else if (process.argv[2] === "stop") {
    stopPid(path.join(STATE_DIR, "service.pid"));
    stopRootless();
    console.log("podman services stopped");
  } else {
    console.error("usage: podman-service.ts start|stop");
    process.exit(2);
  }
}
