// What the checks of a run's git objects and refs cost (docs/security.md W1e, W1f), on a medium
// repository: a history generated with git fast-import (4,000 files, 3,000 commits, a ~30 MB pack),
// cloned (--no-local) into the workspace, then what an agent does in it: 10 commits of ordinary
// changes on a new branch, a stash, and `git gc` (which rewrites the whole pack and writes a
// commit-graph). The same git work is run on the host between the workspace watch's start and
// finish (bind mode) and on copy mode's returned tree, with the checks on and turned off
// (disableBuiltinProtections: git-objects, git-refs); the difference is what the checks cost.
// The sandbox's git is the same version as the host's here (2.39), so the files are the same.
//
//   node --import tsx bench/git-checks.ts [--rounds=3] [--files=4000] [--commits=3000]
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { workspaceRulesCheck } from "../src/run/returned-tree-rules.js";
import { WorkspaceWatch } from "../src/workspace/workspace-watch.js";
import { walkHostTree } from "../src/workspace-transfer/host-tree.js";
import { packTree } from "../src/workspace-transfer/pack-tree.js";
import { readReturnedTar } from "../src/workspace-transfer/returned-tar.js";
import { median, round, table } from "./stats.js";

const args = process.argv.slice(2);
const option = (name: string, fallback: number) =>
  Number(args.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback);
const ROUNDS = option("rounds", 3);
const FILES = option("files", 4000);
const COMMITS = option("commits", 3000);
const OFF = ["git-objects", "git-refs"];

const env = { PATH: process.env.PATH, HOME: "/nonexistent", GIT_CONFIG_NOSYSTEM: "1", LC_ALL: "C" };
const git = (cwd: string, ...a: string[]) =>
  execFileSync("git", ["-c", "user.name=b", "-c", "user.email=b@b", ...a], {
    cwd,
    env,
    encoding: "utf8",
    maxBuffer: 1 << 30,
  });
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-bench-git-"));
const progress = (line: string) => process.stderr.write(`${line}\n`);

/** A history in one fast-import stream: FILES files of ~4 KB of code-like text, each commit changing 5. */
function generateOrigin(): string {
  const origin = path.join(scratch, "origin");
  git(scratch, "init", "-q", "--bare", origin);
  const parts: string[] = [];
  const content = (file: number, version: number) => {
    const lines: string[] = [];
    for (let l = 0; l < 60; l++)
      lines.push(`export const v${file}_${l} = ${(file * 7919 + l * 104729 + version) % 1000003}; // line ${l}`);
    return `${lines.join("\n")}\n`;
  };
  const blob = (text: string) => `data ${Buffer.byteLength(text)}\n${text}\n`;
  for (let c = 0; c < COMMITS; c++) {
    parts.push(
      `commit refs/heads/master\nmark :${c + 1}\ncommitter b <b@b> ${1_600_000_000 + c} +0000\n${blob(`commit ${c}`)}`,
    );
    if (c > 0) parts.push(`from :${c}\n`);
    const touched =
      c === 0 ? Array.from({ length: FILES }, (_, i) => i) : [0, 1, 2, 3, 4].map((k) => (c * 131 + k * 977) % FILES);
    for (const f of touched) parts.push(`M 100644 inline src/m${f % 40}/f${f}.ts\n${blob(content(f, c))}`);
    if (c === 0) parts.push(`M 100644 inline .husky/pre-commit\n${blob("npm test\n")}`);
  }
  const r = spawnSync("git", ["fast-import", "--quiet"], {
    cwd: origin,
    env,
    input: parts.join(""),
    maxBuffer: 1 << 30,
  });
  if (r.status !== 0) throw new Error(`fast-import failed: ${r.stderr}`);
  git(origin, "gc", "-q");
  return origin;
}

const COMMITS_AND_STASH = `set -e
G="git -c user.name=agent -c user.email=agent@example.com"
$G checkout -qb work
for i in 1 2 3 4 5 6 7 8 9 10; do echo "// change $i" >> src/m1/f1.ts; echo "x$i" > src/new$i.ts; git add -A; $G commit -qm "change $i"; done
echo wip >> src/m2/f2.ts && $G stash -q`;
const SCENARIOS = {
  "10 commits, a branch, a stash": COMMITS_AND_STASH,
  "the same, then git gc": `${COMMITS_AND_STASH}\n$G gc -q`,
};

function clone(name: string): string {
  const ws = path.join(scratch, name);
  git(scratch, "clone", "-q", "--no-local", path.join(scratch, "origin"), ws);
  return ws;
}

async function bindRound(work: string, off: boolean) {
  const ws = clone(`bind-${off ? "off" : "on"}-${Date.now()}`);
  const watch = await WorkspaceWatch.start({
    workspace: ws,
    workspaceWritable: true,
    writableRoots: [],
    protectedPaths: [],
    disabledProtections: off ? OFF : [],
    stateDir: `${fs.mkdtempSync(path.join(scratch, "state-"))}/s`,
  });
  execFileSync("bash", ["-c", work], { cwd: ws, env });
  const started = performance.now();
  const report = await watch.finish();
  const ms = performance.now() - started;
  if (report.violationCount > 0) throw new Error(`bind: ${JSON.stringify(report.violations.slice(0, 3))}`);
  fs.rmSync(ws, { recursive: true, force: true });
  return { ms, checks: report.gitChecks };
}

async function copyRound(work: string, off: boolean) {
  const ws = clone(`copy-${off ? "off" : "on"}-${Date.now()}`);
  const before = await walkHostTree(ws);
  const chunks: Buffer[] = [];
  for await (const chunk of packTree(before)) chunks.push(chunk as Buffer);
  const copy = fs.mkdtempSync(path.join(scratch, "copy-"));
  spawnSync("tar", ["-x", "-f", "-", "-C", copy, "--no-same-owner", "-p"], {
    input: Buffer.concat(chunks),
    maxBuffer: 1 << 30,
  });
  execFileSync("bash", ["-c", work], { cwd: copy, env });
  const back = spawnSync("tar", ["-c", "-f", "-", "-C", copy, "--hard-dereference", "."], { maxBuffer: 1 << 30 });
  const returned = await readReturnedTar(Readable.from([back.stdout]), {
    before,
    stagingDir: fs.mkdtempSync(path.join(scratch, "staging-")),
    limits: { maxBytes: 1 << 30, maxEntries: 1_000_000, maxPathBytes: 4096, maxDepth: 512, maxLinkTargetBytes: 4096 },
    what: "the workspace",
  });
  const check = workspaceRulesCheck({
    lentRoots: [ws],
    disabled: off ? OFF : [],
    scratch: fs.mkdtempSync(path.join(scratch, "checks-")),
  });
  const started = performance.now();
  const { violations } = await check(before.entries, returned.after, { hostPath: ws, kind: "workspace" }, returned);
  const ms = performance.now() - started;
  if (violations.length > 0) throw new Error(`copy: ${JSON.stringify(violations.slice(0, 3))}`);
  for (const d of [ws, copy]) fs.rmSync(d, { recursive: true, force: true });
  return { ms };
}

async function main() {
  progress(`generating a repository of ${FILES} files and ${COMMITS} commits ...`);
  const t0 = performance.now();
  const origin = generateOrigin();
  const packBytes = fs
    .readdirSync(path.join(origin, "objects/pack"))
    .reduce((sum, n) => sum + fs.statSync(path.join(origin, "objects/pack", n)).size, 0);
  progress(`  ${round(packBytes / 1048576, 1)} MiB of packs, ${round((performance.now() - t0) / 1000, 1)} s`);
  const rows: Array<Array<string | number>> = [];
  for (const [scenario, work] of Object.entries(SCENARIOS)) {
    for (const mode of ["bind", "copy"] as const) {
      const on: number[] = [];
      const off: number[] = [];
      let checked: unknown;
      for (let i = 0; i < ROUNDS; i++) {
        // Interleaved, so load on the machine hits both alike.
        const a = mode === "bind" ? await bindRound(work, false) : await copyRound(work, false);
        const b = mode === "bind" ? await bindRound(work, true) : await copyRound(work, true);
        on.push(a.ms);
        off.push(b.ms);
        if ("checks" in a) checked = a.checks;
        progress(`  ${scenario}, ${mode} ${i + 1}: checks on ${Math.round(a.ms)} ms, off ${Math.round(b.ms)} ms`);
      }
      if (checked) progress(`    checked: ${JSON.stringify(checked)}`);
      rows.push([
        scenario,
        mode,
        Math.round(median(on)),
        Math.round(median(off)),
        Math.round(median(on) - median(off)),
      ]);
    }
  }
  console.log(
    `repository: ${FILES} files, ${COMMITS} commits, ${round(packBytes / 1048576, 1)} MiB of packs; median of ${ROUNDS}`,
  );
  console.log(table(["work in the sandbox", "mode", "after-run check (ms)", "checks off (ms)", "cost (ms)"], rows));
  fs.rmSync(scratch, { recursive: true, force: true });
}

main().catch((error) => {
  fs.rmSync(scratch, { recursive: true, force: true });
  console.error(error);
  process.exit(1);
});
