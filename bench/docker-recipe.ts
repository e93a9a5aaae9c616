// The comparison points outside sandbox-run: Pi started with the plain `docker run` recipe
// from Pi's docs (docs/containerization.md: --rm -i, the working folder at /workspace, the
// agent dir as a volume, network on, root), and the floor of any container call,
// `docker run --rm <image> true`. Both use the docker CLI, as a user following the docs would.
import { spawn } from "node:child_process";
import type { Outcome } from "../src/pi/result-collector.js";
import { IMAGE_PATHS } from "../src/sandbox-contract.js";
import { directPiArgs, PI_ENV, TASK_PROMPT } from "./bench-task.js";
import { collectPiOutput } from "./pi-output.js";

/** Containers the benchmark starts with the CLI carry this label, so leftovers can be counted. */
export const BENCH_LABEL = "sandbox-run.bench";

export interface RecipeRunOptions {
  image: string;
  workspace: string;
  /** Host folder from writePiHome(): agent/ (models.json) and the final-tool wrapper. */
  piHome: string;
  model: string;
}

export async function runDockerRecipe(
  options: RecipeRunOptions,
): Promise<{ ms: number; exitCode: number | null; outcome: Outcome }> {
  const env = Object.entries(PI_ENV).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
  const args = [
    "run",
    "--rm",
    "-i",
    "--label",
    BENCH_LABEL,
    "-v",
    `${options.workspace}:/workspace`,
    "-w",
    "/workspace",
    "-v",
    `${options.piHome}/agent:/root/.pi/agent`,
    "-v",
    `${options.piHome}:/bench-pi:ro`,
    // The docs' image runs as root with `pi` as its entrypoint; ours has a non-root user and
    // the launcher, so both are overridden to run Pi's cli.js directly.
    "--user",
    "0:0",
    "--entrypoint",
    IMAGE_PATHS.node,
    ...env,
    options.image,
    IMAGE_PATHS.piCli,
    ...directPiArgs(options.model, "/bench-pi/final-tool-wrapper.mjs"),
  ];
  const started = performance.now();
  const child = spawn("docker", args, { stdio: ["pipe", "pipe", "ignore"] });
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => resolve(code));
  });
  child.stdin.end(TASK_PROMPT);
  const outcome = await collectPiOutput(child.stdout);
  const exitCode = await exited;
  return { ms: performance.now() - started, exitCode, outcome };
}

/** `docker run --rm --entrypoint true <image>`: create, start, wait and remove, nothing else. */
export async function dockerRunTrue(image: string): Promise<number> {
  const started = performance.now();
  const child = spawn("docker", ["run", "--rm", "--label", BENCH_LABEL, "--entrypoint", "true", image], {
    stdio: "ignore",
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", resolve);
  });
  if (code !== 0) throw new Error(`docker run --rm ${image} true exited with ${code}`);
  return performance.now() - started;
}
