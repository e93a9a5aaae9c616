import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { commandFoldersInTree, guardsCommand, targetsInTree } from "../../src/workspace/git-config-paths.js";
import {
  envrcTargets,
  hostCommandNames,
  miseTargets,
  pathSourceTargets,
  toolVersionsTargets,
} from "../../src/workspace/path-sources.js";

describe("envrcTargets", () => {
  it("reads PATH_add, path_add PATH and the layouts that put a folder on PATH; comments and other expansions are left out", () => {
    const text = [
      "# PATH_add commented",
      'PATH_add bin "$PWD/scripts" ${PWD}/tools # trailing comment',
      "path_add PATH vendor/bin",
      "path_add MANPATH man",
      "layout node",
      "layout python3",
      "PATH_add $HOME/elsewhere",
      "PATH_add ~/bin",
      "export FOO=1",
    ].join("\n");
    expect(envrcTargets(text)).toEqual([
      { key: "direnv PATH_add", target: "bin" },
      { key: "direnv PATH_add", target: "scripts" },
      { key: "direnv PATH_add", target: "tools" },
      // A folder a package manager fills: only the host's command names are guarded there.
      { key: "direnv path_add PATH", target: "vendor/bin", commandsOnly: true },
      { key: "direnv layout node", target: "node_modules/.bin", commandsOnly: true },
      { key: "direnv layout python3", target: ".direnv" },
    ]);
  });

  it("reads what an .envrc sources and loads, which direnv runs again on cd while the .envrc is unchanged", () => {
    const text = [
      "source_env .envrc.local",
      "source_env_if_exists config",
      "source scripts/env.sh",
      ". ./more.sh",
      "dotenv",
      "dotenv_if_exists .env.local",
      "use nix",
      "use flake",
      "use vim",
      "load_prefix vendor",
      "layout go",
      "layout ruby",
      "layout php",
      "watch_file never-run.txt",
    ].join("\n");
    expect(envrcTargets(text)).toEqual([
      { key: "direnv source_env", target: ".envrc.local", sourced: "source_env" },
      { key: "direnv source_env", target: ".envrc.local/.envrc", sourced: "source_env" },
      { key: "direnv source_env_if_exists", target: "config", sourced: "source_env" },
      { key: "direnv source_env_if_exists", target: "config/.envrc", sourced: "source_env" },
      { key: "direnv source", target: "scripts/env.sh", sourced: "source" },
      { key: "direnv .", target: "./more.sh", sourced: "source" },
      { key: "direnv dotenv", target: ".env" },
      { key: "direnv dotenv_if_exists", target: ".env.local" },
      { key: "direnv dotenv_if_exists", target: ".env.local/.env" },
      { key: "direnv use nix", target: "shell.nix" },
      { key: "direnv use nix", target: "default.nix" },
      { key: "direnv use flake", target: "flake.nix" },
      { key: "direnv use flake", target: "flake.lock" },
      { key: "direnv use vim", target: ".vimrc.local" },
      { key: "direnv load_prefix", target: "vendor/bin", commandsOnly: true },
      { key: "direnv load_prefix", target: "vendor/sbin" },
      { key: "direnv layout go", target: "bin" },
      { key: "direnv layout go", target: ".direnv" },
      { key: "direnv layout ruby", target: ".direnv" },
      { key: "direnv layout php", target: "vendor/bin", commandsOnly: true },
    ]);
  });
});

describe("PATH set by hand, and path: tool versions (review, session 24)", () => {
  it("export PATH=... and PATH=... in an .envrc: every folder but the PATH it extends; quoted and bare parts make one word", () => {
    expect(
      envrcTargets(
        'export PATH="$PWD/scripts/bin:$PATH"\nPATH=tools:"${PWD}"/more:${PATH}\nexport FOO=1 PATH=x:$PATH\n',
      ),
    ).toEqual([
      { key: "direnv PATH=", target: "scripts/bin" },
      { key: "direnv PATH=", target: "tools" },
      { key: "direnv PATH=", target: "more" },
      { key: "direnv PATH=", target: "x" },
    ]);
  });

  it("a path: version in mise's [tools] and in .tool-versions is a folder whose bin/ goes first on PATH", () => {
    expect(miseTargets('[tools]\nnode = "path:./toolchain/node"\npython = "3.12"\n')).toEqual([
      { key: "mise [tools] path:", target: "./toolchain/node" },
    ]);
    expect(toolVersionsTargets("nodejs 20.1.0\nrust path:vendor/rust system\n# go path:commented\n")).toEqual([
      { key: ".tool-versions path:", target: "vendor/rust" },
    ]);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "path-sources-"));
    fs.writeFileSync(path.join(dir, ".tool-versions"), "rust path:vendor/rust\n");
    fs.mkdirSync(path.join(dir, "mise"));
    fs.writeFileSync(path.join(dir, "mise/config.toml"), '[env]\n_.path = "bin"\n');
    expect(pathSourceTargets([dir]).map((t) => [path.relative(dir, t.path), t.key])).toEqual([
      ["bin", "mise [env] _.path"],
      ["vendor/rust", ".tool-versions path:"],
    ]);
  });
});

describe("read as direnv and mise read them (review, session 24)", () => {
  it("commands after && and ; and in if/then, a backslash-continued line, a # inside a word, backslash escapes", () => {
    const text = [
      "[ -f .envrc.local ] && source_env .envrc.local",
      "if has nix; then use nix; fi",
      "PATH_add \\",
      "  bin",
      "PATH_add tools#1 b\\in # comment",
    ].join("\n");
    expect(envrcTargets(text).map((t) => `${t.key} ${t.target}`)).toEqual([
      "direnv source_env .envrc.local",
      "direnv source_env .envrc.local/.envrc",
      "direnv use nix shell.nix",
      "direnv use nix default.nix",
      "direnv PATH_add bin",
      "direnv PATH_add tools#1",
      "direnv PATH_add bin",
    ]);
  });

  it("a mise table header with a comment, top-level dotted keys, and per-environment files", () => {
    expect(miseTargets('[env] # the project\n_.source = "scripts/env.sh"\n').map((t) => t.target)).toEqual([
      "scripts/env.sh",
    ]);
    expect(miseTargets('env._.source = "a.sh"\nhooks.enter = "./b.sh"\n').map((t) => t.target)).toEqual([
      "a.sh",
      "./b.sh",
    ]);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "path-sources-"));
    fs.writeFileSync(path.join(dir, "mise.dev.toml"), '[env]\n_.source = "dev.sh"\n');
    fs.mkdirSync(path.join(dir, ".config/mise/conf.d"), { recursive: true });
    fs.writeFileSync(path.join(dir, ".config/mise/conf.d/x.toml"), '[env]\n_.path = "cbin"\n');
    expect(
      pathSourceTargets([dir])
        .map((t) => path.relative(dir, t.path))
        .sort(),
    ).toEqual(["cbin", "dev.sh"]);
  });

  it("one pass over what it reads, and one entry per folder however often it is named (a 256 KiB line of quotes took 33 s; a file repeating layout node, gigabytes)", () => {
    expect(envrcTargets(`PATH_add ${'"\\ '.repeat(1 << 16)}`)).toHaveLength(1);
    expect(miseTargets(`[env]\n_.path = [\n${'"a",\n'.repeat(1 << 15)}]\n`)).toHaveLength(1 << 15);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "path-sources-"));
    fs.writeFileSync(path.join(dir, ".envrc"), "layout node\n".repeat(20_000));
    expect(pathSourceTargets([dir])).toHaveLength(1);
  });
});

describe("read again (review of the fixes, session 24)", () => {
  it("a here-document's body is data, ANSI-C quotes, functions and groups, builtin and eval", () => {
    const text = [
      "cat <<EOF > notes.txt",
      "Don't forget",
      "EOF",
      "source_env .envrc.local",
      "x=$'it\\'s'; PATH_add bin",
      "function f { source_env a; }",
      "g() { source_env b; }",
      "builtin source c.sh",
      'eval "dotenv d.env"',
      "cat <<-'END'",
      "\tit's data",
      "\tEND",
      "use flake",
    ].join("\n");
    expect(envrcTargets(text).map((t) => `${t.key} ${t.target}`)).toEqual([
      "direnv source_env .envrc.local",
      "direnv source_env .envrc.local/.envrc",
      "direnv PATH_add bin",
      "direnv source_env a",
      "direnv source_env a/.envrc",
      "direnv source_env b",
      "direnv source_env b/.envrc",
      "direnv source c.sh",
      "direnv dotenv d.env",
      "direnv dotenv d.env/.env",
      "direnv use flake flake.nix",
      "direnv use flake flake.lock",
    ]);
  });

  it("eval's words read once however many evals (eval eval … re-read the line per eval, then overflowed the stack); shifts are no here-documents", () => {
    const text = `${"eval ".repeat(20_000)}source_env x\n(( n <<= 1 ))\nPATH_add bin\ncat<<EOF\nit's\nEOF\nPATH_add more\n`;
    expect(envrcTargets(text).map((t) => t.target)).toEqual(["x", "x/.envrc", "bin", "more"]);
  });

  it("a venv's own python and pip are not guarded, a host command's name is; a file naming more than 10,000 paths refuses the run (a shared cap let one repository's .envrc switch off every later tree's)", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "path-sources-"));
    fs.writeFileSync(path.join(dir, "mise.toml"), '[env]\n_.python.venv = ".venv"\n');
    const targets = pathSourceTargets([dir]);
    expect(targets.map((t) => path.relative(dir, t.path))).toEqual([".venv/bin"]);
    const folder = commandFoldersInTree(dir, targets).get(".venv/bin")!;
    // What making the venv writes (activate and deactivate are on PATH under pyenv-virtualenv) is not guarded.
    const host = new Set(["python3", "pip", "git", "activate", "deactivate", "activate.fish", "pydoc3", "pytest"]);
    expect([...host].filter((name) => guardsCommand(folder, name, host))).toEqual(["git", "pytest"]);
    const many = fs.mkdtempSync(path.join(os.tmpdir(), "path-sources-"));
    fs.writeFileSync(path.join(many, ".envrc"), Array.from({ length: 10_001 }, (_, i) => `PATH_add d${i}`).join("\n"));
    expect(() => pathSourceTargets([dir, many])).toThrow(/names more than 10000 paths/);
  });
});

describe("miseTargets", () => {
  it("reads _.path in [env] (a string or an array over lines) and path in [env._]; {{config_root}} is the file's folder", () => {
    const paths = (text: string) => miseTargets(text).map((t) => t.target);
    expect(paths('[tools]\nnode = "20"\n[env]\n_.path = "./bin"\nFOO = "x"\n')).toEqual(["./bin"]);
    expect(paths("[env]\n_.path = [\n  \"{{config_root}}/tools\",\n  'scripts',\n]\n")).toEqual(["tools", "scripts"]);
    expect(paths('[env._]\npath = ["x/bin"]\n')).toEqual(["x/bin"]);
    expect(paths('[tools]\n_.path = "not-env"\n')).toEqual([]);
  });

  it("reads the scripts and env files mise runs on cd, the venv it puts on PATH and the paths in [hooks] and [[watch_files]] commands", () => {
    const text = [
      "[env]",
      '_.source = "./scripts/env.sh"',
      '_.file = [".env", "{{config_root}}/.env.json"]',
      '_.python.venv = { path = ".venv", create = true }',
      'NAME = "./not-a-path"',
      "[env._.python]",
      'venv = "venv2"',
      "[hooks]",
      'enter = "bash ./hooks/enter.sh --quiet"',
      'leave = ["echo bye", "tools/leave"]',
      "[tasks.build]",
      'run = "./build.sh"',
      "[[watch_files]]",
      'patterns = ["src/**/*.rs"]',
      'run = "./scripts/gen.sh"',
    ].join("\n");
    expect(miseTargets(text)).toEqual([
      { key: "mise [env] _.source", target: "./scripts/env.sh" },
      { key: "mise [env] _.file", target: ".env" },
      { key: "mise [env] _.file", target: ".env.json" },
      // Making the venv writes its own python and pip there: not guarded.
      {
        key: "mise [env] _.python.venv",
        target: ".venv/bin",
        commandsOnly: true,
        exceptNames: expect.any(RegExp),
      },
      {
        key: "mise [env] _.python.venv",
        target: "venv2/bin",
        commandsOnly: true,
        exceptNames: expect.any(RegExp),
      },
      { key: "mise [hooks]", target: "./hooks/enter.sh" },
      { key: "mise [hooks]", target: "tools/leave" },
      // Run at the next prompt after a watched file changed.
      { key: "mise [[watch_files]] run", target: "./scripts/gen.sh" },
    ]);
  });
});

describe("pathSourceTargets", () => {
  it("resolves the folders against the folder of the file, from .envrc and every mise file at the top; a symlinked .envrc is read as direnv reads it", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "path-sources-"));
    fs.writeFileSync(path.join(dir, ".envrc"), "PATH_add bin\n");
    fs.mkdirSync(path.join(dir, ".mise"));
    fs.writeFileSync(path.join(dir, ".mise/config.toml"), '[env]\n_.path = "tools"\n');
    const other = fs.mkdtempSync(path.join(os.tmpdir(), "path-sources-"));
    fs.writeFileSync(path.join(other, "elsewhere"), "PATH_add evil\n");
    fs.symlinkSync(path.join(other, "elsewhere"), path.join(other, ".envrc"));
    expect(pathSourceTargets([dir, other])).toEqual([
      { path: path.join(dir, "bin"), key: "direnv PATH_add", source: path.join(dir, ".envrc") },
      { path: path.join(dir, "tools"), key: "mise [env] _.path", source: path.join(dir, ".mise/config.toml") },
      { path: path.join(other, "evil"), key: "direnv PATH_add", source: path.join(other, ".envrc") },
    ]);
  });

  it("follows the files an .envrc sources, as they were: source_env resolves in the sourced file's folder, source in the .envrc's; a cycle ends", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "path-sources-"));
    fs.mkdirSync(path.join(dir, "env"));
    fs.writeFileSync(path.join(dir, ".envrc"), "source_env env/local.sh\nsource scripts/env.sh\n");
    fs.writeFileSync(path.join(dir, "env/local.sh"), "PATH_add bin\ndotenv\nsource_env ../.envrc\n");
    fs.mkdirSync(path.join(dir, "scripts"));
    fs.writeFileSync(path.join(dir, "scripts/env.sh"), "PATH_add tools\n");
    const found = pathSourceTargets([dir]).map((t) => [
      path.relative(dir, t.path),
      t.key,
      path.relative(dir, t.source),
    ]);
    expect(found).toEqual([
      ["env/local.sh", "direnv source_env", ".envrc"],
      ["env/bin", "direnv PATH_add", "env/local.sh"],
      ["env/.env", "direnv dotenv", "env/local.sh"],
      [".envrc", "direnv source_env", "env/local.sh"],
      [".envrc/.envrc", "direnv source_env", "env/local.sh"],
      ["env/local.sh/.envrc", "direnv source_env", ".envrc"],
      ["scripts/env.sh", "direnv source", ".envrc"],
      ["tools", "direnv PATH_add", "scripts/env.sh"],
    ]);
  });
});

describe("layout node: only the host's command names in node_modules/.bin", () => {
  it("guards node_modules/.bin/<name> for each host command, not the folder, so npm install may write the rest: one entry for the folder, judged by name", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "path-sources-"));
    fs.writeFileSync(path.join(dir, ".envrc"), "layout node\nPATH_add bin\n");
    const envrc = path.join(dir, ".envrc");
    const key = "direnv layout node (a host command's name)";
    const targets = pathSourceTargets([dir]);
    expect(targets).toEqual([
      { path: path.join(dir, "node_modules/.bin"), key, source: envrc, commands: {} },
      { path: path.join(dir, "bin"), key: "direnv PATH_add", source: envrc },
    ]);
    const folders = commandFoldersInTree(dir, targets);
    expect([...folders.keys()]).toEqual(["node_modules/.bin"]);
    expect([...targetsInTree(dir, targets).keys()]).toEqual(["bin"]);
    const folder = folders.get("node_modules/.bin")!;
    const host = new Set(["git", "ls"]);
    expect(["git", "ls", "eslint"].map((name) => guardsCommand(folder, name, host))).toEqual([true, true, false]);
  });

  it("reads the names of PATH's absolute folders and the system folders, never of a folder inside a lent tree", () => {
    const tree = fs.mkdtempSync(path.join(os.tmpdir(), "path-sources-tree-"));
    fs.mkdirSync(path.join(tree, "node_modules/.bin"), { recursive: true });
    fs.writeFileSync(path.join(tree, "node_modules/.bin/repo-tool"), "");
    const tools = fs.mkdtempSync(path.join(os.tmpdir(), "path-sources-tools-"));
    fs.writeFileSync(path.join(tools, "my-host-tool"), "");
    const names = hostCommandNames(`${tools}:relative/bin:${path.join(tree, "node_modules/.bin")}`, [tree]);
    expect(names.has("my-host-tool")).toBe(true);
    expect(names.has("repo-tool")).toBe(false);
    // /bin/sh is there on every Linux host, whatever PATH says.
    expect(hostCommandNames("", []).has("sh")).toBe(true);
  });
});
