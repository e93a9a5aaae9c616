// `npm test`: the whole suite from a machine where `./scripts/quickstart.sh` has run, with nothing
// started by hand. It builds, starts the services the engine tests need and no one has started (a
// second dockerd reached over mutual TLS, Podman's rootful and rootless services), runs the vitest
// projects, stops what it started, and ends with one line per part that could not run here and
// the command that would run it. On CI (CI=true) a part that cannot run is a failure, never a skip.
//
// The local Docker engine is pinged first: where it does not answer, the steps that need it do not
// run, and the run fails with one line at the end naming the engine and the command that starts it
// (issue 18: never "ok" with every engine test skipped). A step that ran no test at all fails too.
//
//   npm test                                         everything
//   npm test -- --only=unit,modes                    some of the steps (names below)
//   npm test -- tests/unit/cli-program.test.ts       one file (its folder picks its step)
//   npm test -- --only=integration -t "hand-back"    tests by name, in the steps named
// Anything else (--watch, --project ...) is refused with the vitest command that does it.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { stripVTControlCharacters } from "node:util";
import { DockerEngine } from "../src/engine/docker-engine.js";
import { checkPlatformSupport } from "../src/engine/platform-support.js";
import type { SandboxRunError } from "../src/errors.js";
import { CHROMIUM } from "../tests/support/browser.js";
import { podmanInstalled, startRootfulService, startRootlessService } from "../tests/support/podman-service.js";
import {
  canStartSecondEngine,
  readSharedState,
  SHARED_STATE_FILE,
  startSecondEngine,
  stopSecondEngine,
} from "../tests/support/second-engine.js";
import { countTests, stepProblem } from "./step-verdict.js";
import { parseRequest, plan, type Request, ROOT, type Step, USAGE } from "./test-steps.js";

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
/**
 * The file a step's global set-up (tests/support/global-setup.ts, which names it too) appends a
 * line to for each project whose engine tests it skips: the step then fails, never "ok".
 */
const SKIPS_ENV = "SANDBOX_RUN_TEST_SKIPS";
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

type Planned = { step: Step; args: string[] };
const needs = (p: Planned, what: NonNullable<Step["needs"]>[number]) => p.step.needs?.includes(what) ?? false;

/**
 * The planned steps that cannot run here, and why: all that need the engine when it does not
 * answer (a line that fails the run, naming the engine and what would start it), the arm64 step
 * when the engine cannot run linux/arm64 (a note, like Podman's: an emulator is optional).
 */
async function whatCannotRun(planned: Planned[]): Promise<{ notRun: Map<string, string>; failNotes: string[] }> {
  const notRun = new Map<string, string>();
  const failNotes: string[] = [];
  if (!planned.some((p) => needs(p, "engine"))) return { notRun, failNotes };
  let engine: DockerEngine | undefined;
  try {
    engine = new DockerEngine();
    await engine.ping();
  } catch (error) {
    const names = planned.filter((p) => needs(p, "engine")).map((p) => p.step.name);
    for (const name of names) notRun.set(name, "no Docker engine");
    failNotes.push(`the engine tests did not run (${names.join(", ")}): ${engineFix(error)}`);
    return { notRun, failNotes };
  }
  if (planned.some((p) => needs(p, "arm64"))) {
    try {
      checkPlatformSupport("linux/arm64", await engine.info(), { engineName: engine.name });
    } catch (error) {
      notRun.set("arm64", "the engine cannot run linux/arm64");
      notes.push(
        `arm64 tests did not run: ${errorText(error).what} (run: sudo scripts/setup-emulation.sh, then npm test)`,
      );
    }
  }
  return { notRun, failNotes };
}

function errorText(error: unknown): { what: string; hint?: string } {
  const { shortMessage, message, hint } = error as Partial<SandboxRunError> & Error;
  return { what: shortMessage ?? message ?? String(error), ...(hint ? { hint } : {}) };
}

/** Why the engine does not answer, and what would start it (or let this user use it). */
function engineFix(error: unknown): string {
  const { what, hint } = errorText(error);
  // The engine runs but this user may not use its socket: quickstart.sh would not change that.
  const fix =
    /\(EACCES\)/.test(what) && hint
      ? hint.replace(/\.$/, "")
      : "Start it: ./scripts/quickstart.sh (the README's first command) installs and starts one (as root; it says what it needs otherwise), or point DOCKER_HOST at a running engine";
  return `${what} ${fix}; then run npm test again (npm test -- --only=unit runs the tests that need no engine).`;
}

/** What global-setup.ts reported skipping in a step (SKIPS_ENV): the reasons, one per project. */
function readSkips(file: string): string[] {
  let text = "";
  try {
    text = fs.readFileSync(file, "utf8");
  } catch {
    return [];
  }
  fs.rmSync(file, { force: true });
  const reasons = text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => {
      const { project, reason } = JSON.parse(l) as { project: string; reason: string };
      return `${project}: ${reason.replace(/\.$/, "")}`;
    });
  return [...new Set(reasons)];
}

/**
 * Runs one step's vitest; its outcome, and the line that fails the run when the step "passed"
 * without running what it should (step-verdict.ts).
 */
async function runStep(
  { step, args }: Planned,
  filtered: boolean,
  skipsFile: string,
): Promise<{ outcome: Outcome; problem?: string }> {
  const t0 = Date.now();
  const cpu0 = machineJiffies();
  console.error(`\nnpm test: ${step.name} (vitest run ${args.join(" ")})`);
  const { status, out, err } = await run(
    process.execPath,
    [path.join(ROOT, "node_modules/vitest/vitest.mjs"), "run", ...args],
    { ...process.env, [SKIPS_ENV]: skipsFile },
  );
  const cpu1 = machineJiffies();
  const counts = countTests(out);
  const problem = stepProblem({ step: step.name, status, out, setupSkips: readSkips(skipsFile), filtered, ci });
  const outcome: Outcome = {
    step: step.name,
    status: status !== 0 ? status : problem ? 1 : 0,
    ...(cpu0 && cpu1 && cpu1.total > cpu0.total
      ? { cpuShare: (cpu1.busy - cpu0.busy) / (cpu1.total - cpu0.total) }
      : {}),
    ...counts,
    failures: failedTests(`${out}\n${err}`),
    seconds: Math.round((Date.now() - t0) / 1000),
  };
  return problem ? { outcome, problem } : { outcome };
}

/**
 * The summary: a line per step (run or not), the failed tests, the counts, then the parts that
 * could not run here, each with what would run it, the ones that fail the run last. The exit code.
 */
function report(
  planned: Planned[],
  outcomes: Outcome[],
  notRun: Map<string, string>,
  failNotes: string[],
  seconds: number,
): number {
  const total = { passed: 0, failed: 0, skipped: 0 };
  console.error("\nnpm test: summary");
  for (const { step } of planned) {
    const o = outcomes.find((x) => x.step === step.name);
    if (!o) {
      console.error(`  ${step.name.padEnd(17)} not run (${notRun.get(step.name) ?? "stopped"})`);
      continue;
    }
    for (const k of ["passed", "failed", "skipped"] as const) total[k] += o[k];
    console.error(
      `  ${o.step.padEnd(17)} ${o.status === 0 ? "ok  " : "FAIL"} ${o.passed} passed, ${o.failed} failed, ${o.skipped} skipped (${o.seconds} s${o.cpuShare === undefined ? "" : `, cores ${Math.round(o.cpuShare * 100)}% busy`})`,
    );
  }
  for (const o of outcomes) for (const failure of o.failures) console.error(`  ${failure}`);
  const failedSteps = outcomes.filter((o) => o.status !== 0).map((o) => o.step);
  const skippedSteps = [...notRun.keys()];
  console.log(
    `npm test: ${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped in ${seconds} s${failedSteps.length ? ` (failed: ${failedSteps.join(", ")})` : ""}${skippedSteps.length ? ` (not run: ${skippedSteps.join(", ")})` : ""}`,
  );
  for (const note of notes) console.error(`npm test: ${note}`);
  for (const note of failNotes) console.error(`npm test: FAILED: ${note}`);
  return failedSteps.length > 0 || failNotes.length > 0 ? 1 : 0;
}

/** The steps `npm test -- ...` asks for, or the exit code when it only prints (usage, a refusal). */
function requested(): { request: Request; planned: Planned[] } | number {
  const request = parseRequest(process.argv.slice(2), process.env.INIT_CWD ?? process.cwd());
  if ("error" in request) {
    console.error(request.error);
    return 2;
  }
  if (request.help) {
    console.log(USAGE);
    return 0;
  }
  const planned = plan(request);
  if ("error" in planned) {
    console.error(planned.error);
    return 2;
  }
  return { request, planned };
}

async function main(): Promise<number> {
  const asked = requested();
  if (typeof asked === "number") return asked;
  const { request, planned } = asked;
  const filtered = request.filters.length > 0 || request.names.length > 0;
  const closed = closedToOthers(ROOT);
  if (closed) {
    console.error(
      `npm test: other users cannot enter ${closed.dir} (mode ${closed.mode}), and as root the suite runs parts of itself as other users (an unprivileged caller, uid 1500 and more) that must reach this checkout at ${path.resolve(ROOT)}. Clone it under a folder others can enter, or run \`chmod o+x ${closed.dir}\`; then run npm test again.`,
    );
    return 2;
  }
  const started = Date.now();
  // Before anything is built or started: a missing engine ends the run at once on CI.
  const { notRun, failNotes } = await whatCannotRun(planned);
  if (ci && failNotes.length > 0) {
    for (const note of failNotes) console.error(`npm test: ${note}`);
    console.error("npm test: CI runs every part; set the machine up with scripts/setup-host.sh as root");
    return 1;
  }
  const runnable = planned.filter((p) => !notRun.has(p.step.name));
  const needed = new Set(runnable.flatMap((p) => p.step.needs ?? []));
  if (runnable.length > 0) {
    const build = await run("npm", ["run", "build", "--silent"]);
    if (build.status !== 0) return build.status;
    await startServices(needed);
    checkBrowser(needed);
  }
  if (ci && notes.length > 0) {
    for (const note of notes) console.error(`npm test: ${note}`);
    console.error("npm test: CI runs every part; set the machine up with scripts/setup-host.sh as root");
    return 1;
  }
  // global-setup.ts writes here what it skipped (Docker unreachable from the step's own process).
  const skipsFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "npm-test-")), "skips.jsonl");
  stops.push(() => fs.rmSync(path.dirname(skipsFile), { recursive: true, force: true }));
  const outcomes: Outcome[] = [];
  for (const next of runnable) {
    const { outcome, problem } = await runStep(next, filtered, skipsFile);
    outcomes.push(outcome);
    if (problem) failNotes.push(problem);
  }
  await stopServices();
  if (filtered && outcomes.length > 0 && outcomes.every((o) => o.passed + o.failed === 0))
    failNotes.push(
      `no test matched ${[...request.filters, ...request.names.map((n) => `-t ${JSON.stringify(n)}`)].join(" ")} in the steps run (${runnable.map((p) => p.step.name).join(", ") || "none"})`,
    );
  return report(planned, outcomes, notRun, failNotes, Math.round((Date.now() - started) / 1000));
}

/** Stops what this run started, last first; each once. */
async function stopServices(): Promise<void> {
  for (let stop = stops.pop(); stop; stop = stops.pop()) await Promise.resolve(stop()).catch(() => {});
}

// Run as `npm test`; imported (tests/unit/run-tests-arguments.test.ts), it only defines.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
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
}
