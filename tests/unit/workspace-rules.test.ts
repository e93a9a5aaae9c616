// The pure rule function: pairs of (path, facts before, facts after) in walk order in, violations
// and restore steps out. The same function judges a returned tar in copy mode, so these cases
// are written as entry lists, with no filesystem.
import crypto from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  builtinProtectionOf,
  gitPathAllowed,
  hostRunReportOf,
  outwardLinkWhy,
  trickyNameReport,
} from "../../src/workspace/builtin-protections.js";
import { comparePaths } from "../../src/workspace/fd-walk.js";
import { leadsOut, OutwardLinks, textLeadsOut } from "../../src/workspace/outward-links.js";
import {
  type EntryFacts,
  type EntryPair,
  evaluateWorkspaceRules,
  RestorePlan,
  type RuleConfig,
  RuleEvaluator,
} from "../../src/workspace/workspace-rules.js";
import { turnsDuring } from "../support/event-loop-turns.js";

const dir = (mode = 0o755, extra: Partial<EntryFacts> = {}): EntryFacts => ({
  kind: "directory",
  mode: 0o040000 | mode,
  size: 4096,
  ...extra,
});
const file = (hash: string, mode = 0o644): EntryFacts => ({ kind: "file", mode: 0o100000 | mode, size: 1, hash });
const link = (target: string): EntryFacts => ({ kind: "symlink", mode: 0o120777, size: target.length, hash: target });

/** A tree as path -> facts; "" is the root. */
type Tree = Record<string, EntryFacts>;

const REPO: Tree = {
  "": dir(),
  ".git": dir(0o755, { gitLike: true }),
  ".git/HEAD": file("head"),
  ".git/config": file("config"),
  ".git/description": file("desc"),
  ".git/hooks": dir(),
  ".git/hooks/pre-commit.sample": file("sample"),
  ".git/index": file("index"),
  ".git/info": dir(),
  ".git/info/exclude": file("exclude"),
  ".git/objects": dir(),
  ".git/objects/ab": dir(),
  ".git/objects/ab/cdef": file("obj"),
  ".git/refs": dir(),
  ".git/refs/heads": dir(),
  ".git/refs/heads/main": file("main"),
  src: dir(),
  "src/a.ts": file("a"),
};

/** Contents that are not text, by the `hash` that stands for them: an empty git index (version 2, sha1). */
const BINARY = new Map<string, Buffer>([
  [
    "empty-index",
    (() => {
      const header = Buffer.from("DIRC\0\0\0\x02\0\0\0\0", "latin1");
      return Buffer.concat([header, crypto.createHash("sha1").update(header).digest()]);
    })(),
  ],
]);

/** The pairs of two trees in walk order; a file's content is its `hash` (these trees have no other). */
function pairs(before: Tree, after: Tree): EntryPair[] {
  const paths = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort(comparePaths);
  return paths.map((path) => {
    const a = after[path];
    const pair: EntryPair = { path, before: before[path], after: a };
    if (a?.kind === "file") pair.content = () => BINARY.get(a.hash ?? "") ?? Buffer.from(a.hash ?? "");
    return pair;
  });
}

/** Object ids as git writes them. */
const OID = (c: string) => c.repeat(40);

function judge(after: Tree, config: RuleConfig = {}, before: Tree = REPO) {
  const violations = evaluateWorkspaceRules(pairs(before, after), config);
  const plan = new RestorePlan();
  for (const v of violations) plan.add(v.restore);
  return {
    found: violations.map((v) => `${v.rule} ${v.change} ${v.path}`),
    steps: plan.ordered(),
  };
}

const withChanges = (changes: Record<string, EntryFacts | undefined>, base: Tree = REPO): Tree => {
  const out: Tree = { ...base };
  for (const [p, f] of Object.entries(changes)) {
    if (f) out[p] = f;
    else delete out[p];
  }
  return out;
};

describe("git directories: only what ordinary git work writes may change", () => {
  it("allows a commit: objects, refs, logs, index, HEAD, ORIG_HEAD, COMMIT_EDITMSG, packed-refs", () => {
    const after = withChanges({
      ".git/objects/12": dir(),
      ".git/objects/12/3456": file("new-object", 0o444),
      ".git/refs/heads/main": file(`${OID("a")}\n`),
      ".git/refs/heads/topic": file(`${OID("b")}\n`),
      ".git/logs": dir(),
      ".git/logs/HEAD": file("log"),
      ".git/index": file("empty-index"),
      ".git/HEAD": file("ref: refs/heads/topic\n"),
      ".git/ORIG_HEAD": file(`${OID("c")}\n`),
      ".git/COMMIT_EDITMSG": file("msg"),
      ".git/packed-refs": file(
        `# pack-refs with: peeled fully-peeled sorted \n${OID("d")} refs/tags/v1\n^${OID("e")}\n`,
      ),
      ".git/index.lock": file("empty-index"),
      "src/a.ts": file("a2"),
      "src/b.ts": file("b"),
    });
    expect(judge(after).found).toEqual([]);
  });

  it.each([
    [".git/config", file("fsmonitor")],
    [".git/commondir", file("../evil")],
    [".git/config.worktree", file("fsmonitor")],
    [".git/info/attributes", file("* filter=x")],
    [".git/info/exclude", file("evil.sh")],
    [".git/hooks/pre-commit", file("#!/bin/sh")],
    [".git/objects/info/alternates", file("/elsewhere")],
    [`.git/refs/replace/${OID("b")}`, file(`${OID("c")}\n`)],
    [".git/rebase-merge", dir()],
    [".git/description", undefined],
  ])("%s changed: a git-metadata violation that reverts the whole .git", (path, facts) => {
    const after = withChanges({
      [path]: facts,
      ...(path.startsWith(".git/objects/info") ? { ".git/objects/info": dir() } : {}),
      ...(path.startsWith(".git/refs/replace") ? { ".git/refs/replace": dir() } : {}),
    });
    const { found, steps } = judge(after);
    expect(found).toContain(`git-metadata ${REPO[path] ? (facts ? "modified" : "deleted") : "created"} ${path}`);
    expect(steps).toEqual([{ action: "revert", path: ".git" }]);
  });

  it("judges a submodule's git directory (.git/modules/x) by the same rules, as its own git directory", () => {
    const before = withChanges({
      ".git/modules": dir(),
      ".git/modules/x": dir(0o755, { gitLike: true }),
      ".git/modules/x/HEAD": file("h"),
      ".git/modules/x/config": file("c"),
      ".git/modules/x/objects": dir(),
      ".git/modules/x/refs": dir(),
    });
    // Ordinary work in the submodule: fine (relative to its own git dir, not to .git).
    expect(judge(withChanges({ ".git/modules/x/HEAD": file(OID("f")) }, before), {}, before).found).toEqual([]);
    expect(judge(withChanges({ ".git/modules/x/config": file("evil") }, before), {}, before).found).toEqual([
      "git-metadata modified .git/modules/x/config",
    ]);
  });

  it("a .git directory replaced by a gitdir: file: the pointer and the lost config are violations; .git is reverted", () => {
    const after: Tree = { "": dir(), ".git": file("gitdir: evil"), src: dir(), "src/a.ts": file("a") };
    const { found, steps } = judge(after);
    expect(found).toContain("new-repositories modified .git");
    expect(found).toContain("git-metadata deleted .git/config");
    expect(steps).toEqual([{ action: "revert", path: ".git" }]);
  });

  it("a new nested repository (sub/.git, a bare repository, a .git file) is removed as a whole", () => {
    const after = withChanges({
      sub: dir(),
      "sub/.git": dir(0o755, { gitLike: true }),
      "sub/.git/config": file("fsmonitor"),
      "sub/.git/HEAD": file("h"),
      bare: dir(0o755, { gitLike: true }),
      "bare/HEAD": file("h"),
      "bare/config": file("c"),
      "bare/objects": dir(),
      "bare/refs": dir(),
      "other/.git": file("gitdir: ../bare"),
      other: dir(),
    });
    const { found, steps } = judge(after);
    expect(found).toEqual([
      "new-repositories created bare",
      "new-repositories created other/.git",
      "new-repositories created sub/.git",
    ]);
    expect(steps).toEqual([
      { action: "remove", path: "bare" },
      { action: "remove", path: "sub/.git" },
      { action: "remove", path: "other/.git" },
    ]);
  });

  it("an existing directory turned into a bare repository: the marker entries it gained are removed", () => {
    const before = withChanges({ data: dir(), "data/objects": dir(), "data/refs": dir() });
    const after = withChanges({ "data/HEAD": file("h"), data: dir(0o755, { gitLike: true }) }, before);
    const { found, steps } = judge(after, {}, before);
    expect(found).toEqual(["new-repositories created data/HEAD"]);
    expect(steps).toEqual([{ action: "remove", path: "data/HEAD" }]);
  });

  it("the allowed list is exact", () => {
    for (const p of [
      "HEAD",
      "index",
      "refs/heads/x",
      "logs/HEAD",
      "objects/pack/p.pack",
      "FETCH_HEAD",
      "lfs/objects/x",
    ])
      expect(gitPathAllowed(p), p).toBe(true);
    for (const p of ["config", "hooks/post-checkout", "info/attributes", "commondir", "modules/x/config", "gitdir"])
      expect(gitPathAllowed(p), p).toBe(false);
    expect(gitPathAllowed("objects/info/alternates")).toBe(false);
    expect(gitPathAllowed("config.lock")).toBe(false);
    expect(gitPathAllowed("HEAD.lock")).toBe(true);
  });
});

describe("directory modes", () => {
  it("a directory made group/world-writable or setgid is a violation; its mode is set back", () => {
    const after = withChanges({ ".git": dir(0o777, { gitLike: true }), src: dir(0o2755), new: dir(0o777) });
    const { found, steps } = judge(after);
    expect(found).toEqual(["directory-modes mode .git", "directory-modes mode new", "directory-modes mode src"]);
    expect(steps).toEqual(
      expect.arrayContaining([
        { action: "mode", path: ".git", mode: 0o755 },
        { action: "mode", path: "src", mode: 0o755 },
        { action: "mode", path: "new", mode: 0o755 },
      ]),
    );
  });

  it("a directory that already was world-writable is not a violation", () => {
    const before = withChanges({ tmp: dir(0o777) });
    expect(judge(withChanges({ "tmp/x": file("x") }, before), {}, before).found).toEqual([]);
  });
});

describe("built-in protections", () => {
  it("protect the listed names at any depth, case-insensitively, files and directories", () => {
    const after = withChanges({
      ".envrc": file("evil"),
      "src/deep": dir(),
      "src/deep/.BashRC": file("evil"),
      "src/.vscode": dir(),
      "src/.vscode/tasks.json": file("folderOpen"),
      ".claude": dir(),
      ".claude/commands": dir(),
      ".claude/commands/x.md": file("x"),
      ".claude/notes.md": file("hooks name scripts here too"),
      ".gitmodules": file("[submodule]"),
      ".mcp.json": file("{}"),
    });
    const { found, steps } = judge(after);
    expect(found).toEqual([
      ".claude/ created .claude",
      ".claude/ created .claude/commands",
      ".claude/ created .claude/commands/x.md",
      ".claude/ created .claude/notes.md",
      ".envrc created .envrc",
      ".gitmodules created .gitmodules",
      ".mcp.json created .mcp.json",
      ".vscode/ created src/.vscode",
      ".vscode/ created src/.vscode/tasks.json",
      ".bashrc created src/deep/.BashRC",
    ]);
    expect(steps.map((s) => `${s.action} ${s.path}`).sort()).toEqual([
      "remove .claude",
      "remove .envrc",
      "remove .gitmodules",
      "remove .mcp.json",
      "remove src/.vscode",
      "remove src/deep/.BashRC",
    ]);
  });

  it("an existing protected directory is reverted as a whole", () => {
    const before = withChanges({ ".vscode": dir(), ".vscode/settings.json": file("s") });
    const { steps } = judge(withChanges({ ".vscode/tasks.json": file("t") }, before), {}, before);
    expect(steps).toEqual([{ action: "revert", path: ".vscode" }]);
  });

  it("a policy turns one off only by naming it; other rules still hold below it", () => {
    const after = withChanges({ ".vscode": dir(), ".vscode/.envrc": file("x"), ".vscode/a.json": file("y") });
    expect(judge(after, { disabled: [".vscode/"] }).found).toEqual([".envrc created .vscode/.envrc"]);
    expect(judge(withChanges({ ".git/config": file("x") }), { disabled: ["git-metadata"] }).found).toEqual([]);
  });

  it("a protected name with trailing spaces, tabs or dots is protected (review: patch -p1 applied `.pre-commit-config.yaml ` as the protected file)", () => {
    for (const name of [
      ".pre-commit-config.yaml ",
      ".pre-commit-config.yaml\t",
      ".envrc.",
      "lefthook.yml  .",
      ".husky /pre-commit",
    ])
      expect(builtinProtectionOf(name, new Set()), JSON.stringify(name)).toBeDefined();
    expect(builtinProtectionOf("notes.txt ", new Set())).toBeUndefined();
  });

  it("a protected name in another case as a case-insensitive file system takes it (long s, dotless i, Kelvin sign, full-width letters) is protected; a host-run file too (review, session 25)", () => {
    const rule = (p: string) => builtinProtectionOf(p, new Set());
    expect(rule(".huſky/pre-commit")).toEqual({ rule: ".husky/", scope: ".huſky" });
    expect(rule(".vſcode/tasks.json")?.rule).toBe(".vscode/");
    expect(rule(".ıdea/workspace.xml")?.rule).toBe(".idea/");
    expect(rule("miſe.toml")?.rule).toBe("mise.toml");
    expect(rule(".ＥＮＶＲＣ")?.rule).toBe(".envrc");
    expect(rule("\u212Aeep.txt")).toBeUndefined();
    expect(hostRunReportOf(".npmrc")).toBeDefined();
    expect(hostRunReportOf("web/.env")?.name).toBe(".env");
    expect(hostRunReportOf("pkg/.npmrſ")).toBeUndefined();
    expect(hostRunReportOf("pkg/packaġe.json")).toBeUndefined();
    expect(hostRunReportOf("pkg/PAC\u212AAGE.JSON")?.name).toBe("package.json");
  });

  it("a virtualenv's files that VS Code's Python extension and shell plugins run without a project command are reported (review, session 27): pyvenv.cfg, activate scripts, the interpreter, site-packages .pth", () => {
    const name = (p: string) => hostRunReportOf(p)?.name;
    expect(name(".venv/pyvenv.cfg")).toBe("pyvenv.cfg");
    expect(name("api/.venv/bin/activate")).toBe("venv activate script");
    expect(name("venv/bin/activate.fish")).toBe("venv activate script");
    expect(name("env/Scripts/Activate.ps1")).toBe("venv activate script");
    expect(name(".venv/bin/python3.11")).toBe("venv interpreter");
    expect(name(".venv/lib/python3.11/site-packages/distutils-precedence.pth")).toBe("site-packages .pth");
    expect(name(".venv/lib/python3.11/site-packages/calc/ops.py")).toBeUndefined();
    expect(name(".venv/bin/pytest")).toBeUndefined();
    expect(name("docs/activate.md")).toBeUndefined();
    expect(name("node_modules/x/bin/activate")).toBeUndefined();
  });

  it("other toolchains' counterparts of .npmrc are reported (session 27): cargo, rustup, bazel, the Gradle and Maven wrappers, pip and uv", () => {
    const name = (p: string) => hostRunReportOf(p)?.name;
    expect(name(".cargo/config.toml")).toBe(".cargo/config.toml");
    expect(name("crates/x/.cargo/config")).toBe(".cargo/config.toml");
    expect(name("rust-toolchain.toml")).toBe("rust-toolchain.toml");
    expect(name("rust-toolchain")).toBe("rust-toolchain.toml");
    expect(name(".bazelrc")).toBe("bazel config");
    expect(name(".bazelversion")).toBe("bazel config");
    expect(name("gradle/wrapper/gradle-wrapper.properties")).toBe("gradle-wrapper.properties");
    expect(name(".mvn/wrapper/maven-wrapper.properties")).toBe(".mvn config");
    expect(name(".mvn/extensions.xml")).toBe(".mvn config");
    expect(name(".venv/pip.conf")).toBe("pip.conf / uv.toml");
    expect(name("uv.toml")).toBe("pip.conf / uv.toml");
    expect(name("config.toml")).toBeUndefined();
    expect(name("src/cargo/config.rs")).toBeUndefined();
    expect(name("gradle/libs.versions.toml")).toBeUndefined();
    // What is no folder at a reported folder's name: a link to a config under another name (review, session 27).
    expect(name(".cargo")).toBe(".cargo/config.toml (through a link at .cargo)");
    expect(name("gradle/wrapper")).toBe("gradle-wrapper.properties (through a link at wrapper)");
    expect(name(".venv")).toBe("venv activate script (through a link at .venv)");
    expect(name(".venv/lib/python3.11/site-packages")).toBe("site-packages .pth (through a link at site-packages)");
    expect(name("cargo")).toBeUndefined();
    expect(name(".venv/bin")).toBe("venv activate script (through a link at bin)");
    expect(name("venv-3.12/Scripts")).toBe("venv activate script (through a link at Scripts)");
    expect(name("tools/bin")).toBeUndefined();
    expect(name(".venv/lib/python3.12/site-packages/sitecustomize.py")).toBe("site-packages .pth");
  });

  it("what runs on cd, on a shell's start, at a commit or when an agent or editor opens the folder, past the first lists (review, session 24)", () => {
    const rule = (p: string) => builtinProtectionOf(p, new Set());
    // mise trusts a folder, not a file: every name it reads there.
    expect(rule("mise/config.toml")).toEqual({ rule: "mise/config.toml", scope: "mise/config.toml" });
    expect(rule("sub/mise/config.local.toml")?.scope).toBe("sub/mise/config.local.toml");
    expect(rule(".rtx.toml")?.rule).toBe(".rtx.toml");
    expect(rule("mise/config.ci.toml")).toEqual({ rule: "mise/config.*.toml", scope: "mise/config.ci.toml" });
    expect(rule(".miserc.toml")?.rule).toBe(".miserc.toml");
    expect(rule(".config/miserc.toml")?.rule).toBe("miserc.toml");
    expect(rule("mise.dev.toml")?.rule).toBe("mise.*.toml");
    expect(rule(".config/.mise.ci.local.toml")?.rule).toBe("mise.*.toml");
    // lefthook in every format it reads (review, session 24: a lefthook-local.json beside lefthook.yml ran at the next commit).
    for (const name of ["lefthook-local.json", ".lefthook.toml", "lefthook.jsonc"])
      expect(rule(name)?.rule).toBe("lefthook.{toml,json,jsonc}");
    // A folder used as HOME.
    for (const name of [".zshenv", ".zlogin", ".bash_login", ".bash_logout"]) expect(rule(name)?.rule).toBe(name);
    expect(rule(".config/git/config")).toEqual({ rule: ".config/git/", scope: ".config/git" });
    expect(rule(".config/fish/conf.d/x.fish")?.scope).toBe(".config/fish");
    // Hook managers' configs and agents' and editors' project folders.
    for (const name of [
      ".huskyrc",
      "husky.config.js",
      ".lintstagedrc.js",
      "lint-staged.config.mjs",
      "opencode.json",
      "crush.json",
      "hk.pkl",
      "captainhook.json",
      "rusty-hook.toml",
      ".lintstagedrc.mts",
    ])
      expect(rule(name)?.rule).toBe(name);
    for (const dir of [".opencode", ".helix", ".zed", ".qwen", ".roo", ".kiro", ".continue", ".amazonq"])
      expect(rule(`${dir}/x`)?.rule).toBe(`${dir}/`);
    // Not them: ordinary names that look alike.
    for (const name of ["mise.md", "src/mise/tasks/build", "mise/notes.toml", "config/git/config", "package.json"])
      expect(rule(name), name).toBeUndefined();
    expect(hostRunReportOf("web/package.json")?.name).toBe("package.json");
  });

  it("a FIFO, socket or device where host git reads .gitignore, .gitattributes or .mailmap is removed (its git status blocked on it); elsewhere it is the run's", () => {
    const fifo: EntryFacts = { kind: "fifo", mode: 0o010644, size: 0 };
    const { found, steps } = judge(
      withChanges({ src: dir(), "src/.gitignore": fifo, ".mailmap": { ...fifo, kind: "socket" }, "src/pipe": fifo }),
    );
    expect(found).toEqual(["git-entry-kinds created .mailmap", "git-entry-kinds created src/.gitignore"]);
    expect(steps).toEqual([
      { action: "remove", path: ".mailmap" },
      { action: "remove", path: "src/.gitignore" },
    ]);
  });

  it("a git file whose check throws refuses its git directory as a whole (an exception skipped the whole judgement's restore: review, session 24)", () => {
    const after = withChanges({ ".git/index": file("index2") });
    const list = pairs(REPO, after).map((p) =>
      p.path === ".git/index"
        ? {
            ...p,
            content: () => {
              throw new RangeError("Maximum call stack size exceeded");
            },
          }
        : p,
    );
    const violations = evaluateWorkspaceRules(list);
    expect(violations.map((v) => `${v.rule} ${v.path}: ${v.detail}`)).toEqual([
      "git-metadata .git/index: could not be judged (Maximum call stack size exceeded)",
    ]);
    expect(violations[0]!.restore).toEqual({ action: "revert", path: ".git" });
  });

  it("names inside installed packages are no protection and no report (npm install brought .vscode/ and .pre-commit-config.yaml); outside, and under another spelling, they are", () => {
    const none = new Set<string>();
    for (const p of [
      "node_modules/dockerode/.vscode/settings.json",
      "node_modules/nan/.pre-commit-config.yaml",
      "web/node_modules/@scope/pkg/.husky/pre-commit",
    ])
      expect(builtinProtectionOf(p, none), p).toBeUndefined();
    expect(hostRunReportOf("node_modules/x/package.json")).toBeUndefined();
    expect(hostRunReportOf("node_modules/x/.npmrc")).toBeUndefined();
    expect(builtinProtectionOf(".vscode/node_modules/x", none)).toEqual({ rule: ".vscode/", scope: ".vscode" });
    expect(builtinProtectionOf("NODE_MODULES/x/.husky/pre-commit", none)?.rule).toBe(".husky/");
    expect(builtinProtectionOf("web/.vscode/tasks.json", none)?.rule).toBe(".vscode/");
    expect(hostRunReportOf("web/package.json")?.name).toBe("package.json");
  });

  it("a link leads out of its tree when its target is absolute or climbs above the tree's top, by its text or through the tree's other links, as the kernel resolves it", () => {
    const out = (p: string, target: string) => textLeadsOut(p, target);
    expect(out("dist/notes.txt", "/etc/hostname")).toBe(true);
    expect(out("dist/up", "../../x")).toBe(true);
    expect(out("up", "..")).toBe(true);
    expect(out("a/b/c", "../d/../../../e")).toBe(true);
    expect(out("dist/readme", "../README.md")).toBe(false);
    expect(out("a/b/c", "../../x")).toBe(false);
    expect(out("dist/home", "index.html")).toBe(false);
    expect(out("top", ".")).toBe(false);
    // Through other links: `sub/a -> ..` makes `sub/a/..` the tree's parent.
    const links = new Map([
      ["sub/a", ".."],
      ["b", "sub/a/../x"],
      ["c", "sub/a/x"],
      ["d", "sub/a/sub/a/x"],
      ["loop1", "loop2/x"],
      ["loop2", "loop1/y"],
      ["inside", "sub/a/src"],
    ]);
    expect(leadsOut("sub/a", links)).toBe(false);
    expect(leadsOut("b", links)).toBe(true);
    expect(leadsOut("c", links)).toBe(false);
    expect(leadsOut("d", links)).toBe(false);
    expect(leadsOut("loop1", links)).toBe(false);
    expect(leadsOut("inside", links)).toBe(false);
    expect(
      leadsOut(
        "e",
        new Map([
          ["e", "f/../.."],
          ["f", "g/h/i"],
        ]),
      ),
    ).toBe(false);
    expect(
      leadsOut(
        "e",
        new Map([
          ["e", "f/../.."],
          ["f", "g"],
        ]),
      ),
    ).toBe(true);
    expect(
      leadsOut(
        "e",
        new Map([
          ["e", "f/../.."],
          ["f", "/"],
        ]),
      ),
    ).toBe(true);
    expect(
      leadsOut(
        "x/e",
        new Map([
          ["x/e", "../f/../.."],
          ["f", "."],
        ]),
      ),
    ).toBe(true);
    // The target is quoted as a JSON string, and long ones are cut.
    expect(outwardLinkWhy("/a\nb", "text")).toContain('a link to "/a\\nb", outside the tree');
    expect(outwardLinkWhy(`/${"a".repeat(5000)}`, "text").length).toBeLessThan(400);
    expect(outwardLinkWhy("sub/a/../x", "through")).toContain("through other links the run left");
  });

  it("the rules report a link the run made or retargeted out of the tree; one left as it was, one inside a git directory, and one that stays inside are not reported", async () => {
    const before = withChanges({ kept: link("/usr/bin/env"), moved: link("src/a.ts") });
    const after = withChanges(
      {
        dist: dir(),
        "dist/notes.txt": link("/home/runner/.git-credentials"),
        "dist/readme": link("../src/a.ts"),
        moved: link("../../outside"),
      },
      before,
    );
    const evaluator = new RuleEvaluator({});
    const found: string[] = [];
    for (const pair of pairs(before, after)) for (const v of evaluator.visit(pair)) found.push(`${v.rule} ${v.path}`);
    await evaluator.finish();
    expect(found).toEqual([]);
    expect(evaluator.hostRun.map((h) => `${h.change} ${h.path}`)).toEqual(["created dist/notes.txt", "modified moved"]);
    expect(evaluator.hostRunCount).toBe(2);
    expect(evaluator.hostRun[0]!.why).toContain('a link to "/home/runner/.git-credentials"');
    // A link in .git is the git rules' (a violation there), not a host-run report.
    const inGit = new RuleEvaluator({});
    for (const pair of pairs(REPO, withChanges({ ".git/logs": dir(), ".git/logs/HEAD": link("/etc/passwd") })))
      inGit.visit(pair);
    await inGit.finish();
    expect(inGit.hostRun).toEqual([]);
  });

  it("a link that leads out only through other links is reported too: one the run made, and one it left alone that its changes to other links now send out", async () => {
    const before = withChanges({
      sub: dir(),
      "sub/a": link("x/y/z"),
      old: link("sub/a/../../.."),
      tidy: link("sub/a"),
    });
    const after = withChanges(
      {
        "sub/a": dir(), // the link replaced by a folder: `old` now climbs out
        "sub/b": link(".."),
        made: link("sub/b/../escaped"),
      },
      before,
    );
    const evaluator = new RuleEvaluator({});
    for (const pair of pairs(before, after)) evaluator.visit(pair);
    await evaluator.finish();
    // And `sub/b -> ..`, a link onto the folder holding it (session 41).
    expect(evaluator.hostRun.map((h) => `${h.change} ${h.path}`)).toEqual([
      "created made",
      "modified old",
      "created sub/b",
    ]);
    expect(evaluator.hostRun.map((h) => h.why.includes("through other links"))).toEqual([true, true, false]);
    expect(evaluator.hostRun[2]?.why).toContain("a link to the tree's top");
    // Before the run the same links leading out are not the run's doing.
    const unchanged = new RuleEvaluator({});
    for (const pair of pairs(after, after)) unchanged.visit(pair);
    await unchanged.finish();
    expect(unchanged.hostRun).toEqual([]);
  });

  it("in a tree of more links than are kept, every link the run made is reported: one that only descends leads out through a link the tree already had (fix review 40, N5)", async () => {
    const links = new OutwardLinks();
    for (let i = 0; i <= 100_000; i++) links.addAfter(`pad/l${i}`, "x", undefined);
    links.addAfter("sub/a", "..", "created");
    links.addAfter("b", "sub/a/../x", "created");
    links.addAfter("c", "sub/x", "created");
    links.addAfter("d", "/etc/shadow", "created");
    links.addAfter("e", "pad/l0", undefined);
    expect((await links.resolve()).outward.map((l) => `${l.path} ${l.how}`)).toEqual([
      "sub/a unresolved",
      "b unresolved",
      "c unresolved",
      "d text",
    ]);
  });

  it("past the cap, the links the run made are still followed to where they land: 100,000 of its own no longer push out the one a landing goes through (fix review, round 3, session 41)", async () => {
    const links = new OutwardLinks();
    for (let i = 0; i < 100_000; i++) links.addAfter(`aaa/l${i}`, "x", "created");
    links.addAfter("v", "sub/deeper", "created");
    links.addAfter("zzz", "v/../../.husky", "created");
    links.addAfter("dist/notes.md", "../zzz/pre-commit", "created");
    const { landings } = await links.resolve();
    expect(landings.find((l) => l.path === "dist/notes.md")?.lands).toBe(".husky/pre-commit");
  });

  it("resolving a tree's links lets the event loop through (100,000 took ~0.8 s in one go)", async () => {
    const links = new OutwardLinks();
    for (let i = 0; i < 50_000; i++)
      links.addAfter(`m/.pnpm/p${i}/node_modules/d`, `../../d${i % 500}/node_modules/d`, "created");
    const { value: found, turns } = await turnsDuring(() => links.resolve());
    expect(found.outward).toEqual([]);
    expect(found.landings).toHaveLength(50_000);
    expect(turns).toBeGreaterThan(0);
  });

  it("a new file or folder whose name a glob would pass as an option is reported; one that was there before, one inside a git directory, and a '-' inside a name are not", () => {
    expect(trickyNameReport("--checkpoint-action=exec=sh x.sh")?.why).toContain("reads it as an option");
    expect(trickyNameReport("dist/-v")).toBeDefined();
    expect(trickyNameReport("dist/a-v")).toBeUndefined();
    expect(trickyNameReport("-dir/file")).toBeUndefined();
    // A folder `x\n` holding home/runner/.ssh/id_rsa: `find` prints "./x" and "/home/runner/.ssh/id_rsa".
    expect(trickyNameReport("dist/x\n")?.why).toContain("takes it for several names");
    expect(trickyNameReport("dist/x\n/home/runner/.ssh/id_rsa")).toBeUndefined();
    expect(trickyNameReport("a\tb")).toBeDefined();
    expect(trickyNameReport("a\u007fb")).toBeDefined();
    expect(trickyNameReport("caf\u00e9 b.txt")).toBeUndefined();
    // The fix review's names (round 3, session 40): through xargs, splitlines, a shell, a listing.
    expect(trickyNameReport("a --checkpoint=1 --checkpoint-action=exec=sh${IFS}x.sh z")?.why).toContain("option");
    expect(trickyNameReport("x\u2028y")).toBeDefined();
    expect(trickyNameReport("x\u0085y")).toBeDefined();
    expect(trickyNameReport("invoice\u202efdp.sh")?.why).toContain("hides or reorders");
    expect(trickyNameReport("a$(id)b")?.why).toContain("pastes names into a shell command");
    expect(trickyNameReport("a`id`b")).toBeDefined();
    // The fix review's (round 3, session 40): quotes xargs takes away, and the rest of sh's syntax.
    expect(trickyNameReport("a ''--checkpoint-action=exec=sh x.sh")?.why).toContain("option");
    expect(trickyNameReport('a "--to-command=sh"')).toBeDefined();
    expect(trickyNameReport("a \\-rf")).toBeDefined();
    for (const shell of ["a; touch x", "a | sh", "a > x", "a < b"])
      expect(trickyNameReport(shell), shell).toBeDefined();
    // Honest names: a dash between blanks, a price, Persian with its ZWNJ between letters, an emoji sequence.
    for (const honest of [
      "Chapter 1 - Intro.md",
      "cost $5.txt",
      "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645.txt",
      "\u{1f469}\u200d\u{1f4bb}.png",
      "a-b_c.d",
      "Q&A.md",
      "John's notes.md",
      "a '-' b.txt",
    ])
      expect(trickyNameReport(honest), honest).toBeUndefined();
    const before = withChanges({ "-kept": file("k") });
    const after = withChanges(
      {
        "-kept": file("changed"),
        "-rf": dir(),
        "-rf/a.txt": file("a"),
        "src/--to-command=sh": file("x"),
        ".git/-x": file("x"),
      },
      before,
    );
    const evaluator = new RuleEvaluator({});
    for (const pair of pairs(before, after)) evaluator.visit(pair);
    expect(evaluator.hostRun.map((h) => `${h.change} ${h.path}`)).toEqual([
      "created -rf",
      "created src/--to-command=sh",
    ]);
  });

  it("a link the run made onto a protected path (a file, a folder, through other links, into .git) is a change of it and is removed; one onto an ordinary file is not (fix review, round 3, session 40)", async () => {
    const before = withChanges({ ".husky": dir(), ".husky/pre-commit": file("hook") });
    const after = withChanges(
      {
        dist: dir(),
        "dist/notes.md": link("../.husky/pre-commit"),
        "dist/hooks": link("../.husky"),
        "dist/via": link("hooks/pre-commit"),
        "dist/git-hook": link("../.git/hooks/pre-commit"),
        "dist/readme": link("../src/a.ts"),
      },
      before,
    );
    const evaluator = new RuleEvaluator({});
    for (const pair of pairs(before, after)) evaluator.visit(pair);
    const found = (await evaluator.finish()).map((v) => `${v.rule} ${v.change} ${v.path} ${v.restore.action}`);
    expect(found).toEqual([
      "git-metadata created dist/git-hook remove",
      ".husky/ created dist/hooks remove",
      ".husky/ created dist/notes.md remove",
      ".husky/ created dist/via remove",
    ]);
    // The policy's own globs and what a config names count the same way.
    const policy = new RuleEvaluator({ protectedPaths: ["src/**"] });
    for (const pair of pairs(before, after)) policy.visit(pair);
    expect((await policy.finish()).map((v) => `${v.rule} ${v.path}`)).toContain("protectedPaths dist/readme");
  });

  it("a link the run made onto a host-run file inside the tree (.npmrc, .env, package.json) is reported as a link; one onto an ordinary file, or one named like the file it lands on, is not reported again (round 3, session 41)", async () => {
    const before = withChanges({ ".npmrc": file("fund=false"), ".env": file("A=1"), "package.json": file("{}") });
    const after = withChanges(
      {
        dist: dir(),
        "dist/npmrc.txt": link("../.npmrc"),
        "dist/env": link("../.env"),
        "dist/pkg": link("../package.json"),
        "dist/readme": link("../src/a.ts"),
        "sub/.npmrc": link("../.npmrc"),
      },
      before,
    );
    const evaluator = new RuleEvaluator({});
    for (const pair of pairs(before, after)) evaluator.visit(pair);
    expect(await evaluator.finish()).toEqual([]);
    expect(evaluator.hostRun.map((h) => `${h.change} ${h.path}`)).toEqual([
      "created dist/env",
      "created dist/npmrc.txt",
      "created dist/pkg",
      "created sub/.npmrc",
    ]);
    expect(evaluator.hostRun.find((h) => h.path === "dist/npmrc.txt")?.why).toContain('a link to ".npmrc"');
    expect(evaluator.hostRun.find((h) => h.path === "sub/.npmrc")?.why).not.toContain("a link to");
    expect(evaluator.hostRunCount).toBe(4);
  });

  it("a link the run made inside a bare repository is the git rules' while they are on, and reported once a policy turns them off (fix review, round 3, session 41)", async () => {
    const before = withChanges({
      "mirror.git": dir(0o755, { gitLike: true }),
      "mirror.git/HEAD": file("h"),
      "mirror.git/config": file("c"),
      "mirror.git/objects": dir(),
      "mirror.git/refs": dir(),
    });
    const after = withChanges({ "mirror.git/notes.txt": link("/etc/shadow") }, before);
    const reported = async (disabled: string[]) => {
      const evaluator = new RuleEvaluator({ disabled });
      for (const pair of pairs(before, after)) evaluator.visit(pair);
      await evaluator.finish();
      return evaluator.hostRun.map((h) => h.path);
    };
    expect(await reported([])).toEqual([]);
    expect(await reported(["git-entry-kinds", "git-metadata"])).toEqual(["mirror.git/notes.txt"]);
  });

  it("a link the run made onto the tree's top or a folder holding it is reported (tar -h of dist/ packs everything above it); one onto a sibling folder is not (fix review, round 3, session 41)", async () => {
    const before = withChanges({ src: dir(), "src/a.ts": file("a") });
    const after = withChanges(
      {
        dist: dir(),
        "dist/all": link(".."),
        "dist/deep": dir(),
        "dist/deep/up": link("../.."),
        "dist/deep/self": link("."),
        "dist/src": link("../src"),
      },
      before,
    );
    const evaluator = new RuleEvaluator({});
    for (const pair of pairs(before, after)) evaluator.visit(pair);
    expect(await evaluator.finish()).toEqual([]);
    expect(evaluator.hostRun.map((h) => `${h.change} ${h.path}`)).toEqual([
      "created dist/all",
      "created dist/deep/self",
      "created dist/deep/up",
    ]);
    expect(evaluator.hostRun.find((h) => h.path === "dist/deep/self")?.why).toContain('a link to "dist/deep"');
  });

  it("a protected file that gained a name (a hard link elsewhere: more links, its status moved) is a change of it and is put back; an ordinary file, or one whose status did not move, is not", () => {
    const hook = (nlink: number, ctimeMs: number): EntryFacts => ({ ...file("hook", 0o755), nlink, ctimeMs });
    const before = withChanges({
      ".husky": dir(),
      ".husky/pre-commit": hook(1, 1),
      "notes.md": { ...file("n"), ctimeMs: 1 },
    });
    const linked = withChanges(
      {
        ".husky/pre-commit": hook(2, 2),
        dist: dir(),
        "dist/notes.md": hook(2, 2),
        "notes.md": { ...file("n"), nlink: 2, ctimeMs: 2 },
      },
      before,
    );
    const { found, steps } = judge(linked, {}, before);
    expect(found).toEqual([".husky/ modified .husky/pre-commit"]);
    expect(steps).toEqual([{ action: "revert", path: ".husky" }]);
    // Already linked before the run, untouched by it: nothing to judge.
    expect(judge(withChanges({ ".husky/pre-commit": hook(2, 1) }, before), {}, before).found).toEqual([]);
  });

  it("a hundred changed package.json files do not push a link out of the tree off the list: each kind is listed up to its cap, and all are counted (fix review, round 3, session 40)", async () => {
    const changes: Record<string, EntryFacts> = {};
    for (let i = 0; i < 150; i++) {
      changes[`p${i}`] = dir();
      changes[`p${i}/package.json`] = file(`pkg ${i}`);
    }
    // And a hundred and ten names a glob misreads (the fix review's `-o1`…: round 3, session 40).
    for (let i = 0; i < 110; i++) changes[`-o${i}`] = file(`o ${i}`);
    changes["zz-site-notes.txt"] = link("/etc/shadow");
    const evaluator = new RuleEvaluator({});
    for (const pair of pairs(REPO, withChanges(changes))) evaluator.visit(pair);
    await evaluator.finish();
    expect(evaluator.hostRunCount).toBe(261);
    expect(evaluator.hostRun).toHaveLength(201);
    expect(evaluator.hostRun.filter((h) => h.path.endsWith("package.json"))).toHaveLength(100);
    expect(evaluator.hostRun.filter((h) => h.path.startsWith("-o"))).toHaveLength(100);
    // Listed first: a note or event that shows only the first 50 still shows it.
    expect(evaluator.hostRun[0]?.path).toBe("zz-site-notes.txt");
  });

  it("builtinProtectionOf names the outermost scope", () => {
    expect(builtinProtectionOf("a/.pi/b/.envrc", new Set())).toEqual({ rule: ".pi/", scope: "a/.pi" });
    expect(builtinProtectionOf("a/.pi/b/.envrc", new Set([".pi/"]))).toEqual({
      rule: ".envrc",
      scope: "a/.pi/b/.envrc",
    });
    expect(builtinProtectionOf(".claude/settings.json", new Set())?.scope).toBe(".claude");
    // The older, narrower names still work: turning one off opens that part of .claude/ only.
    expect(builtinProtectionOf(".claude/commands/x.md", new Set([".claude/commands/"]))).toBeUndefined();
    expect(builtinProtectionOf(".claude/hooks/x.sh", new Set([".claude/commands/"]))?.rule).toBe(".claude/");
    expect(builtinProtectionOf(".claude/settings.json", new Set([".claude/"]))).toEqual({
      rule: ".claude/settings.json",
      scope: ".claude/settings.json",
    });
    expect(builtinProtectionOf(".claude/notes.md", new Set([".claude/"]))).toBeUndefined();
    expect(builtinProtectionOf("src/profile", new Set())).toBeUndefined();
  });
});

describe("the caller's protectedPaths and the walk", () => {
  it("caller globs: a modified file is reverted, a created one removed", () => {
    const before = withChanges({
      ".github": dir(),
      ".github/workflows": dir(),
      ".github/workflows/ci.yml": file("ci"),
    });
    const after = withChanges(
      { ".github/workflows/ci.yml": file("evil"), ".github/workflows/new.yml": file("n") },
      before,
    );
    const { found, steps } = judge(after, { protectedPaths: [".github/workflows/**"] }, before);
    expect(found).toEqual([
      "protectedPaths modified .github/workflows/ci.yml",
      "protectedPaths created .github/workflows/new.yml",
    ]);
    expect(steps).toEqual([
      { action: "revert", path: ".github/workflows/ci.yml" },
      { action: "remove", path: ".github/workflows/new.yml" },
    ]);
  });

  it("an entry the walk could not see is a violation: an existing directory gets its mode back, a new one goes", () => {
    const before = withChanges({ ".github": dir() });
    const after = withChanges(
      { ".github": dir(0o311, { problem: "cannot list the directory: EACCES" }), hidden: dir(0o311, { problem: "x" }) },
      before,
    );
    const { found, steps } = judge(after, {}, before);
    expect(found).toEqual(["walk unreadable .github", "walk unreadable hidden"]);
    expect(steps).toHaveLength(2);
    expect(steps).toEqual(
      expect.arrayContaining([
        { action: "mode", path: ".github", mode: 0o755 },
        { action: "remove", path: "hidden" },
      ]),
    );
  });

  it("a symlink swapped in for a protected file is a change of kind", () => {
    const before = withChanges({ ".envrc": file("ok") });
    expect(judge(withChanges({ ".envrc": link("/tmp/evil") }, before), {}, before).found).toEqual([
      ".envrc modified .envrc",
    ]);
  });
});

const fifo: EntryFacts = { kind: "fifo", mode: 0o010644, size: 0 };
const socket: EntryFacts = { kind: "socket", mode: 0o140755, size: 0 };
const device: EntryFacts = { kind: "device", mode: 0o020644, size: 0 };
/** A file as the walk sees it after the run: with its link count and status. */
const walked = (hash: string, extra: Partial<EntryFacts> = {}): EntryFacts => ({
  ...file(hash),
  nlink: 1,
  ctimeMs: 2,
  ino: 9,
  ...extra,
});

describe("git directories hold plain data: kinds, links, modes (git-entry-kinds, git-modes)", () => {
  it.each([
    [".git/logs/HEAD", link("/home/u/.bashrc"), "a symbolic link"],
    [".git/COMMIT_EDITMSG", link("/etc/cron.d/x"), "a symbolic link"],
    [".git/FETCH_HEAD", fifo, "a FIFO"],
    [".git/MERGE_MSG", socket, "a socket"],
    [".git/refs/heads/x", device, "a device"],
    [".git/logs", link("/tmp"), "a symbolic link"],
    [".git/refs", link("/tmp/refs"), "a symbolic link"],
  ])("%s made %s: a violation that reverts .git", (path, facts, detail) => {
    const before = withChanges({ ".git/logs": dir(), ".git/logs/HEAD": file("log") });
    const after = withChanges({ [path]: facts }, before);
    const violations = evaluateWorkspaceRules(pairs(before, after));
    expect(violations).toContainEqual(
      expect.objectContaining({ path, rule: "git-entry-kinds", detail, restore: { action: "revert", path: ".git" } }),
    );
  });

  it("the object store made a symlink reverts .git; a symlink inside it is removed on its own (objects are not kept)", () => {
    expect(judge(withChanges({ ".git/objects": link("../evil-objects") })).steps).toEqual([
      { action: "revert", path: ".git" },
    ]);
    const inside = judge(withChanges({ ".git/objects/ab/link": link("/etc/shadow") }));
    expect(inside.found).toEqual(["git-entry-kinds created .git/objects/ab/link"]);
    expect(inside.steps).toEqual([{ action: "remove", path: ".git/objects/ab/link", objectStore: true }]);
  });

  it("an entry the run did not touch is not judged, whatever it is", () => {
    const before = withChanges({ ".git/info/lfs": link("../../lfs-store"), ".git/packed-refs": file("garbage") });
    expect(judge(before, {}, before).found).toEqual([]);
  });

  it("a hard link: a new name, or a new link to an existing file, in .git; objects may be hard-linked", () => {
    const before = withChanges({ ".git/COMMIT_EDITMSG": file("msg") });
    const created = withChanges({ ".git/MERGE_MSG": walked("x", { nlink: 2 }) }, before);
    expect(judge(created, {}, before).found).toEqual(["git-entry-kinds created .git/MERGE_MSG"]);
    // Same content, but the inode gained a link (its ctime moved): touched, so judged.
    const linked = withChanges({ ".git/COMMIT_EDITMSG": walked("msg", { nlink: 2 }) }, before);
    const found = evaluateWorkspaceRules(pairs(before, linked));
    expect(found).toEqual([expect.objectContaining({ rule: "git-entry-kinds", detail: "a file with 2 hard links" })]);
    // `git clone --local` hard-links objects; git never writes into one.
    expect(judge(withChanges({ ".git/objects/ab/cdef": walked("obj", { nlink: 2 }) })).found).toEqual([]);
  });

  it("modes: setuid, setgid, group- or world-writable files (git-modes); an object gets its mode back on its own", () => {
    const { found, steps } = judge(
      withChanges({
        ".git/index": file("empty-index", 0o666),
        ".git/logs": dir(),
        ".git/logs/HEAD": file("l", 0o4644),
      }),
    );
    expect(found).toEqual(["git-modes modified .git/index", "git-modes created .git/logs/HEAD"]);
    expect(steps).toEqual([{ action: "revert", path: ".git" }]);
    expect(judge(withChanges({ ".git/objects/ab/cdef": file("obj", 0o666) })).steps).toEqual([
      { action: "mode", path: ".git/objects/ab/cdef", mode: 0o644 },
    ]);
  });

  it("any git directory swapped for a symlink (a bare repository, a submodule's), not only .git", () => {
    const before = withChanges({
      "repo.git": dir(0o755, { gitLike: true }),
      "repo.git/HEAD": file("h"),
      ".git/modules": dir(),
      ".git/modules/x": dir(0o755, { gitLike: true }),
      ".git/modules/x/HEAD": file("h"),
    });
    const after = withChanges({ "repo.git": link("/srv/evil.git"), ".git/modules/x": link("/srv/evil.git") }, before);
    const found = judge(after, {}, before).found;
    expect(found).toContain("git-entry-kinds modified repo.git");
    expect(found).toContain("git-entry-kinds modified .git/modules/x");
  });

  it("a git directory only a pointer names (RuleConfig.gitDirs) is judged like any other", () => {
    const before = withChanges({ store: dir(), "store/HEAD": file("h"), "store/config": file("c") });
    const after = withChanges({ "store/config": file("evil"), "store/logs": link("/tmp") }, before);
    expect(judge(after, {}, before).found).toEqual([]);
    expect(judge(after, { gitDirs: ["store"] }, before).found).toEqual([
      "git-metadata modified store/config",
      "git-entry-kinds created store/logs",
    ]);
  });
});

describe("git pointers hold what git writes there (git-pointers)", () => {
  const pointer = (path: string, text: string) => {
    const violations = evaluateWorkspaceRules(pairs(REPO, withChanges({ [path]: file(text) })));
    return violations.filter((v) => v.rule === "git-pointers").map((v) => v.detail);
  };

  it.each([
    [".git/HEAD", "ref: refs/heads/main\n"],
    [".git/HEAD", `${OID("a")}\n`],
    [".git/HEAD", `${"b".repeat(64)}\n`],
    [".git/refs/heads/fix;touch${IFS}pwned;#", `${OID("a")}\n`],
    [".git/HEAD", "ref: refs/heads/fix;touch${IFS}pwned;#\n"],
    [".git/refs/remotes/origin/HEAD", "ref: refs/remotes/origin/main\n"],
    [".git/ORIG_HEAD", OID("c")],
    [".git/MERGE_HEAD", `${OID("a")}\n${OID("b")}\n`],
    [".git/FETCH_HEAD", `${OID("a")}\t\tbranch 'main' of /srv/x\n${OID("b")}\tnot-for-merge\tbranch 'y' of /srv/x\n`],
    [".git/packed-refs", `# pack-refs with: peeled fully-peeled sorted \n${OID("a")} refs/heads/main\n^${OID("b")}\n`],
    [".git/packed-refs", ""],
    [".git/refs/heads/main.lock", `${OID("a")}\n`],
    [".git/BISECT_START", "main\n"],
    [".git/BISECT_START", "feature/x-1"],
    [".git/BISECT_START", `${OID("a")}\n`],
    [".git/BISECT_START", ""],
  ])("%s = %j is fine", (path, text) => {
    expect(pointer(path, text)).toEqual([]);
  });

  it.each([
    [".git/HEAD", "ref: ../../../../home/u/.bashrc\n", "outside refs/"],
    [".git/HEAD", "ref: refs/heads/../../config\n", "not a valid ref name"],
    [".git/HEAD", `${OID("a")} trailing words\n`, "neither an object id"],
    [".git/HEAD", `${OID("a")}\n${OID("b")}\n`, "more than one line"],
    [".git/refs/heads/main", "ref: refs/heads/a b\n", "not a valid ref name"],
    [".git/refs/tags/v1", "ref: refs/heads/x.lock\n", "not a valid ref name"],
    [".git/refs/heads/main", "[core]\n\tfsmonitor = touch /tmp/pwned\n", "more than one line"],
    [".git/packed-refs", `${OID("a")} refs/heads/main\n[core]\n`, "line 2"],
    [".git/packed-refs", `${OID("a")} refs/heads/.hidden\n`, "not a valid ref name"],
    [".git/packed-refs", `${OID("a")} refs/replace/${OID("b")}\n`, "a replace ref"],
    [".git/FETCH_HEAD", "hello\n", "a line git fetch does not write"],
    [".git/MERGE_HEAD", "x\n", "not an object id"],
    [".git/HEAD", "ref: refs/heads/m\0ain", "NUL"],
    [".git/BISECT_START", "-f\n", 'starts with "-"'],
    [".git/BISECT_START", "--orphan=x\n", 'starts with "-"'],
    [".git/BISECT_START", "main\n-f\n", "more than one line"],
    [".git/BISECT_START", "HEAD@{1}\n", "neither an object id nor a valid branch name"],
    [".git/BISECT_START", "main~1\n", "neither an object id nor a valid branch name"],
    [".git/BISECT_START", "a b\n", "neither an object id nor a valid branch name"],
    [".git/BISECT_START", "HEAD\n", "neither an object id nor a valid branch name"],
  ])("%s = %j: a violation (%s)", (path, text, why) => {
    const found = pointer(path, text);
    expect(found).toHaveLength(1);
    expect(found[0]).toContain(why);
  });

  it("a pointer whose content cannot be read is a violation; other git files need no content", () => {
    const after = withChanges({ ".git/HEAD": file("x"), ".git/COMMIT_EDITMSG": file("i") });
    const violations = evaluateWorkspaceRules(
      pairs(REPO, after).map((p) => (p.after ? { ...p, content: () => undefined } : p)),
    );
    expect(violations.map((v) => `${v.rule} ${v.path}`)).toEqual(["git-pointers .git/HEAD"]);
  });
});

describe("paths the repository's git config names (git-config-paths)", () => {
  const configPaths = new Map([
    [".githooks", "core.hooksPath in /ws/.git/config"],
    ["team.gitconfig", "include.path in /ws/.git/config"],
    ["tools/bin/fsmon", "core.fsmonitor in /ws/.git/config"],
  ]);
  const before = withChanges({
    ".githooks": dir(),
    ".githooks/pre-commit": file("exit 0"),
    "team.gitconfig": file("[user]"),
    tools: dir(),
    "tools/bin": dir(),
  });

  it("a change below a named directory reverts it; a named file that did not exist is removed", () => {
    const after = withChanges(
      {
        ".githooks/pre-commit": file("touch /tmp/pwned"),
        ".githooks/post-checkout": file("x"),
        "team.gitconfig": file("[core] fsmonitor = x"),
        "tools/bin/fsmon": file("x"),
        "src/a.ts": file("ordinary"),
      },
      before,
    );
    const violations = evaluateWorkspaceRules(pairs(before, after), { configPaths });
    expect(violations.map((v) => `${v.rule} ${v.change} ${v.path}: ${v.detail}`)).toEqual([
      "git-config-paths created .githooks/post-checkout: core.hooksPath in /ws/.git/config",
      "git-config-paths modified .githooks/pre-commit: core.hooksPath in /ws/.git/config",
      "git-config-paths modified team.gitconfig: include.path in /ws/.git/config",
      "git-config-paths created tools/bin/fsmon: core.fsmonitor in /ws/.git/config",
    ]);
    const plan = new RestorePlan();
    for (const v of violations) plan.add(v.restore);
    expect(plan.ordered()).toEqual([
      { action: "revert", path: ".githooks" },
      { action: "revert", path: "team.gitconfig" },
      { action: "remove", path: "tools/bin/fsmon" },
    ]);
  });

  it("a parent of a named path turned into a symlink is a violation (git would follow it)", () => {
    const after = withChanges({ tools: link("evil-tools"), "tools/bin": undefined }, before);
    expect(judge(after, { configPaths }, before).found).toEqual(["git-config-paths modified tools"]);
  });

  it("off when the policy names git-config-paths", () => {
    const after = withChanges({ ".githooks/pre-commit": file("x") }, before);
    expect(judge(after, { configPaths, disabled: ["git-config-paths"] }, before).found).toEqual([]);
  });
});

describe("host-run files: protected or reported", () => {
  it.each([
    ".husky/pre-commit",
    ".pre-commit-config.yaml",
    "lefthook.yml",
    ".lefthook-local.yaml",
    ".lefthook/pre-commit/x.sh",
    "mise.toml",
    "sub/.mise.toml",
    ".tool-versions",
    "app.code-workspace",
    ".devcontainer/devcontainer.json",
    ".devcontainer.json",
    ".cursor/mcp.json",
    ".gemini/settings.json",
    ".codex/config.toml",
    ".claude/hooks/pre.sh",
    ".aider.conf.yml",
    ".config/mise.toml",
    ".config/mise/config.toml",
  ])("%s is protected", (path) => {
    const parents: Tree = {};
    for (let i = path.indexOf("/"); i > 0; i = path.indexOf("/", i + 1)) parents[path.slice(0, i)] = dir();
    const { found } = judge(withChanges({ ...parents, [path]: file("evil") }));
    expect(found.some((f) => f.endsWith(` created ${path}`))).toBe(true);
  });

  it("a .config swapped for a symlink (to a folder with mise.toml) is a violation of .config/mise.toml", () => {
    const before = withChanges({ ".config": dir(), ".config/mise.toml": file("ok") });
    expect(
      judge(withChanges({ ".config": link("evil"), ".config/mise.toml": undefined }, before), {}, before).found,
    ).toEqual([".config/mise.toml modified .config", ".config/mise.toml deleted .config/mise.toml"]);
  });

  it("reported, not refused: .npmrc, .yarnrc.yml, .yarnrc, .pnpmfile.cjs, .lfsconfig, .gitattributes", () => {
    const evaluator = new RuleEvaluator();
    const after = withChanges({
      ".npmrc": file("node-options=--require ./x.js"),
      ".yarnrc.yml": file("yarnPath: x.cjs"),
      ".yarnrc": file("yarn-path x.js"),
      ".pnpmfile.cjs": file("x"),
      ".lfsconfig": file("[lfs] url = x"),
      "src/.gitattributes": file("* filter=lfs"),
    });
    const violations = pairs(REPO, after).flatMap((p) => evaluator.visit(p));
    expect(violations).toEqual([]);
    expect(evaluator.hostRun.map((h) => `${h.change} ${h.path}`)).toEqual([
      "created .lfsconfig",
      "created .npmrc",
      "created .pnpmfile.cjs",
      "created .yarnrc",
      "created .yarnrc.yml",
      "created src/.gitattributes",
    ]);
    expect(evaluator.hostRunCount).toBe(6);
    expect(evaluator.hostRun[1]!.why).toMatch(/npm/);
  });
});
