// Which folders below a tree's top are read for what their configs name (config-folders.ts).
import { describe, expect, it } from "vitest";
import {
  ConfigFolders,
  configFoldersOf,
  isConfigName,
  MAX_CONFIG_FOLDERS,
} from "../../src/workspace/config-folders.js";

describe("config folders", () => {
  it("knows the names the environment, hook, agent and editor readers read at a folder's top", () => {
    for (const name of [".envrc", ".tool-versions", "mise.toml", "mise.dev.toml", ".mise.ci.local.toml", ".mise"])
      expect(isConfigName(name), name).toBe(true);
    for (const name of [".husky", ".pre-commit-config.yaml", "lefthook.yml", ".lefthook-local.json", ".vscode"])
      expect(isConfigName(name), name).toBe(true);
    for (const name of [".claude", ".mcp.json", ".cursor", "opencode.json", ".devcontainer", ".devcontainer.json"])
      expect(isConfigName(name), name).toBe(true);
    for (const name of ["README.md", "package.json", "src", ".envrc.local", "mise.toml.bak", "vscode"])
      expect(isConfigName(name), name).toBe(false);
  });

  it("takes each folder once, never the top, nothing in node_modules or a .git", () => {
    const folders = configFoldersOf(
      [
        ".envrc",
        "packages",
        "packages/web/.envrc",
        "packages/web/.vscode",
        "packages/web/.vscode/tasks.json",
        "packages/api/src/index.ts",
        "packages/api/.husky",
        "node_modules/left-pad/.envrc",
        "vendor/node_modules/x/.mcp.json",
        "lib/.git/.envrc",
        "sub/.git",
      ].map((p) => ({ path: p })),
    );
    expect(folders).toEqual(["packages/web", "packages/api"]);
  });

  it("reads at most MAX_CONFIG_FOLDERS folders", () => {
    const found = new ConfigFolders();
    for (let i = 0; i < MAX_CONFIG_FOLDERS + 5; i++) found.consider(`p${i}/.envrc`);
    expect(found.folders).toHaveLength(MAX_CONFIG_FOLDERS);
    expect(found.folders.at(-1)).toBe(`p${MAX_CONFIG_FOLDERS - 1}`);
  });
});
