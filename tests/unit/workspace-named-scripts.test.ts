// The files the protected hook, agent and editor configs at a tree's top run by path (review,
// session 24: `.husky/pre-commit` ran an unprotected `./scripts/check.sh` the run had rewritten).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { targetsInTree } from "../../src/workspace/git-config-paths.js";
import { namedScriptTargets, pathWords, withoutJsonComments } from "../../src/workspace/named-scripts.js";
import { type EntryFacts, evaluateWorkspaceRules } from "../../src/workspace/workspace-rules.js";

/** What node, tsx, bun and python try after a code path they do not find as written. */
const RESOLVED = [".js", ".mjs", ".cjs", ".json", ".node", ".ts", ".tsx", ".mts", ".cts", ".py", ".pyc"];
/** What node and python run of a folder given as code: its package.json, index.*, __main__.*, __pycache__. */
const FOLDER = [
  "package.json",
  ...RESOLVED.filter((e) => e !== ".py" && e !== ".pyc").map((e) => `index${e}`),
  "__main__.py",
  "__main__.pyc",
  "__pycache__",
];

function tree(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "named-scripts-"));
  for (const [name, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), content);
  }
  return dir;
}

describe("namedScriptTargets", () => {
  it("reads what husky hooks, pre-commit, lefthook, Claude Code, MCP configs, VS Code tasks and Dev Containers run by path", () => {
    const dir = tree({
      ".husky/pre-commit": '#!/bin/sh\n. "$(dirname -- "$0")/_/husky.sh"\n./scripts/check.sh && npx lint-staged\n',
      ".husky/_/husky.sh": "echo not a hook\n",
      ".pre-commit-config.yaml":
        "repos:\n  - repo: local\n    hooks:\n      - id: lint\n        entry: bash scripts/lint.sh\n        args: [--config=tools/lint.json]\n        language: system\n",
      "lefthook.yml":
        "extends:\n  - ci/lefthook-extra.yml\npre-commit:\n  commands:\n    fmt:\n      run: ./bin/fmt {staged_files}\n",
      ".claude/settings.json": JSON.stringify({
        hooks: {
          SessionStart: [{ hooks: [{ type: "command", command: '"$CLAUDE_PROJECT_DIR"/scripts/claude-hook.sh' }] }],
        },
      }),
      ".mcp.json": JSON.stringify({ mcpServers: { x: { command: "node", args: ["tools/mcp.js", "--port", "1"] } } }),
      ".vscode/tasks.json":
        '{\n  // a comment\n  "tasks": [{ "label": "s", "command": "${workspaceFolder}/scripts/setup.sh", "runOptions": { "runOn": "folderOpen" } },],\n}\n',
      ".devcontainer/devcontainer.json":
        '{ "initializeCommand": ["sh", "scripts/init.sh"], /* compose */ "dockerComposeFile": "../docker-compose.yml" }',
      "docs/readme.md": "not read\n",
      // The scripts exist: each is run as it is, so what node would resolve it to is not guarded.
      ...Object.fromEntries(
        ["scripts/check.sh", "scripts/lint.sh", "bin/fmt", "scripts/claude-hook.sh", "tools/mcp.js"]
          .concat(["scripts/setup.sh", "scripts/init.sh"])
          .map((f) => [f, ""]),
      ),
    });
    const found = namedScriptTargets([dir]).map(
      (t) => `${t.key}: ${path.relative(dir, t.path)} (${path.relative(dir, t.source)})`,
    );
    expect(found).toEqual([
      "husky hook: scripts/check.sh (.husky/pre-commit)",
      "pre-commit entry: scripts/lint.sh (.pre-commit-config.yaml)",
      "pre-commit entry: tools/lint.json (.pre-commit-config.yaml)",
      "lefthook run: bin/fmt (lefthook.yml)",
      "lefthook extends: ci/lefthook-extra.yml (lefthook.yml)",
      "Claude Code command: scripts/claude-hook.sh (.claude/settings.json)",
      "MCP server command: tools/mcp.js (.mcp.json)",
      "VS Code task command: scripts/setup.sh (.vscode/tasks.json)",
      "Dev Container initializeCommand: scripts/init.sh (.devcontainer/devcontainer.json)",
      "Dev Container dockerComposeFile: docker-compose.yml (.devcontainer/devcontainer.json)",
      "Dev Container dockerComposeFile: .env (.devcontainer/devcontainer.json)",
    ]);
  });

  it("a config holding more values than the readers take is refused, never read in part (session 26 read 40,000 values and left what came after unguarded)", () => {
    const padding = Array.from({ length: 45_000 }, (_, i) => i);
    const padded = tree({
      ".vscode/tasks.json": JSON.stringify({ tasks: [{ label: "pad", padding }, { command: "./scripts/build.sh" }] }),
    });
    let refusal: unknown;
    try {
      namedScriptTargets([padded]);
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toMatchObject({ code: "usage", message: expect.stringContaining(padded) });
    const many = Array.from({ length: 10_001 }, (_, i) => `./scripts/s${i}.sh`);
    const manyStrings = tree({
      ".mcp.json": JSON.stringify({ mcpServers: { a: { command: "node", args: [{}, ...many] } } }),
    });
    expect(() => namedScriptTargets([manyStrings])).toThrow(/more than 40000 values or 10000 command strings/);
    const small = tree({
      ".vscode/tasks.json": JSON.stringify({
        tasks: [{ label: "pad", padding: padding.slice(0, 30_000) }, { command: "./scripts/build.sh" }],
      }),
    });
    expect(namedScriptTargets([small]).map((t) => t.path)).toContain(path.join(small, "scripts/build.sh"));
  });

  it("a symlinked config is read as the tools read it; words with other expansions, URLs and the home folder are left out", () => {
    const dir = tree({
      "config/mcp.json": JSON.stringify({ mcpServers: { x: { command: "./server.sh" } } }),
      "server.sh": "",
    });
    fs.symlinkSync("config/mcp.json", path.join(dir, ".mcp.json"));
    expect(namedScriptTargets([dir]).map((t) => path.relative(dir, t.path))).toEqual(["server.sh"]);
    expect(pathWords(["$HOME/bin/x ~/y https://example.com/z `pwd`/w ./ok/a"])).toEqual(["./ok/a"]);
    expect(withoutJsonComments('{"a": "// not a comment", /* x */ "b": [1,],}')).toBe(
      '{"a": "// not a comment",   "b": [1]}',
    );
  });

  it("a folder named as an argument is data, not code (eslint src/, cd packages/app); a package's file under node_modules is the repository's; a script that does not exist yet is guarded", () => {
    const dir = tree({
      "src/app.js": "",
      "packages/app/package.json": "{}",
      ".husky/pre-commit": "cd packages/app && npm test\nnode_modules/.bin/lint-staged\n./scripts/new-check.sh\n",
      "lefthook.yml": "pre-commit:\n  commands:\n    lint:\n      run: npx eslint src/\n",
    });
    expect(namedScriptTargets([dir]).map((t) => path.relative(dir, t.path))).toEqual(
      ["", ...RESOLVED].map((e) => `scripts/new-check.sh${e}`),
    );
  });

  it("reads what the tools read the way they read it (review, session 24): lefthook in TOML and JSON and its root, a task's cwd, duplicate YAML keys, a byte-order mark, pre-commit's script language, what a compose file includes", () => {
    const dir = tree({
      "lefthook-local.json": JSON.stringify({ "pre-commit": { commands: { evil: { run: "./evil.sh" } } } }),
      "lefthook.toml": '[pre-commit.commands.fmt]\nroot = "web/"\nrun = "./fmt.sh"\n',
      ".vscode/tasks.json": `\uFEFF${JSON.stringify({ tasks: [{ command: "./build.sh", options: { cwd: "${workspaceFolder}/sub" } }] })}`,
      ".pre-commit-config.yaml":
        "repos:\n- repo: local\n  hooks:\n  - id: a\n    name: a\n    name: again\n    entry: check.sh\n    language: script\n",
      ".devcontainer.json": '{ "dockerComposeFile": "compose.yml" }',
      "compose.yml": "include:\n  - other/compose.yml\nservices:\n  app:\n    env_file: app.env\n",
      ...Object.fromEntries(["evil.sh", "web/fmt.sh", "sub/build.sh"].map((f) => [f, ""])),
    });
    expect(namedScriptTargets([dir]).map((t) => `${t.key}: ${path.relative(dir, t.path)}`)).toEqual([
      "pre-commit entry: check.sh",
      "lefthook run: evil.sh",
      "lefthook run: web/fmt.sh",
      "VS Code task command: sub/build.sh",
      "Dev Container dockerComposeFile: compose.yml",
      "Dev Container dockerComposeFile: .env",
      "Dev Container compose file: other/compose.yml",
      "Dev Container compose file: app.env",
    ]);
  });

  it("a folder that is the program or an interpreter's operand is code: what node and python run of it is guarded, with what node runs beside it (node tools: tools.js first); a module's or the test runner's operand is data (python -m pytest tests/, node --test test/); a flag's value is no operand; lefthook TOML inline tables and dotted keys", () => {
    const dir = tree({
      "tools/index.js": "",
      "test/a.test.js": "",
      "tests/test_a.py": "",
      "packages/app/index.js": "",
      "pyt/__main__.py": "",
      ".husky/pre-commit":
        "node tools && node --test test/ && python3 -m pytest tests/ && bun run --cwd packages/app lint\npython3 pyt/\n",
      "lefthook.toml":
        '[pre-commit.commands]\nlint = { run = "./lint.sh", root = "web/" }\npre-push.commands.t.run = "./t.sh"\n',
      "web/lint.sh": "",
      "t.sh": "",
    });
    expect(namedScriptTargets([dir]).map((t) => `${t.key}: ${path.relative(dir, t.path)}`)).toEqual([
      ...FOLDER.map((e) => `husky hook: tools/${e}`),
      ...RESOLVED.map((e) => `husky hook: tools${e}`),
      ...FOLDER.map((e) => `husky hook: pyt/${e}`),
      ...RESOLVED.map((e) => `husky hook: pyt${e}`),
      "lefthook run: web/lint.sh",
      "lefthook run: t.sh",
    ]);
  });

  it("a folder run as code guards the file its package.json's main names, not the folder's other sources (go run ./cmd/server: its .go files are the run's to edit)", () => {
    const dir = tree({
      ".husky/pre-commit": "node tools/\ngo run ./cmd/server\n",
      "tools/package.json": '{"main":"lib/start.js"}',
      "tools/lib/start.js": "",
      "tools/lib/util.js": "",
      "cmd/server/main.go": "",
    });
    const targets = namedScriptTargets([dir]).map((t) => path.relative(dir, t.path));
    expect(targets).toContain("tools/lib/start.js");
    expect(targets).toContain("tools/package.json");
    for (const source of ["cmd/server", "cmd/server/main.go", "tools/lib/util.js", "tools"])
      expect(targets, source).not.toContain(source);
  });

  it("a code path that is no file is guarded with what node, tsx, bun and python would run for it (review, session 26: `node scripts/check` ran a rewritten scripts/check.js, `node tools/` a new tools/package.json's main)", () => {
    const dir = tree({
      ".husky/pre-commit": "node scripts/check\nnode tools/\n",
      ".mcp.json": JSON.stringify({ mcpServers: { x: { command: "tsx", args: ["mcp/server"] } } }),
      "scripts/check.js": "",
      "tools/index.js": "",
    });
    expect(namedScriptTargets([dir]).map((t) => `${t.key}: ${path.relative(dir, t.path)}`)).toEqual([
      ...["", ...RESOLVED].map((e) => `husky hook: scripts/check${e}`),
      ...FOLDER.map((e) => `husky hook: tools/${e}`),
      ...RESOLVED.map((e) => `husky hook: tools${e}`),
      ...["", ...RESOLVED].map((e) => `MCP server command: mcp/server${e}`),
    ]);
    // At rule level: the run's rewrite of scripts/check.js and its tools/package.json (whose main
    // would name tools/lib.js) are violations, put back; a Go package's sources stay the run's to edit.
    const facts = (hash: string): EntryFacts => ({ kind: "file", mode: 0o100644, size: 1, hash });
    const violations = evaluateWorkspaceRules(
      [
        { path: "scripts/check.js", before: facts("a"), after: facts("b") },
        { path: "tools/lib.js", after: facts("c") },
        { path: "tools/package.json", after: facts("d") },
      ],
      { configPaths: targetsInTree(dir, namedScriptTargets([dir])) },
    );
    const why = `husky hook in ${path.join(dir, ".husky/pre-commit")}`;
    expect(violations.map((v) => `${v.rule} ${v.change} ${v.path}: ${v.detail}`)).toEqual([
      `git-config-paths modified scripts/check.js: ${why}`,
      `git-config-paths created tools/package.json: ${why}`,
    ]);
  });

  it("a config's command and its args are one command line (node --test test/ in an MCP config or a task, a server's ./docs/ folder, an exec-form initializeCommand are data); an interpreter's operand without a `/` is a path (node check)", () => {
    const dir = tree({
      "test/a.test.js": "",
      "docs/a.md": "",
      "check.js": "",
      ".mcp.json": JSON.stringify({
        mcpServers: {
          t: { command: "node", args: ["--test", "test/"] },
          fs: { command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "./docs/"] },
        },
      }),
      ".vscode/tasks.json": JSON.stringify({ tasks: [{ command: "python3", args: ["-m", "pytest", "test/"] }] }),
      ".devcontainer.json": JSON.stringify({ initializeCommand: { a: ["node", "--test", "test/"], b: "node check" } }),
    });
    expect(namedScriptTargets([dir]).map((t) => `${t.key}: ${path.relative(dir, t.path)}`)).toEqual([
      // A word with a `/` that names nothing is guarded as before: the run must not create it.
      "MCP server command: @modelcontextprotocol/server-filesystem",
      ...["", ...RESOLVED].map((e) => `Dev Container initializeCommand: check${e}`),
    ]);
  });
});
