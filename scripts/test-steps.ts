// The steps of `npm test` (scripts/run-tests.ts) and what its arguments ask of them: which steps,
// and the vitest arguments each runs with. No process is started here; run-tests.ts runs the plan.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));
const LIFECYCLE = "tests/integration/security-lifecycle.test.ts";
// Kills controllers and counts what the engine holds, like the lifecycle suite: on its own too.
const WARM_LIFECYCLE = "tests/integration/warm-lifecycle.test.ts";

export interface Step {
  name: string;
  /** vitest arguments after `run` (projects, workers, excludes). */
  args: string[];
  /** The test files it runs, where it names them (vitest filters); else its projects' files. */
  files?: string[];
  /**
   * What it needs beyond Node: the local engine, and the services the engine tests need (started
   * when no one has), the browser the page tests drive, an emulator for linux/arm64.
   */
  needs?: Array<"engine" | "second-engine" | "podman" | "browser" | "arm64">;
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
// The engine steps' files share their worker's process too (--no-isolate): each file loaded the
// library's modules again in a fresh process, ~1.2 CPU-s a file (measured over the modes step:
// 215 -> 188 CPU-s of the test processes for 22 files). Every file starts its own servers and agents
// and closes them in its hooks; no file changes a module's state for the next. minWorkers =
// maxWorkers: with fewer, tinypool ends a --no-isolate run with "Terminating worker thread".
const SHARED_WORKERS = ["--no-isolate", "--minWorkers=4"];
export const STEPS: Step[] = [
  // Unit files are CPU-bound: two at a time on two cores, and the files of a worker share its
  // process (--no-isolate: a fresh process per file, starting Node and loading the modules again
  // 116 times, cost the step about a third of its time; vitest reads this from the command line,
  // not from a project's config). With --no-isolate, more than two workers end here with tinypool's
  // "Terminating worker thread" rejection (exit 1) even for three trivial files: keep two. A test
  // that needs a fresh module cache makes its own process.
  { name: "unit", args: ["--project", "unit", "--maxWorkers=2", "--no-isolate"] },
  {
    name: "integration",
    args: ["--project", "integration", "--exclude", LIFECYCLE, "--exclude", WARM_LIFECYCLE, ...SHARED_WORKERS],
    needs: ["engine", "second-engine", "podman", "browser"],
  },
  {
    name: "modes",
    args: [...MODES, "--exclude", LIFECYCLE, ...SHARED_WORKERS],
    needs: ["engine", "second-engine"],
  },
  {
    name: "lifecycle",
    args: ["--project", "integration", ...MODES],
    files: [LIFECYCLE, WARM_LIFECYCLE],
    needs: ["engine", "second-engine"],
  },
  // The linux/arm64 image under qemu (its set-up builds the image when missing: minutes, once).
  { name: "arm64", args: ["--project", "integration-arm64"], needs: ["engine", "arm64"] },
];

/** What `npm test -- ...` asked for. */
export interface Request {
  /** The steps named with --only, in the suite's order (undefined: not named). */
  only?: string[];
  /** Test files or parts of their paths (vitest's filters), relative to the checkout where they exist. */
  filters: string[];
  /** Test-name patterns (-t). */
  names: string[];
  help?: boolean;
}

const STEP_NAMES = STEPS.map((s) => s.name).join(", ");
export const USAGE = [
  "npm test takes:",
  `  --only=<steps>         some of the steps, comma-separated (${STEP_NAMES})`,
  "  <file or folder>       test files; a file's folder picks its step (tests/unit: unit, tests/integration: integration ...)",
  '  -t "<name>"            tests whose name matches, in the steps named with --only or picked by a file',
  "For anything else run vitest itself, e.g. `npx vitest run --project unit tests/unit/run-resolve-options.test.ts` (no engine)",
  "or `npx vitest run --project integration tests/integration/cli-run.test.ts` (the engine; projects: vitest.config.ts).",
].join("\n");

/**
 * Reads `npm test -- ...`'s arguments: --only, test files and -t; a message (the usage) for
 * anything else, which would otherwise be dropped and the whole suite run in its place.
 * `cwd` is where the caller typed the command (npm runs the script in the checkout; INIT_CWD).
 */
export function parseRequest(argv: readonly string[], cwd = ROOT): Request | { error: string } {
  const request: Request = { filters: [], names: [] };
  const refuse = (why: string) => ({ error: `npm test: ${why}\n${USAGE}` });
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const eq = /^(--only|-t|--testNamePattern|--test-name-pattern)=(.*)$/s.exec(arg);
    const flag = eq ? eq[1]! : arg;
    if (flag === "--help" || flag === "-h") request.help = true;
    else if (flag === "--only" || flag === "-t" || flag === "--testNamePattern" || flag === "--test-name-pattern") {
      const value = eq ? eq[2]! : argv[++i];
      if (value === undefined || value === "") return refuse(`${flag} needs a value`);
      if (flag !== "--only") request.names.push(value);
      else {
        const named = value.split(",").filter((n) => n !== "");
        const unknown = named.filter((n) => !STEPS.some((s) => s.name === n));
        if (unknown.length > 0 || named.length === 0)
          return refuse(`unknown step in --only: ${unknown.join(", ") || value} (steps: ${STEP_NAMES})`);
        request.only = STEPS.map((s) => s.name).filter((n) => [...(request.only ?? []), ...named].includes(n));
      }
    } else if (arg.startsWith("-")) return refuse(`it does not take ${arg}`);
    else {
      const at = path.resolve(cwd, arg);
      request.filters.push(fs.existsSync(at) ? path.relative(ROOT, at) || "." : arg);
    }
  }
  return request;
}

/**
 * The steps a request runs, each with the vitest arguments after `run`: a step's own files narrowed
 * to the ones the filters name, the filters and name patterns passed on. Files alone pick their
 * step by their folder; filters that name no step's folder, or names alone, need --only.
 */
export function plan(request: Request): Array<{ step: Step; args: string[] }> | { error: string } {
  const filtered = request.filters.length > 0 || request.names.length > 0;
  let names = request.only;
  if (!names && request.filters.length > 0) {
    const picked = request.filters.map(stepOfFile);
    const unplaced = request.filters.filter((_, i) => picked[i] === undefined);
    if (unplaced.length > 0)
      return {
        error: `npm test: which steps should run ${unplaced.join(", ")}? Name them (npm test -- --only=<steps> ${request.filters.join(" ")}) or give a test file's path\n${USAGE}`,
      };
    names = STEPS.map((s) => s.name).filter((n) => picked.includes(n));
  }
  if (!names && filtered)
    return {
      error: `npm test: -t runs in the steps named with --only (e.g. npm test -- --only=unit -t ${JSON.stringify(request.names[0])}), not in the whole suite\n${USAGE}`,
    };
  const steps = names ? STEPS.filter((s) => names.includes(s.name)) : STEPS;
  const planned: Array<{ step: Step; args: string[] }> = [];
  for (const step of steps) {
    let files = step.files ?? [];
    if (request.filters.length > 0) {
      if (step.files) {
        // Its own files the filters name: a filter that names another file must not add it here.
        files = step.files.filter((f) => request.filters.some((filter) => f.includes(filter)));
        if (files.length === 0) continue;
      } else files = request.filters;
    }
    planned.push({
      step,
      args: [
        ...step.args,
        ...files,
        ...request.names.flatMap((n) => ["-t", n]),
        // A step the filters name no file of runs nothing; the run fails only when no step ran a test.
        ...(filtered ? ["--passWithNoTests"] : []),
      ],
    });
  }
  return planned;
}

/** The step a test file (or folder) belongs to by where it lies; undefined when its place does not say. */
function stepOfFile(filter: string): string | undefined {
  const file = filter.split(path.sep).join("/");
  const under = (dir: string) => file === dir || file.startsWith(`${dir}/`);
  if (file === LIFECYCLE || file === WARM_LIFECYCLE) return "lifecycle";
  if (under("tests/unit")) return "unit";
  if (under("tests/arm64")) return "arm64";
  // Once, on the local engine (the security suites run again in copy, warm and remote modes: --only=modes).
  if (under("tests/integration") || under("examples")) return "integration";
  return undefined;
}
