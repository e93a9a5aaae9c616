// The cli-start section of `npm run bench`: what the `sandbox-run` process costs before it does any
// work, in CPU time (user + system, of the process and its threads; wall time on a shared machine
// says more about the neighbours), interleaved round by round with a bare `node -e 0`:
//   --version, --help, --dry-run (built-in policy, no models file, no schema), --dry-run with a
//   models.json (zod loads) and with a schema (Ajv and pi-schema load), and a run up to its first
//   engine call (DOCKER_HOST names a socket that does not exist, so the run stops at its first
//   request: exit 3).
// Each sample is one process, measured by bash's `times` (children's CPU, ms resolution); the
// output goes to /dev/null. Needs no engine.
//
// The processes get this process's environment, as a user's shell would give them. One variable
// matters a lot: with NODE_EXTRA_CA_CERTS set (as on machines behind a TLS-inspecting proxy, this
// project's CI among them), every Node process reads and parses that bundle at start-up, ~40 ms of
// CPU before any code runs. When it is set, the section runs a second pass without it, so both
// ratios (and the absolute cost over bare Node, which is the same in both) are on record.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { interleave, type VariantResult } from "./interleave.js";
import { round, table } from "./stats.js";
import type { Scratch, Variant } from "./variants.js";

const CLI = fileURLToPath(new URL("../dist/cli/main.js", import.meta.url));
/** The target: every start-up command at most this many times a bare Node's CPU time. */
export const CLI_START_TARGET_RATIO = 2;

/** CPU milliseconds of one `node <args>` process (and exit code), via bash's `times`. */
function cpuOf(args: string[], env: NodeJS.ProcessEnv): { cpuMs: number; status: number } {
  const script = 'node "$@" >/dev/null 2>&1; status=$?; times; echo "status $status"';
  const out = execFileSync("bash", ["-c", script, "bash", ...args], { env, encoding: "utf8" });
  const lines = out.trim().split("\n");
  const status = Number(lines.at(-1)!.split(" ")[1]);
  // `times` prints the shell's own line, then its children's: "0m0.081s 0m0.017s".
  const [user, sys] = lines
    .at(-2)!
    .split(/\s+/)
    .map((t) => {
      const m = /^(\d+)m([\d.]+)s$/.exec(t);
      return m ? Number(m[1]) * 60_000 + Number(m[2]) * 1000 : Number.NaN;
    });
  return { cpuMs: user! + sys!, status };
}

export async function runCliStartSection(input: {
  runs: number;
  scratch: Scratch;
  progress: (line: string) => void;
}): Promise<{ results: unknown; text: string; targets: Array<{ ok: boolean; text: string }> }> {
  const dir = input.scratch.dir("cli-start");
  const workspace = path.join(dir, "ws");
  fs.mkdirSync(workspace);
  const models = path.join(dir, "models.json");
  fs.writeFileSync(
    models,
    JSON.stringify({
      providers: {
        local: {
          baseUrl: "http://127.0.0.1:9/v1",
          api: "openai-completions",
          apiKey: "$LOCAL_KEY",
          models: [{ id: "m" }],
        },
      },
    }),
  );
  const schema = path.join(dir, "schema.json");
  // JSON text: an object literal with a `then` key reads as a thenable to the linter.
  fs.writeFileSync(
    schema,
    '{"type":"object","properties":{"verdict":{"enum":["approve","reject"]},"reason":{"type":"string"}},' +
      '"required":["verdict"],"if":{"properties":{"verdict":{"const":"reject"}}},"then":{"required":["reason"]}}',
  );
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ANTHROPIC_API_KEY: "sk-bench-not-a-key",
    LOCAL_KEY: "bench-not-a-key",
    DOCKER_HOST: `unix://${path.join(dir, "no-engine.sock")}`,
  };
  const dryRun = ["--dry-run", "--cwd", workspace, "--model", "anthropic/claude-sonnet-4-5", "Fix the failing test"];
  const cases: Array<{ key: string; label: string; args: string[]; status: number }> = [
    { key: "node", label: "bare `node -e 0`", args: ["-e", "0"], status: 0 },
    { key: "version", label: "`sandbox-run --version`", args: [CLI, "--version"], status: 0 },
    { key: "help", label: "`sandbox-run --help`", args: [CLI, "--help"], status: 0 },
    { key: "dry-run", label: "`sandbox-run --dry-run` (built-in policy)", args: [CLI, ...dryRun], status: 0 },
    {
      key: "dry-run-models",
      label: "`--dry-run --models <file>` (zod for models.json)",
      args: [CLI, "--dry-run", "--cwd", workspace, "--models", models, "--model", "local/m", "go"],
      status: 0,
    },
    {
      key: "dry-run-schema",
      label: "`--dry-run --schema <file>` (Ajv, ajv-formats, pi-schema)",
      args: [CLI, ...dryRun.slice(0, -1), "--schema", schema, "go"],
      status: 0,
    },
    {
      key: "run-to-engine",
      label: "a run up to its first engine call (no engine: exit 3)",
      args: [CLI, "-q", "--cwd", workspace, "--model", "anthropic/claude-sonnet-4-5", "Fix the failing test"],
      status: 3,
    },
  ];
  const pass = async (passEnv: NodeJS.ProcessEnv, title: string) => {
    const variants: Variant[] = cases.map((c) => ({
      key: c.key,
      label: c.label,
      run: async () => {
        const { cpuMs, status } = cpuOf(c.args, passEnv);
        if (status !== c.status) throw new Error(`${c.label} exited ${status}, expected ${c.status}`);
        return { ms: cpuMs };
      },
    }));
    input.progress(`CLI start-up (${title}): ${input.runs} interleaved rounds after 2 warm-up rounds (CPU time) ...`);
    const measured = await interleave(variants, { warmup: 2, runs: input.runs, progress: input.progress });
    const node = measured.find((r) => r.key === "node")!;
    const rows = measured.map((r: VariantResult) => ({
      ...r,
      ratioToNode: round(r.medianMs / node.medianMs, 2),
      overNodeMs: round(r.medianMs - node.medianMs),
    }));
    const text = table(
      [`CLI start-up, CPU ms (user + sys), ${title}`, "runs", "median", "p90", "x node", "over node", "failures"],
      rows.map((r) => [
        r.label,
        r.runs,
        round(r.medianMs),
        round(r.p90Ms),
        r.ratioToNode.toFixed(2),
        r.overNodeMs,
        r.failures,
      ]),
    );
    return { rows, text };
  };
  const caBundle = Boolean(env.NODE_EXTRA_CA_CERTS);
  const asIs = await pass(env, caBundle ? "NODE_EXTRA_CA_CERTS set (this environment)" : "this environment");
  const { NODE_EXTRA_CA_CERTS: _bundle, ...withoutBundle } = env;
  const without = caBundle ? await pass(withoutBundle, "without NODE_EXTRA_CA_CERTS") : undefined;
  const rows = asIs.rows;
  const text = [asIs.text, ...(without ? ["", without.text] : [])].join("\n");
  const targets = rows
    .filter((r) => ["version", "help", "dry-run"].includes(r.key))
    .map((r) => ({
      ok: r.failures === 0 && r.ratioToNode <= CLI_START_TARGET_RATIO,
      text: `${r.label} <= ${CLI_START_TARGET_RATIO}x a bare node: ${r.ratioToNode}x`,
    }));
  return {
    results: { environment: rows, ...(without ? { withoutNodeExtraCaCerts: without.rows } : {}) },
    text,
    targets,
  };
}
