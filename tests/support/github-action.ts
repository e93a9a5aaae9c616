// Runs action.yml's `run:` steps as a script, as a GitHub runner would: each with bash (--noprofile
// --norc -eo pipefail) in the workspace, its `env:` evaluated (inputs, the action's path, the
// runner's temp folder, earlier steps' outputs), GITHUB_OUTPUT read back. `uses:` steps (setup-node,
// the cache, the artifact upload) belong to GitHub and are skipped.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parse } from "yaml";

const repoRoot = path.resolve(import.meta.dirname, "../..");

export interface Step {
  id?: string;
  name?: string;
  if?: string;
  uses?: string;
  run?: string;
  shell?: string;
  env?: Record<string, string>;
}
export interface Action {
  inputs: Record<string, { default?: string }>;
  outputs: Record<string, { value: string }>;
  runs: { using: string; steps: Step[] };
}

export const action = parse(fs.readFileSync(path.join(repoRoot, "action.yml"), "utf8")) as Action;

/**
 * Runs the action's run steps; returns each step's outputs, the last exit code and the log.
 * `runnerEnv`: more of the runner's variables (GITHUB_JOB, GITHUB_STEP_SUMMARY, GITHUB_EVENT_PATH, ...).
 */
export async function runAction(
  inputs: Record<string, string>,
  workspace: string,
  runnerEnv: Record<string, string> = {},
) {
  const runnerTemp = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-runner-"));
  const outputs: Record<string, Record<string, string>> = {};
  const input = (name: string) => inputs[name] ?? action.inputs[name]?.default ?? "";
  const evaluate = (value: string) =>
    value.replace(/\$\{\{\s*([^}]+?)\s*\}\}/g, (_all, expression: string) => {
      if (expression === "github.action_path") return repoRoot;
      if (expression === "runner.temp") return runnerTemp;
      if (expression === "github.server_url") return "https://github.com";
      const ref = /^inputs\.([\w-]+)$/.exec(expression);
      if (ref) return input(ref[1]!);
      const out = /^steps\.([\w-]+)\.outputs\.([\w-]+)$/.exec(expression);
      if (out) return outputs[out[1]!]?.[out[2]!] ?? "";
      throw new Error(`the test cannot evaluate \${{ ${expression} }}`);
    });
  let log = "";
  let code = 0;
  for (const [index, step] of action.runs.steps.entries()) {
    if (step.uses) continue;
    const outputFile = path.join(runnerTemp, `output-${index}`);
    fs.writeFileSync(outputFile, "");
    const env: NodeJS.ProcessEnv = {
      PATH: `${path.dirname(process.execPath)}:${process.env.PATH}`,
      HOME: process.env.HOME,
      TMPDIR: process.env.TMPDIR,
      DOCKER_HOST: process.env.DOCKER_HOST,
      GITHUB_OUTPUT: outputFile,
      GITHUB_WORKSPACE: workspace,
      RUNNER_TEMP: runnerTemp,
      ...runnerEnv,
      ...Object.fromEntries(Object.entries(step.env ?? {}).map(([k, v]) => [k, evaluate(String(v))])),
    };
    const result = await bash(step.run!, workspace, env);
    log += result.output;
    code = result.code;
    if (step.id) outputs[step.id] = parseOutputs(fs.readFileSync(outputFile, "utf8"));
    if (code !== 0) break;
  }
  return { outputs, code, log };
}

/** One `run:` step of a workflow (action.yml's, or an example's) by its name, with the given env. */
export function runStep(
  steps: Step[],
  name: string,
  env: Record<string, string>,
  cwd: string = os.tmpdir(),
): Promise<{ code: number; output: string }> {
  const step = steps.find((s) => s.name === name);
  if (!step?.run) throw new Error(`no run step named ${name}`);
  return bash(step.run, cwd, { PATH: `${path.dirname(process.execPath)}:${process.env.PATH}`, ...env });
}

function bash(script: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["--noprofile", "--norc", "-eo", "pipefail", "-c", script], { cwd, env });
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => (output += c.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? -1, output }));
  });
}

/** GITHUB_OUTPUT's two forms: name=value and name<<DELIMITER ... DELIMITER. */
function parseOutputs(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const heredoc = /^([\w-]+)<<(.+)$/.exec(line);
    if (heredoc) {
      const end = lines.indexOf(heredoc[2]!, i + 1);
      out[heredoc[1]!] = lines.slice(i + 1, end).join("\n");
      i = end;
    } else if (line.includes("=")) {
      out[line.slice(0, line.indexOf("="))] = line.slice(line.indexOf("=") + 1);
    }
  }
  return out;
}
