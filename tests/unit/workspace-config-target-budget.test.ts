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
const hostCommands = new Set(Array.from({ length: 3000 }, (_, i) => `cmd${i}`));

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
  it("an .envrc of vendor/bin folders, each guarding every host command name, is refused before it takes the controller's memory", () => {
    // 100 folders x 3,000 names: 300,000 paths (10,000 folders took a 4.4 GB controller down).
    const ws = tree({ ".envrc": `${Array.from({ length: 100 }, (_, i) => `PATH_add p${i}/vendor/bin`).join("\n")}\n` });
    const message = refusal(() => pathSourceTargets([ws], hostCommands));
    expect(message).toMatch(
      /configs name more than 200000 paths to run, load or put on PATH \(the last one read: .*\.envrc\)/,
    );
    expect(message).toContain('disableBuiltinProtections: ["git-config-paths"]');
    // An ordinary one: layout node and layout php, each folder guarding 3,000 names, pass.
    const ordinary = tree({ ".envrc": "layout node\nlayout php\nPATH_add bin\n" });
    expect(pathSourceTargets([ordinary], hostCommands)).toHaveLength(6001);
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
    const ws = tree({ "shared.json": JSON.stringify({ initializeCommand: commands }) });
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

  it("one budget over all the readers of a run", () => {
    const budget = new TargetBudget(5, 100);
    budget.take("a", 3);
    expect(refusal(() => budget.take("b", 3))).toMatch(/more than 5 paths .*the last one read: b/);
    const ws = tree({ ".envrc": "PATH_add bin\n", ".mcp.json": '{"mcpServers":{"x":{"command":"./tool.sh"}}}' });
    expect(configuredTargets([], [ws]).map((t) => path.relative(ws, t.path))).toEqual(["bin", "tool.sh"]);
  });
});
