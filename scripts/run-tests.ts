// `npm test`: the whole suite from a machine where `./scripts/quickstart.sh` has run, with nothing
// started by hand. It builds, starts the services the engine tests need and no one has started (a
// second dockerd reached over mutual TLS, Podman's rootful and rootless services), runs the vitest
// projects, stops what it started, and ends with one line per part that could not run here and
// the command that would run it. On CI (CI=true) a part that cannot run is a failure, never a skip.
//
//   npm test                      everything
//   npm test -- --only=unit,modes  some of the steps (names below)
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { stripVTControlCharacters } from "node:util";
import { CHROMIUM } from "../tests/support/browser.js";
import { podmanInstalled, startRootfulService, startRootlessService } from "../tests/support/podman-service.js";
import {
  canStartSecondEngine,
  readSharedState,
  SHARED_STATE_FILE,
  startSecondEngine,
  stopSecondEngine,
} from "../tests/support/second-engine.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const LIFECYCLE = "tests/integration/security-lifecycle.test.ts";
// Kills controllers and counts what the engine holds, like the lifecycle suite: on its own too.
const WARM_LIFECYCLE = "tests/integration/warm-lifecycle.test.ts";

interface Step {
  name: string;
  /** vitest arguments after `run`. */
  args: string[];
  /** The services it needs beyond the local engine (and the browser the page tests drive). */
  needs?: Array<"second-engine" | "podman" | "browser">;
}

// Files run four at a time (vitest.config.ts). The security suites' second, third and fourth runs
// (copy mode, warm calls, a remote engine) go in one step; the lifecycle suites, which kill
// controllers and wait out deadlines and judge only their own runs (by run id and owner pid), go
// together in another, apart from the other steps' runs, whose load would stretch their timings
// (a frozen controller's run must reach the model before its 10 s timer) and whose start-up
// reaping would race their launchers' own exits. The summary says how busy the cores were: in a
// fresh clone the integration and modes steps 99-100 % (their time is their CPU, mostly
// containers and Pi), the lifecycle step ~60 % (its frozen and killed controllers wait).
const MODES = ["integration-copy", "integration-warm", "integration-remote"].flatMap((p) => ["--project", p]);
const STEPS: Step[] = [
  // Unit files are CPU-bound: two at a time on two cores, and the files of a worker share its
  // process (--no-isolate: a fresh process per file, starting Node and loading the modules again
  // 116 times, cost the step about a third of its time; vitest reads this from the command line,
  // not from a project's config). With --no-isolate, more than two workers end here with tinypool's
  // "Terminating worker thread" rejection (exit 1) even for three trivial files: keep two. A test
  // that needs a fresh module cache makes its own process.
  { name: "unit", args: ["--project", "unit", "--maxWorkers=2", "--no-isolate"] },
  {
    name: "integration",
    args: ["--project", "integration", "--exclude", LIFECYCLE, "--exclude", WARM_LIFECYCLE],
    needs: ["second-engine", "podman", "browser"],
  },
  { name: "modes", args: [...MODES, "--exclude", LIFECYCLE], needs: ["second-engine"] },
  {
    name: "lifecycle",
    args: ["--project", "integration", ...MODES, LIFECYCLE, WARM_LIFECYCLE],
    needs: ["second-engine"],
  },
  // The linux/arm64 image under qemu (its set-up builds the image when missing: minutes, once).
  { name: "arm64", args: ["--project", "integration-arm64"] },
];

interface Outcome {
  step: string;
  status: number;
  passed: number;
  failed: number;
  skipped: number;
  seconds: number;
  /** How busy the machine's cores were during the step (all processes: containers, engines, vitest). */
  cpuShare?: number;
  failures: string[];
}

/** The machine's busy and total jiffies from /proc/stat (undefined where there is none). */
function machineJiffies(): { busy: number; total: number } | undefined {
  try {
    const fields = fs.readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
    const total = fields.reduce((a, b) => a + b, 0);
    // idle and iowait are not work.
    return { busy: total - (fields[3] ?? 0) - (fields[4] ?? 0), total };
  } catch {
    return undefined;
  }
}

const ci = Boolean(process.env.CI);
const notes: string[] = [];
const stops: Array<() => Promise<void> | void> = [];

function run(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ status: number; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    // Both are passed through as they come and kept (the end of each): vitest writes its counts to
    // stdout and the failed tests to stderr.
    const kept = { out: "", err: "" };
    const keep = (stream: "out" | "err", to: NodeJS.WriteStream) => (chunk: Buffer) => {
      to.write(chunk);
      kept[stream] += chunk.toString();
      if (kept[stream].length > 4 * 1024 * 1024) kept[stream] = kept[stream].slice(-1024 * 1024);
    };
    child.stdout.on("data", keep("out", process.stdout));
    child.stderr.on("data", keep("err", process.stderr));
    child.on("close", (code, signal) => resolve({ status: code ?? (signal ? 128 : 1), ...kept }));
  });
}

/**
 * The failed tests' lines of vitest's report ("FAIL  |project| file > suite > test"), each with the
 * first lines of its error, so the summary (the end of a CI log) names them and says why.
 */
function failedTests(out: string): string[] {
  const lines = stripVTControlCharacters(out).split("\n");
  const failures = new Map<string, string>();
  lines.forEach((line, i) => {
    if (!/^\s*FAIL\s/.test(line) || failures.has(line.trim())) return;
    const why: string[] = [];
    for (const next of lines.slice(i + 1, i + 40)) {
      if (/^\s*(FAIL\s|⎯)/.test(next) || /^\s*❯/.test(next) || why.length === 3) break;
      if (next.trim()) why.push(`      ${next.trim().slice(0, 240)}`);
    }
    failures.set(line.trim(), [line.trim(), ...why].join("\n"));
  });
  return [...failures.values()].slice(0, 20);
}

/** Adds up vitest's "Tests  3 passed | 1 failed | 2 skipped (6)" lines. */
function countTests(out: string): { passed: number; failed: number; skipped: number } {
  const plain = stripVTControlCharacters(out);
  const counts = { passed: 0, failed: 0, skipped: 0 };
  for (const line of plain.split("\n")) {
    if (!/^\s+Tests\s+/.test(line)) continue;
    for (const [, n, what] of line.matchAll(/(\d+) (passed|failed|skipped)/g))
      counts[what as keyof typeof counts] += Number(n);
  }
  return counts;
}

/** Starts the services no one has started (stopped again at the end); says in `notes` what cannot run here. */
async function startServices(needed: Set<string>): Promise<void> {
  if (needed.has("second-engine")) {
    if (readSharedState()) {
      // Started by someone else (scripts/test-engines.sh start): used, and left running.
    } else if (canStartSecondEngine()) {
      console.error("npm test: starting a second Docker engine (mutual TLS, its own namespaces) ...");
      const state = await startSecondEngine("ci");
      fs.mkdirSync(path.dirname(SHARED_STATE_FILE), { recursive: true });
      fs.writeFileSync(SHARED_STATE_FILE, JSON.stringify(state, null, 2));
      stops.push(async () => {
        await stopSecondEngine(state);
        fs.rmSync(SHARED_STATE_FILE, { force: true });
      });
    } else {
      notes.push(
        "remote-engine tests did not run: a second dockerd needs root, dockerd, nsenter, unshare, openssl and ip (run: sudo npm test)",
      );
    }
  }
  if (needed.has("podman")) {
    if (podmanInstalled()) {
      console.error("npm test: starting Podman's services (rootful and rootless) ...");
      stops.push(await startRootfulService());
      stops.push(await startRootlessService());
    } else {
      notes.push(
        process.getuid?.() === 0
          ? "Podman tests did not run: podman is not installed (run: scripts/setup-host.sh, then npm test)"
          : "Podman tests did not run: they need root (run: sudo npm test)",
      );
    }
  }
}

/** The page tests (`sandbox-run show` in a real browser) skip themselves without Chromium; say so here. */
function checkBrowser(needed: Set<string>): void {
  if (needed.has("browser") && !fs.existsSync(CHROMIUM)) {
    notes.push(
      `page tests (sandbox-run show in Chromium) did not run: no ${CHROMIUM} (run: scripts/setup-host.sh as root, then npm test)`,
    );
  }
}

/**
 * As root, the first folder on the way to `dir` that other users cannot enter (no o+x), if any:
 * the tests that run as an unprivileged caller execute code from the checkout as those users.
 */
function closedToOthers(dir: string): { dir: string; mode: string } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const parts = fs.realpathSync(dir).split(path.sep).filter(Boolean);
  for (let i = 0; i <= parts.length; i++) {
    const at = `${path.sep}${parts.slice(0, i).join(path.sep)}`;
    const mode = fs.statSync(at).mode & 0o777;
    if ((mode & 0o001) === 0) return { dir: at, mode: `0${mode.toString(8)}` };
  }
  return undefined;
}

async function main(): Promise<number> {
  const only = process.argv
    .find((a) => a.startsWith("--only="))
    ?.slice("--only=".length)
    .split(",");
  const steps = only ? STEPS.filter((s) => only.includes(s.name)) : STEPS;
  if (only && steps.length !== only.length) {
    console.error(`npm test: unknown step in --only (steps: ${STEPS.map((s) => s.name).join(", ")})`);
    return 2;
  }
  const closed = closedToOthers(ROOT);
  if (closed) {
    console.error(
      `npm test: other users cannot enter ${closed.dir} (mode ${closed.mode}), and as root the suite runs parts of itself as other users (an unprivileged caller, uid 1500 and more) that must reach this checkout at ${path.resolve(ROOT)}. Clone it under a folder others can enter, or run \`chmod o+x ${closed.dir}\`; then run npm test again.`,
    );
    return 2;
  }
  const started = Date.now();
  const build = await run("npm", ["run", "build", "--silent"]);
  if (build.status !== 0) return build.status;

  const needed = new Set(steps.flatMap((s) => s.needs ?? []));
  await startServices(needed);
  checkBrowser(needed);
  if (ci && notes.length > 0) {
    for (const note of notes) console.error(`npm test: ${note}`);
    console.error("npm test: CI runs every part; set the machine up with scripts/setup-host.sh as root");
    return 1;
  }
  const outcomes: Outcome[] = [];
  for (const step of steps) {
    const t0 = Date.now();
    const cpu0 = machineJiffies();
    console.error(`\nnpm test: ${step.name} (vitest run ${step.args.join(" ")})`);
    const { status, out, err } = await run(process.execPath, [
      path.join(ROOT, "node_modules/vitest/vitest.mjs"),
      "run",
      ...step.args,
    ]);
    const cpu1 = machineJiffies();
    outcomes.push({
      step: step.name,
      status,
      ...(cpu0 && cpu1 && cpu1.total > cpu0.total
        ? { cpuShare: (cpu1.busy - cpu0.busy) / (cpu1.total - cpu0.total) }
        : {}),
      ...countTests(out),
      failures: failedTests(`${out}\n${err}`),
      seconds: Math.round((Date.now() - t0) / 1000),
    });
  }
  await stopServices();

  const total = { passed: 0, failed: 0, skipped: 0 };
  console.error("\nnpm test: summary");
  for (const o of outcomes) {
    for (const k of ["passed", "failed", "skipped"] as const) total[k] += o[k];
    console.error(
      `  ${o.step.padEnd(17)} ${o.status === 0 ? "ok  " : "FAIL"} ${o.passed} passed, ${o.failed} failed, ${o.skipped} skipped (${o.seconds} s${o.cpuShare === undefined ? "" : `, cores ${Math.round(o.cpuShare * 100)}% busy`})`,
    );
  }
  for (const o of outcomes) for (const failure of o.failures) console.error(`  ${failure}`);
  for (const note of notes) console.error(`npm test: ${note}`);
  const failedSteps = outcomes.filter((o) => o.status !== 0).map((o) => o.step);
  console.log(
    `npm test: ${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped in ${Math.round((Date.now() - started) / 1000)} s${failedSteps.length ? ` (failed: ${failedSteps.join(", ")})` : ""}`,
  );
  return failedSteps.length > 0 ? 1 : 0;
}

/** Stops what this run started, last first; each once. */
async function stopServices(): Promise<void> {
  for (let stop = stops.pop(); stop; stop = stops.pop()) await Promise.resolve(stop()).catch(() => {});
}

for (const [signal, code] of [
  ["SIGINT", 130],
  ["SIGTERM", 143],
] as const) {
  process.on(signal, () => void stopServices().finally(() => process.exit(code)));
}
let code = 1;
try {
  code = await main();
} finally {
  await stopServices();
}
process.exit(code);
