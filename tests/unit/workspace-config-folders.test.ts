// Which folders below a tree's top are read for what their configs name (config-folders.ts).
import { describe, expect, it } from "vitest";
import { isSandboxRunError } from "../../src/errors.js";
import {
  ConfigFolders,
  configFolderOf,
  configFoldersOf,
  MAX_CONFIG_FOLDERS,
} from "../../src/workspace/config-folders.js";

describe("config folders", () => {
  it("knows the files the environment, hook, agent and editor readers read at a folder's top, by their whole path", () => {
    const folders = {
      "p/.envrc": "p",
      "p/q/.tool-versions": "p/q",
      "p/mise.toml": "p",
      "p/mise.dev.toml": "p",
      "p/.mise.ci.local.toml": "p",
      "p/.config/mise.toml": "p",
      "p/.config/mise/config.toml": "p",
      "p/.config/mise/conf.d/x.toml": "p",
      "p/mise/config.ci.toml": "p",
      "p/.husky/pre-commit": "p",
      "p/.pre-commit-config.yaml": "p",
      "p/lefthook.yml": "p",
      "p/.lefthook-local.json": "p",
      "p/.vscode/tasks.json": "p",
      "p/.claude/settings.json": "p",
      "p/.mcp.json": "p",
      "p/.kiro/settings/mcp.json": "p",
      "p/opencode.json": "p",
      "p/.devcontainer.json": "p",
      "p/.devcontainer/devcontainer.json": "p",
      "p/.devcontainer/py/devcontainer.json": "p",
      ".envrc": "",
    };
    for (const [file, folder] of Object.entries(folders)) expect(configFolderOf(file), file).toBe(folder);
    // A plain .config/, mise/ or .vscode/ folder, or a file beside the configs, is no config.
    for (const file of ["p/.config/settings.json", "p/mise/notes.txt", "p/.vscode/settings.json", "p/.envrc.local"])
      expect(configFolderOf(file), file).toBeUndefined();
    for (const file of ["p/package.json", "p/src", "p/.husky/_/husky.sh", "p/README.md", "p/mise.toml.bak"])
      expect(configFolderOf(file), file).toBeUndefined();
  });

  it("takes each folder once, never the top, nothing in node_modules or a .git", () => {
    const folders = configFoldersOf(
      "/ws",
      [
        ".envrc",
        "packages",
        "packages/web/.envrc",
        "packages/web/.vscode",
        "packages/web/.vscode/tasks.json",
        "packages/api/src/index.ts",
        "packages/api/.husky/pre-commit",
        "node_modules/left-pad/.envrc",
        "vendor/node_modules/x/.mcp.json",
        "lib/.git/.envrc",
        "sub/.git",
      ].map((p) => ({ path: p })),
    );
    expect(folders).toEqual(["packages/web", "packages/api"]);
  });

  it("a folder a config path passes through that is a link (a package's .claude linked to a shared one) makes its parent a config folder; a real empty one does not", () => {
    const entries = [
      { path: "packages/web/.claude", kind: "symlink" },
      { path: "packages/api/.config/mise", kind: "symlink" },
      { path: "packages/ui/.devcontainer/py", kind: "symlink" },
      { path: "packages/db/.vscode", kind: "directory" },
      { path: "packages/cli/src", kind: "symlink" },
    ];
    expect(configFoldersOf("/ws", entries)).toEqual(["packages/web", "packages/api", "packages/ui"]);
  });

  it("reads at most MAX_CONFIG_FOLDERS folders, and refuses the run past them (1,000 plain .config folders count for nothing)", () => {
    const found = new ConfigFolders();
    for (let i = 0; i < 2000; i++) found.consider(`decoy${i}/.config/settings.json`);
    for (let i = 0; i < MAX_CONFIG_FOLDERS; i++) found.consider(`p${i}/.envrc`);
    expect(found.folders).toHaveLength(MAX_CONFIG_FOLDERS);
    expect(found.overflow).toBe(false);
    found.consider("one-more/.envrc");
    expect(found.overflow).toBe(true);
    const entries = Array.from({ length: MAX_CONFIG_FOLDERS + 1 }, (_, i) => ({ path: `p${i}/.envrc` }));
    let refused: unknown;
    try {
      configFoldersOf("/ws", entries);
    } catch (error) {
      refused = error;
    }
    expect(isSandboxRunError(refused) && refused.code).toBe("usage");
    expect((refused as Error).message).toMatch(
      /^\/ws holds environment, hook, agent or editor configs in more than 1000 folders \(p0, p1, p2, \.\.\.; the 1001st: p1000\)/,
    );
  });
});
