// path-protection.ts judges the paths a git pointer names (an index entry, a path a commit on a
// ref changes). It must refuse what the worktree judge (workspace-rules.ts) refuses: a blob, link
// or gitlink where a parent of a guarded path is, which the host's checkout turns into a link to a
// folder the run filled (review, session 26: `tools -> evil` with `evil/bin/git` under
// `PATH_add tools/bin` passed git-refs).
import { describe, expect, it } from "vitest";
import { pathProtection } from "../../src/workspace/path-protection.js";
import { evaluateWorkspaceRules } from "../../src/workspace/workspace-rules.js";

const LINK = 0o120000;
const BLOB = 0o100644;
const GITLINK = 0o160000;
const TREE = 0o040000;
const config = {
  configPaths: new Map([["tools/bin", "direnv PATH_add"]]),
  commandFolders: new Map([["web/node_modules/.bin", { why: "direnv layout node" }]]),
  hostCommands: new Set(["git"]),
};

describe("path protection: the parents of guarded paths", () => {
  it("a link, blob or gitlink where a config path's parent is: refused with the worktree judge's words; a tree there, a deletion, other paths pass", () => {
    const protection = pathProtection(config);
    const words = "a parent of tools/bin (direnv PATH_add) is no longer a directory";
    for (const mode of [LINK, BLOB, GITLINK])
      expect(protection("tools", mode)).toEqual({ rule: "git-config-paths", why: words });
    for (const mode of [TREE, 0, undefined]) expect(protection("tools", mode)).toBeUndefined();
    expect(protection("tool", LINK)).toBeUndefined();
    expect(protection("tools/bin2", LINK)).toBeUndefined();
    expect(pathProtection({ ...config, disabled: ["git-config-paths"] })("tools", LINK)).toBeUndefined();
    // The worktree judge says the same for the same change (one table for both).
    const worktree = evaluateWorkspaceRules(
      [
        {
          path: "tools",
          before: { kind: "directory", mode: 0o40755, size: 0 },
          after: { kind: "symlink", mode: 0o120777, size: 4 },
        },
      ],
      config,
    );
    expect(worktree.map((v) => [v.rule, v.detail])).toEqual([["git-config-paths", words]]);
  });

  it("the parents of a command folder (node_modules as a link to a folder holding .bin/git): refused", () => {
    const protection = pathProtection(config);
    for (const path of ["web", "web/node_modules", "web/node_modules/.bin"])
      expect(protection(path, LINK)).toEqual({
        rule: "git-config-paths",
        why: "a parent of web/node_modules/.bin/<a host command> (direnv layout node) is no longer a directory",
      });
  });

  it("a built-in two-level name's parent (.config as a link): refused under that rule", () => {
    expect(pathProtection({})("home/.config", LINK)).toEqual({
      rule: ".config/mise.toml",
      why: "a parent of home/.config/mise.toml is no longer a directory",
    });
    expect(pathProtection({})("home/.configs", LINK)).toBeUndefined();
  });
});
