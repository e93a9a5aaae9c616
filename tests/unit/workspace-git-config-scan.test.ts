// The drivers a repository's git config defines (which the sandbox neutralises), found without running
// git, only inside the workspace.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { gitSafetyEntries, withGitConfig } from "../../src/run/plan/git-safety-env.js";
import { scanGitConfig, scanGitDrivers } from "../../src/workspace/git-config-scan.js";

function repo(files: Record<string, string>): string {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-gitscan-")));
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), text);
  }
  return dir;
}

describe("scanGitDrivers", () => {
  it("finds filter, diff and merge drivers and diff.external in the config, config.worktree and included files", () => {
    const ws = repo({
      ".git/config":
        '[core]\n\tfsmonitor = evil\n[filter "lfs-ish"]\n\tclean = x\n[diff]\n\texternal = y\n[include]\n\tpath = ../more.cfg\n',
      ".git/config.worktree": '[diff "pdf"]\n\ttextconv = z\n[merge.ours]\n\tdriver = w\n',
      "more.cfg": '[filter "second"]\n\tsmudge = v\n',
    });
    expect(scanGitDrivers(ws)).toEqual({
      filters: ["lfs-ish", "second"],
      diffs: ["pdf"],
      merges: ["ours"],
      externalDiff: true,
    });
  });

  it("a line of half a MiB of backslashes before one letter is read in one pass (a backtracking regex counted them from every position)", () => {
    const ws = repo({
      ".git/config": `[filter "a"]\n\tclean = x${"\\".repeat(1 << 19)}y\n[filter "b"]\n\tclean = z\n`,
    });
    expect(scanGitDrivers(ws).filters).toEqual(["a", "b"]);
  });

  it("never reads outside the workspace (an include or commondir pointing elsewhere is ignored)", () => {
    const outside = repo({ "evil.cfg": '[filter "outside"]\n\tclean = x\n' });
    const ws = repo({ ".git/config": `[include]\n\tpath = ${outside}/evil.cfg\n`, ".git/commondir": `${outside}\n` });
    expect(scanGitDrivers(ws)).toEqual({ filters: [], diffs: [], merges: [], externalDiff: false });
  });

  it("names an old-form [filter.Evil] subsection as git does (lower case), a quoted one as written", () => {
    const ws = repo({
      ".git/config": '[filter.Evil]\n\tclean = x\n[diff.Evil]\n\ttextconv = y\n[merge "Keep"]\n\tdriver = z\n',
    });
    expect(scanGitDrivers(ws)).toEqual({ filters: ["evil"], diffs: ["evil"], merges: ["Keep"], externalDiff: false });
  });

  it("follows a .git file's gitdir: (and its commondir) inside the workspace, never outside it", () => {
    const ws = repo({
      ".git": "gitdir: meta/worktrees/w\n",
      "meta/worktrees/w/commondir": "../..\n",
      "meta/worktrees/w/config.worktree": '[diff "wt"]\n\ttextconv = y\n',
      "meta/config": '[filter "evil"]\n\tclean = x\n',
    });
    expect(scanGitDrivers(ws)).toMatchObject({ filters: ["evil"], diffs: ["wt"] });
    const absolute = repo({ "meta/config": '[filter "abs"]\n\tclean = x\n' });
    fs.writeFileSync(path.join(absolute, ".git"), `gitdir: ${absolute}/meta\n`);
    expect(scanGitDrivers(absolute).filters).toEqual(["abs"]);
    const outside = repo({ config: '[filter "outside"]\n\tclean = x\n' });
    const pointing = repo({ ".git": `gitdir: ${outside}\n` });
    expect(scanGitDrivers(pointing)).toEqual({ filters: [], diffs: [], merges: [], externalDiff: false });
  });

  it("neutralises each driver after the caller's own git settings, and always turns off fsmonitor, hooks and the pager", () => {
    const env = withGitConfig(
      { GIT_CONFIG_COUNT: "1", GIT_CONFIG_KEY_0: "user.name", GIT_CONFIG_VALUE_0: "bot" },
      gitSafetyEntries({ filters: ["x"], diffs: [], merges: [], externalDiff: false }),
    );
    expect(env).toMatchObject({
      GIT_CONFIG_COUNT: "11",
      GIT_CONFIG_KEY_1: "core.fsmonitor",
      GIT_CONFIG_VALUE_1: "false",
      GIT_CONFIG_KEY_2: "core.hooksPath",
      GIT_CONFIG_VALUE_2: "/dev/null",
      GIT_CONFIG_KEY_5: "safe.directory",
      GIT_CONFIG_VALUE_5: "*",
      GIT_CONFIG_KEY_6: "core.splitIndex",
      GIT_CONFIG_VALUE_6: "false",
      GIT_CONFIG_KEY_7: "filter.x.clean",
      GIT_CONFIG_VALUE_7: "cat",
      GIT_PAGER: "cat",
    });
  });
});

describe("scanGitConfig's credentials", () => {
  it("names every key that holds a credential (never its value): a checkout's extraheader, a URL with a password, also in an includeIf file", () => {
    const ws = repo({
      ".git/config": [
        '[http "https://github.com/"]',
        "\textraheader = AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX1NFQ1JFVA==",
        "[http]",
        "\tExtraHeader = Authorization: Bearer SECRET",
        '[remote "origin"]',
        "\turl = https://x-access-token:ghs_SECRET@github.com/o/r.git",
        '[url "https://bot:SECRET2@example.com/"]',
        "\tinsteadOf = https://example.com/",
        '[includeIf "gitdir:/"]',
        "\tpath = ../more.cfg",
        "",
      ].join("\n"),
      "more.cfg": '[remote "mirror"]\n\tpushurl = ssh://git:hunter2@mirror.example/r\n',
    });
    const { credentials } = scanGitConfig(ws);
    expect(credentials).toEqual([
      "http.extraheader",
      "http.https://github.com/.extraheader",
      "remote.mirror.pushurl",
      "remote.origin.url",
      'url."<a URL with a credential>"',
    ]);
    expect(JSON.stringify(credentials)).not.toMatch(/SECRET|hunter2|eC1h/);
  });

  it("finds none in an ordinary clone's config (URLs with a user and no password, ssh remotes)", () => {
    const ws = repo({
      ".git/config": [
        "[core]\n\tbare = false",
        '[remote "origin"]\n\turl = https://github.com/o/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*',
        '[remote "fork"]\n\turl = git@github.com:me/r.git',
        '[remote "ssh"]\n\turl = ssh://git@host.example:2222/r.git',
        '[url "https://user@example.com/"]\n\tinsteadOf = https://example.com/',
        '[branch "main"]\n\tremote = origin',
        "",
      ].join("\n"),
    });
    expect(scanGitConfig(ws).credentials).toEqual([]);
  });

  it("also finds a token as a URL's user, an inline helper's password, keys after a header or over continued lines, and submodules' configs", () => {
    const ws = repo({
      ".git/config": [
        '[remote "origin"]',
        "\turl = https://ghp_abcdefSECRET@github.com/o/r",
        "[credential]",
        '\thelper = "!f() { echo username=x; echo password=SECRET; }; f"',
        '[http "https://a.example/"] extraheader = Authorization: Bearer SECRET',
        '[remote "split"]',
        "\turl = https://bot:\\",
        "SECRET@example.com/r",
        "[diff] external = /bin/echo",
        "",
      ].join("\n"),
      ".git/modules/lib/config": '[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic SECRET\n',
      ".git/modules/nested/name/config": '[remote "origin"]\n\turl = https://x-access-token:SECRET@github.com/o/n\n',
    });
    const { credentials, drivers } = scanGitConfig(ws);
    expect(credentials).toEqual([
      "credential.helper",
      "http.https://a.example/.extraheader",
      "http.https://github.com/.extraheader",
      "remote.origin.url",
      "remote.split.url",
    ]);
    expect(drivers.externalDiff).toBe(true);
  });

  it("follows no link in .git/modules: links back to itself took hours of lstats at plan time; a real submodule's config is still read", () => {
    const ws = repo({
      ".git/modules/lib/config": '[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic SECRET\n',
    });
    for (let i = 0; i < 16; i++) fs.symlinkSync(".", path.join(ws, `.git/modules/l${i}`));
    // 16 links followed: 16^5 folders read (~30 s); none: a few.
    const readdir = vi.spyOn(fs, "readdirSync");
    try {
      expect(scanGitConfig(ws).credentials).toEqual(["http.https://github.com/.extraheader"]);
      expect(readdir.mock.calls.length).toBeLessThan(20);
    } finally {
      readdir.mockRestore();
    }
    // Past 1,000 folders the rest is unread config: the run refuses rather than miss a credential there.
    for (let i = 0; i < 1001; i++) fs.mkdirSync(path.join(ws, `.git/modules/n${i}`));
    expect(scanGitConfig(ws).unread).toBe(1);
  });

  it("reads a submodule's config however deep its name (third_party/src/github.com/org/repo/sub: six folders)", () => {
    const ws = repo({
      ".git/modules/third_party/src/github.com/org/repo/sub/config":
        '[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic SECRET\n',
    });
    expect(scanGitConfig(ws)).toMatchObject({ credentials: ["http.https://github.com/.extraheader"], unread: 0 });
  });

  it("reads every submodule of a repository with many checked out (Boost's 172 were refused at 64)", () => {
    const files: Record<string, string> = {};
    for (let n = 0; n < 200; n++) files[`.git/modules/libs/m${n}/config`] = "[core]\n\tbare = false\n";
    files[".git/modules/libs/m199/config"] =
      '[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic SECRET\n';
    expect(scanGitConfig(repo(files))).toMatchObject({
      credentials: ["http.https://github.com/.extraheader"],
      unread: 0,
    });
  });

  it("finds none for a user name that is a person's (a Bitbucket clone URL)", () => {
    const ws = repo({ ".git/config": '[remote "origin"]\n\turl = https://jane@bitbucket.org/team/repo.git\n' });
    expect(scanGitConfig(ws).credentials).toEqual([]);
  });

  it("counts the config files it leaves unread past its cap, so a run can refuse rather than miss what they hold", () => {
    const files: Record<string, string> = {
      ".git/config": Array.from({ length: 1030 }, (_, n) => `[include]\n\tpath = ../inc/${n}.cfg\n`).join(""),
    };
    for (let n = 0; n < 1030; n++)
      files[`inc/${n}.cfg`] = n === 1029 ? '[http "https://x/"]\n\textraheader = SECRET\n' : "";
    const { unread } = scanGitConfig(repo(files));
    expect(unread).toBeGreaterThan(0);
    expect(scanGitConfig(repo({ ".git/config": "[core]\n\tbare = false\n" })).unread).toBe(0);
  });
});
