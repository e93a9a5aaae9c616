import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  envrcPathFolders,
  hostCommandNames,
  misePathFolders,
  pathSourceTargets,
} from "../../src/workspace/path-sources.js";

describe("envrcPathFolders", () => {
  it("reads PATH_add, path_add PATH and the layouts that put a folder on PATH; comments and other expansions are left out", () => {
    const text = [
      "# PATH_add commented",
      'PATH_add bin "$PWD/scripts" ${PWD}/tools # trailing comment',
      "path_add PATH vendor/bin",
      "path_add MANPATH man",
      "layout node",
      "layout python3",
      "PATH_add $HOME/elsewhere",
      "export FOO=1",
    ].join("\n");
    expect(envrcPathFolders(text)).toEqual([
      { key: "direnv PATH_add", folder: "bin" },
      { key: "direnv PATH_add", folder: "scripts" },
      { key: "direnv PATH_add", folder: "tools" },
      { key: "direnv path_add PATH", folder: "vendor/bin" },
      { key: "direnv layout node", folder: "node_modules/.bin", commandsOnly: true },
      { key: "direnv layout python3", folder: ".direnv" },
    ]);
  });
});

describe("misePathFolders", () => {
  it("reads _.path in [env] (a string or an array over lines) and path in [env._]; {{config_root}} is the file's folder", () => {
    expect(misePathFolders('[tools]\nnode = "20"\n[env]\n_.path = "./bin"\nFOO = "x"\n')).toEqual(["./bin"]);
    expect(misePathFolders("[env]\n_.path = [\n  \"{{config_root}}/tools\",\n  'scripts',\n]\n")).toEqual([
      "tools",
      "scripts",
    ]);
    expect(misePathFolders('[env._]\npath = ["x/bin"]\n')).toEqual(["x/bin"]);
    expect(misePathFolders('[tools]\n_.path = "not-env"\n')).toEqual([]);
  });
});

describe("pathSourceTargets", () => {
  it("resolves the folders against the folder of the file, from .envrc and every mise file at the top; a symlinked .envrc is not read", () => {
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
    ]);
  });
});

describe("layout node: only the host's command names in node_modules/.bin", () => {
  it("guards node_modules/.bin/<name> for each host command, not the folder, so npm install may write the rest", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "path-sources-"));
    fs.writeFileSync(path.join(dir, ".envrc"), "layout node\nPATH_add bin\n");
    const envrc = path.join(dir, ".envrc");
    const key = "direnv layout node (a host command's name)";
    expect(pathSourceTargets([dir], new Set(["git", "ls"]))).toEqual([
      { path: path.join(dir, "node_modules/.bin/git"), key, source: envrc },
      { path: path.join(dir, "node_modules/.bin/ls"), key, source: envrc },
      { path: path.join(dir, "bin"), key: "direnv PATH_add", source: envrc },
    ]);
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
