// The baseline: the same Pi (1.6.0) on the same Node the image carries, started directly on
// the host. Both come from the image build's npm cache (~/.cache/sandbox-run/build/deps-*/,
// which holds node/bin/node and app/node_modules) when it is there; otherwise they are
// installed once, with npm, from images/pi/package.json into a cache folder of our own.
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { IMAGE_DIR, runnerImageSpec } from "../src/image/runner-image.js";
import type { PiEvent } from "../src/pi/pi-events.js";
import type { Outcome } from "../src/pi/result-collector.js";
import { directPiArgs, PI_ENV, TASK_PROMPT } from "./bench-task.js";
import { collectPiOutput } from "./pi-output.js";

export interface HostPi {
  node: string;
  piCli: string;
  /** The repo's final-tool extension, imported by the wrapper. */
  finalToolModule: string;
  /** Where node and Pi came from. */
  source: string;
}

const PI_CLI = "node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js";
const PI_PACKAGE = "node_modules/@earendil-works/pi-coding-agent/package.json";

function cacheRoot(): string {
  return path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "sandbox-run");
}

function matches(node: string, appDir: string, spec: { piVersion: string; nodeVersion: string }): boolean {
  try {
    const pi = JSON.parse(fs.readFileSync(path.join(appDir, PI_PACKAGE), "utf8")) as { version: string };
    if (pi.version !== spec.piVersion) return false;
    // This machine's own architecture: another platform's cached Node would run under qemu here.
    const seen = execFileSync(node, ["-p", "process.version + ' ' + process.arch"], { encoding: "utf8" }).trim();
    return seen === `v${spec.nodeVersion} ${process.arch}`;
  } catch {
    return false;
  }
}

export async function findHostPi(log: (line: string) => void): Promise<HostPi> {
  const spec = runnerImageSpec();
  const finalToolModule = path.join(IMAGE_DIR, "final-tool.mjs");
  // 1. The image build's finished npm installs, checked for the image's Pi and Node versions.
  const buildDir = path.join(cacheRoot(), "build");
  const staged = fs.existsSync(buildDir) ? fs.readdirSync(buildDir).sort() : [];
  for (const name of staged) {
    const dir = path.join(buildDir, name);
    const node = path.join(dir, "node", "bin", "node");
    if (fs.existsSync(path.join(dir, ".ready")) && matches(node, path.join(dir, "app"), spec)) {
      return { node, piCli: path.join(dir, "app", PI_CLI), finalToolModule, source: dir };
    }
  }
  // 2. Our own install, from the same package.json and lock file the image uses.
  const dir = path.join(cacheRoot(), "bench-host", `pi-${spec.piVersion}-node-${spec.nodeVersion}`);
  const node = path.join(dir, "node_modules", spec.nodePackage, "bin", "node");
  if (!matches(node, dir, spec)) {
    log(`Installing Pi ${spec.piVersion} and Node ${spec.nodeVersion} into ${dir} (once) ...`);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    for (const file of ["package.json", "package-lock.json"])
      fs.copyFileSync(path.join(IMAGE_DIR, file), path.join(dir, file));
    execFileSync("npm", ["ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund"], {
      cwd: dir,
      stdio: "ignore",
    });
    if (!matches(node, dir, spec))
      throw new Error(`npm ci in ${dir} did not produce Pi ${spec.piVersion} on Node ${spec.nodeVersion}`);
  }
  return { node, piCli: path.join(dir, PI_CLI), finalToolModule, source: dir };
}

export interface DirectRunOptions {
  cwd: string;
  agentDir: string;
  extension: string;
  model: string;
  onEvent?: (event: PiEvent) => void;
}

export interface DirectRun {
  ms: number;
  exitCode: number | null;
  outcome: Outcome;
}

/** One Pi run on the host: spawn, prompt on stdin, JSONL on stdout, until the process is gone. */
export async function runPiOnHost(pi: HostPi, options: DirectRunOptions): Promise<DirectRun> {
  const started = performance.now();
  const child = spawn(pi.node, [pi.piCli, ...directPiArgs(options.model, options.extension)], {
    cwd: options.cwd,
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: os.homedir(),
      ...PI_ENV,
      PI_CODING_AGENT_DIR: options.agentDir,
    },
    stdio: ["pipe", "pipe", "ignore"],
  });
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => resolve(code));
  });
  child.stdin.end(TASK_PROMPT);
  const outcome = await collectPiOutput(child.stdout, options.onEvent);
  const exitCode = await exited;
  return { ms: performance.now() - started, exitCode, outcome };
}
