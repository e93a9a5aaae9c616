// The run's budget for what the lent trees' configs name: every reader counts what it emits, and
// past a cap the run is refused (usage), never protected less in silence nor the controller's
// memory taken (config-target-budget.ts; review, session 25).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { isSandboxRunError } from "../../src/errors.js";
import { configuredTargets } from "../../src/workspace/config-folders.js";
import { TargetBudget } from "../../src/workspace/config-target-budget.js";
import { configTargets, repositoriesOf, targetsInTree } from "../../src/workspace/git-config-paths.js";
import { namedScriptTargets } from "../../src/workspace/named-scripts.js";
import { pathSourceTargets } from "../../src/workspace/path-sources.js";
import { tempTrees } from "../support/temp-trees.js";

const { tree } = tempTrees("sandbox-run-budget-");

function refusal(f: () => unknown): string {
  try {
    f();
  } catch (error) {
    if (isSandboxRunError(error) && error.code === "usage") return `${error.message}\n${error.hint}`;
    throw error;
  }
  throw new Error("expected a refusal");
}

describe("config target budget", () => {
  it("an .envrc of 10,000 vendor/bin folders costs 10,000 entries, not one per host command name each (15 million paths took the controller down); a package per folder with layout node is one entry each", () => {
    const ws = tree({
      ".envrc": `${Array.from({ length: 10_000 }, (_, i) => `PATH_add p${i}/vendor/bin`).join("\n")}\n`,
    });
    const targets = pathSourceTargets([ws]);
    expect(targets).toHaveLength(10_000);
    expect(targets.every((t) => t.commands !== undefined)).toBe(true);
    // One more is past the file's 10,000: refused, with what to do.
    fs.appendFileSync(path.join(ws, ".envrc"), "PATH_add one-more/vendor/bin\n");
    const message = refusal(() => pathSourceTargets([ws]));
    expect(message).toMatch(/\.envrc names more than 10000 paths to run, load or put on PATH\. Nothing was started\./);
    expect(message).toContain('disableBuiltinProtections: ["git-config-paths"]');
    // A monorepo of 300 packages, each with layout node: 300 entries, judged by name.
    const mono = tree(
      Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`packages/p${i}/.envrc`, "layout node\n"])),
    );
    const folders = Array.from({ length: 300 }, (_, i) => path.join(mono, `packages/p${i}`));
    expect(configuredTargets([], folders, []).targets).toHaveLength(300);
  });

  it("a repository's config naming more than 10,000 paths refuses the run instead of dropping a later repository's hooks", () => {
    const ws = tree({ "x/.githooks/pre-commit": "echo hook\n" });
    const git = (cwd: string, ...args: string[]) => execFileSync("git", args, { cwd, stdio: "pipe" });
    git(ws, "init", "-q");
    // A committed fixture, read before the submodule-like repository below: 10,001 aliases.
    const fixture = path.join(ws, ".fixture.git");
    git(ws, "init", "-q", "--bare", fixture);
    fs.appendFileSync(
      path.join(fixture, "config"),
      `[alias]\n${Array.from({ length: 10_001 }, (_, i) => `\ta${i} = !./t/${i}\n`).join("")}`,
    );
    git(path.join(ws, "x"), "init", "-q");
    git(path.join(ws, "x"), "config", "core.hooksPath", ".githooks");
    const repos = repositoriesOf({ roots: [ws], gitDirs: [fixture, path.join(ws, "x/.git")], pointerFiles: [] });
    expect(refusal(() => configTargets(repos, { hostFiles: [], home: "/nonexistent" }))).toMatch(
      /\.fixture\.git\/config names more than 10000 paths/,
    );
    // Under the cap every repository's paths count: the fixture's 9,000 and the hooks both.
    fs.writeFileSync(
      path.join(fixture, "config"),
      `[alias]\n${Array.from({ length: 9000 }, (_, i) => `\ta${i} = !./t/${i}\n`).join("")}`,
    );
    const inTree = targetsInTree(ws, configTargets(repos, { hostFiles: [], home: "/nonexistent" }));
    expect(inTree.get("x/.githooks")).toMatch(/core\.hooksPath/);
    expect(inTree.size).toBe(9001);
  });

  it("fifty devcontainer.json links to one file of many commands cost one file's paths; a file naming more than 10,000 is refused", () => {
    const commands = Array.from({ length: 5000 }, (_, i) => `node ./s${i}.js`).join(" && ");
    const ws = tree({
      "shared.json": JSON.stringify({ initializeCommand: commands }),
      ...Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`s${i}.js`, ""])),
    });
    for (let i = 0; i < 50; i++) {
      fs.mkdirSync(path.join(ws, `.devcontainer/c${i}`), { recursive: true });
      fs.symlinkSync("../../shared.json", path.join(ws, `.devcontainer/c${i}/devcontainer.json`));
    }
    expect(namedScriptTargets([ws])).toHaveLength(5000);
    const big = tree({
      ".devcontainer.json": JSON.stringify({
        initializeCommand: Array.from({ length: 10_001 }, (_, i) => `node ./s${i}.js`).join(" && "),
      }),
    });
    expect(refusal(() => namedScriptTargets([big]))).toMatch(/devcontainer\.json names more than 10000 paths/);
  });

  it("what node and python would run of a code path that is no file counts, each resolution a path (review, session 26): 834 absent `node ./sN` are past a file's 10,000", () => {
    const under = tree({
      ".devcontainer.json": JSON.stringify({
        initializeCommand: Array.from({ length: 833 }, (_, i) => `node ./s${i}`).join(" && "),
      }),
    });
    // Each absent ./sN, and sN.js, .mjs, .cjs, .json, .node, .ts, .tsx, .mts, .cts, .py, .pyc.
    expect(namedScriptTargets([under])).toHaveLength(833 * 12);
    const over = tree({
      ".devcontainer.json": JSON.stringify({
        initializeCommand: Array.from({ length: 834 }, (_, i) => `node ./s${i}`).join(" && "),
      }),
    });
    expect(refusal(() => namedScriptTargets([over]))).toMatch(/devcontainer\.json names more than 10000 paths/);
  });

  it("a folder many links at protected names lead to is walked once (review, session 27: 476 packages' .vscode linked to one 20-file folder passed the 10,000 visits)", () => {
    const shared: Record<string, string> = {};
    for (let i = 0; i < 20; i++) shared[`.shared-vscode/f${i}.json`] = "{}";
    const ws = tree(shared);
    const links: string[] = [];
    for (let i = 0; i < 600; i++) {
      const pkg = path.join(ws, "packages", `p${i}`);
      fs.mkdirSync(pkg, { recursive: true });
      fs.symlinkSync("../../.shared-vscode", path.join(pkg, ".vscode"));
      links.push(path.join(pkg, ".vscode"));
    }
    const { targets } = configuredTargets([], [], [ws], links);
    expect(targets.map((t) => path.relative(ws, t.path))).toEqual([".shared-vscode"]);
  });

  it("links inside a folder reached through a linked folder resolve as the kernel resolves them (review, session 27)", () => {
    const ws = tree({ "conf/s.json": "{}", "real/shared/.keep": "", "a/.keep": "", "b/.keep": "" });
    fs.mkdirSync(path.join(ws, "deep/er"), { recursive: true });
    fs.symlinkSync("../../real", path.join(ws, "deep/er/x"));
    fs.symlinkSync("../../conf/s.json", path.join(ws, "real/shared/settings.json"));
    fs.symlinkSync("../deep/er/x/shared", path.join(ws, "a/.vscode"));
    fs.symlinkSync("../real/shared", path.join(ws, "b/.vscode"));
    const links = [path.join(ws, "a/.vscode"), path.join(ws, "b/.vscode")];
    const { targets } = configuredTargets([], [], [ws], links);
    expect(targets.map((t) => path.relative(ws, t.path))).toContain("conf/s.json");
    expect(targets.map((t) => path.relative(ws, t.path))).not.toContain("deep/er/conf/s.json");
  });

  it("one budget over all the readers of a run", () => {
    const budget = new TargetBudget(5, 100);
    for (const source of ["a", "a", "a"]) budget.take(source);
    budget.take("b");
    budget.take("b");
    expect(refusal(() => budget.take("b"))).toMatch(/more than 5 paths .*the last one read: b/);
    const perFile = new TargetBudget(100, 2);
    perFile.take("c");
    perFile.take("c");
    expect(refusal(() => perFile.take("c"))).toMatch(/^C names more than 2 paths/);
    const ws = tree({
      ".envrc": "PATH_add bin\n",
      ".mcp.json": '{"mcpServers":{"x":{"command":"./tool.sh"}}}',
      "tool.sh": "",
    });
    expect(configuredTargets([], [ws], []).targets.map((t) => path.relative(ws, t.path))).toEqual(["bin", "tool.sh"]);
  });

  it("a config too large to read refuses the run instead of leaving what it names unguarded", () => {
    const ws = tree({ ".envrc": `${"# padding\n".repeat(30_000)}PATH_add bin\n`, "bin/ok": "" });
    expect(refusal(() => configuredTargets([], [ws], []))).toMatch(/^The config .*\.envrc is larger than 256 KiB/);
    const hook = tree({ ".husky/pre-commit": `${"#".repeat(300_000)}\nsh scripts/check.sh\n` });
    expect(refusal(() => configuredTargets([], [hook], []))).toMatch(/pre-commit is larger than 256 KiB/);
  });
});
