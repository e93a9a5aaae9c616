// No trap in the workspace: everything git reads besides .git/config and .git/hooks, and the
// files other host tools run unasked, planted by code in the sandbox (real engine, image, Pi,
// driven by the hostile model). After each run the host's real `git status` runs in the
// workspace (and in the planted sub-repository) with a marker command wired into the door: no
// marker may appear, the run fails with "policy-violation" naming the path and what was
// restored, the hint names no command to run in the tree, and .git is exactly what it was.
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  BISECT_START_ABBREVIATED,
  BISECT_START_COMMIT,
  BISECT_START_OPTION,
  COMMIT_ON_BRANCH,
  HOOK_IN_BETWEEN,
  LYING_COMMIT_GRAPH,
  LYING_PACK,
  LYING_PACK_RENAMED,
  NEW_BRANCH,
  ORDINARY_BISECT,
  ORDINARY_WORK,
  REWRITE_LOOSE_OBJECT,
  SHALLOW_HEAD,
  STASH_PROTECTED,
  UNDONE_COMMIT,
} from "../support/git-object-attacks.js";
import { warmCalls, workspaceMode } from "../support/harness.js";
import {
  bash,
  describeOutcome,
  finish,
  type HostileOutcome,
  hostileWorkspace,
  runHostile,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();

/**
 * A warm call is a copy-mode call whose trees went in with its claim: what it leaves comes back
 * through the same relay copy-out and is judged by the same code as a cold copy-mode call's
 * (run/copy-mode/copy-mode-workspace.ts). So the warm project (integration-warm) runs one or two
 * tests of each group below, the ones where the tree as the claim delivered it matters (a .git
 * sent in, the root's mode, the objects sent), and the copy project runs them all. `notInWarm`
 * leaves a test unregistered there, rather than skipped: the rest run in bind and copy mode.
 */
const notInWarm = (warmCalls() ? () => undefined : it) as typeof it;

/** Host git with nothing of the host user's configuration (a FIFO the run left cannot hang it for long). */
function hostGit(cwd: string, ...args: string[]) {
  const home = hostileWorkspace({}, "sandbox-run-git-home-");
  return spawnSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "protocol.file.allow=always", ...args], {
    cwd,
    encoding: "utf8",
    timeout: 20_000,
    env: { PATH: process.env.PATH, HOME: home, GIT_CONFIG_NOSYSTEM: "1", LC_ALL: "C" },
  });
}

/** A repository with one commit (and a submodule x when asked). */
function repo(options: { submodule?: boolean; files?: Record<string, string> } = {}): string {
  const ws = hostileWorkspace({ "README.md": "readme\n", "src/a.ts": "a\n", ...options.files });
  const ok = (r: ReturnType<typeof hostGit>) => {
    if (r.status !== 0) throw new Error(`git failed: ${r.stderr}`);
  };
  ok(hostGit(ws, "init", "-q"));
  if (options.submodule) {
    const source = hostileWorkspace({ "lib.txt": "lib\n" }, "sandbox-run-git-sub-");
    ok(hostGit(source, "init", "-q"));
    ok(hostGit(source, "add", "."));
    ok(hostGit(source, "commit", "-qm", "lib"));
    ok(hostGit(ws, "submodule", "add", "-q", source, "x"));
  }
  ok(hostGit(ws, "add", "."));
  ok(hostGit(ws, "commit", "-qm", "init"));
  return ws;
}

/** Every entry below `dir`: type, owner, mode, content or target. */
function state(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (p: string) => {
    const st = fs.lstatSync(p);
    const rel = path.relative(dir, p) || ".";
    const meta = `${st.uid}:${st.gid}:${(st.mode & 0o7777).toString(8)}`;
    if (st.isSymbolicLink()) out[rel] = `link:${fs.readlinkSync(p)}`;
    else if (st.isDirectory()) {
      out[rel] = `dir:${meta}`;
      for (const name of fs.readdirSync(p).sort()) walk(path.join(p, name));
    } else if (!st.isFile())
      out[rel] = `other:${meta}`; // a FIFO is never opened: that would block
    else out[rel] = `file:${meta}:${st.nlink}:${crypto.createHash("sha256").update(fs.readFileSync(p)).digest("hex")}`;
  };
  walk(dir);
  return out;
}

/** Runs the door, then the host's git status where a user (or their prompt) would. */
async function plant(ws: string, script: string, statusIn: string[] = ["."], writableRoots: string[] = []) {
  const marker = path.join(hostileWorkspace({}, "sandbox-run-marker-"), "PWNED");
  const gitBefore = state(path.join(ws, ".git"));
  const outcome = await runHostile(
    server,
    [bash(`set -e\n${script.replaceAll("MARKER", marker)}\necho door-planted`), finish()],
    { cwd: ws, ...(writableRoots.length > 0 ? { additionalWritableDirectories: writableRoots } : {}) },
  );
  // Before git status, which refreshes the index's stat data (and so rewrites it).
  const gitAfter = state(path.join(ws, ".git"));
  for (const dir of statusIn) if (fs.existsSync(path.join(ws, dir))) hostGit(path.join(ws, dir), "status");
  return { outcome, marker, gitBefore, gitAfter };
}

function expectUndone(outcome: HostileOutcome, marker: string, named: string[]): void {
  // The door really was built inside ...
  expect(outcome.toolResults[0], describeOutcome(outcome)).toContain("door-planted");
  // ... the run failed, naming it and what was put back, with no command to run in the tree ...
  expect(outcome.error?.code, describeOutcome(outcome)).toBe("policy-violation");
  // ... saying which run it was (its events and record carry that id) ...
  expect(outcome.error?.runId).toBe(outcome.runId);
  for (const p of named) expect(outcome.error?.message).toContain(p);
  if (workspaceMode() === "bind") {
    // Bind mode: the change reached the host tree and was put back.
    expect(outcome.error?.message).toMatch(/Restored: /);
    expect(outcome.error?.message).not.toContain("NOT restored");
  } else {
    // Copy mode: the returned tree was judged first and nothing of it was applied.
    expect(outcome.error?.message).toMatch(/none of the run's changes were applied/);
  }
  expect(`${outcome.error?.message}\n${outcome.error?.hint}`).not.toMatch(/`git |git (status|checkout|diff)\b/);
  // ... and the host's git ran nothing.
  expect(fs.existsSync(marker), "the marker command ran on the host").toBe(false);
}

describe.concurrent("git doors: planted in the sandbox, undone before the host's git sees them", () => {
  it(".git/commondir pointing at a directory with a core.fsmonitor config", async () => {
    const ws = repo();
    const { outcome, marker, gitBefore, gitAfter } = await plant(
      ws,
      `mkdir -p evil-common/objects evil-common/refs
printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = touch MARKER\\n' > evil-common/config
echo ../evil-common > .git/commondir`,
    );
    expectUndone(outcome, marker, [".git/commondir"]);
    expect(gitAfter).toEqual(gitBefore);
  });

  notInWarm(".git/config.worktree with extensions.worktreeConfig", async () => {
    const ws = repo();
    const { outcome, marker, gitBefore, gitAfter } = await plant(
      ws,
      `printf '[core]\\n\\trepositoryformatversion = 1\\n[extensions]\\n\\tworktreeConfig = true\\n' >> .git/config
printf '[core]\\n\\tfsmonitor = touch MARKER\\n' > .git/config.worktree`,
    );
    expectUndone(outcome, marker, [".git/config.worktree", ".git/config"]);
    expect(gitAfter).toEqual(gitBefore);
  });

  notInWarm(".git/modules/x/config of a submodule", async () => {
    const ws = repo({ submodule: true });
    const { outcome, marker, gitBefore, gitAfter } = await plant(
      ws,
      "printf '[core]\\n\\tfsmonitor = touch MARKER\\n' >> .git/modules/x/config",
      [".", "x"],
    );
    expectUndone(outcome, marker, [".git/modules/x/config"]);
    expect(gitAfter).toEqual(gitBefore);
  });

  notInWarm("a new nested repository sub/.git with a core.fsmonitor config", async () => {
    const ws = repo();
    const { outcome, marker, gitBefore, gitAfter } = await plant(
      ws,
      "mkdir sub && git init -q sub && printf '[core]\\n\\tfsmonitor = touch MARKER\\n' >> sub/.git/config",
      [".", "sub"],
    );
    expectUndone(outcome, marker, ["sub/.git"]);
    expect(fs.existsSync(path.join(ws, "sub/.git"))).toBe(false);
    expect(gitAfter).toEqual(gitBefore);
  });

  notInWarm(".git/info/attributes with a filter driver", async () => {
    const ws = repo();
    const { outcome, marker, gitBefore, gitAfter } = await plant(
      ws,
      `printf '* filter=evil\\n' > .git/info/attributes
printf '[filter "evil"]\\n\\tclean = touch MARKER\\n' >> .git/config
touch -d '2001-01-01' README.md`,
    );
    expectUndone(outcome, marker, [".git/info/attributes"]);
    expect(gitAfter).toEqual(gitBefore);
  });

  notInWarm(".gitmodules", async () => {
    const ws = repo();
    const { outcome, marker, gitBefore, gitAfter } = await plant(
      ws,
      `printf '[submodule "evil"]\\n\\tpath = evil\\n\\turl = ./evil\\n\\tupdate = !touch MARKER\\n' > .gitmodules`,
    );
    expectUndone(outcome, marker, [".gitmodules"]);
    expect(fs.existsSync(path.join(ws, ".gitmodules"))).toBe(false);
    expect(gitAfter).toEqual(gitBefore);
  });

  notInWarm(".git replaced by a gitdir: file pointing at a planted repository", async () => {
    const ws = repo();
    const { outcome, marker, gitBefore, gitAfter } = await plant(
      ws,
      `git init -q --bare evil
printf '[core]\\n\\tbare = false\\n\\tfsmonitor = touch MARKER\\n' >> evil/config
mv .git .git-moved
echo 'gitdir: evil' > .git`,
    );
    expectUndone(outcome, marker, [".git (modified, new-repositories)"]);
    // The whole .git is back, objects included (found by inode in the moved copy).
    expect(gitAfter).toEqual(gitBefore);
    expect(fs.existsSync(path.join(ws, "evil"))).toBe(false);
    expect(hostGit(ws, "log", "--oneline").stdout).toMatch(/ init\n$/);
  });

  notInWarm("chmod 0777 .git and a setgid (in bind mode, group-writable) directory", async () => {
    const ws = repo();
    const srcMode = fs.statSync(path.join(ws, "src")).mode & 0o7777;
    // Bind mode's no-setuid filter refuses the setgid bit (docs/security.md F6); group-writable alone
    // is refused by directory-modes as well.
    const { outcome, marker, gitBefore, gitAfter } = await plant(
      ws,
      "chmod 0777 .git && { chmod g+ws src 2>/dev/null || chmod g+w src; }",
    );
    expectUndone(outcome, marker, [".git (mode, directory-modes)", "src (mode, directory-modes)"]);
    expect(gitAfter).toEqual(gitBefore);
    expect(fs.statSync(path.join(ws, "src")).mode & 0o7777).toBe(srcMode);
  });
});

describe.concurrent("built-in protected files", () => {
  it(".envrc and a folderOpen task in an existing .vscode/ are undone; an ordinary change next to them stays where the run was applied", async () => {
    const ws = repo({ files: { ".vscode/settings.json": '{"editor.tabSize": 2}\n' } });
    const vscodeBefore = state(path.join(ws, ".vscode"));
    const { outcome, marker } = await plant(
      ws,
      `printf 'touch MARKER\\n' > src/.envrc
printf '{"version":"2.0.0","tasks":[{"label":"x","type":"shell","command":"touch MARKER","runOptions":{"runOn":"folderOpen"}}]}\\n' > .vscode/tasks.json
echo changed > src/a.ts`,
    );
    expectUndone(outcome, marker, ["src/.envrc (created, .envrc)", ".vscode/tasks.json (created, .vscode/)"]);
    expect(fs.existsSync(path.join(ws, "src/.envrc"))).toBe(false);
    expect(state(path.join(ws, ".vscode"))).toEqual(vscodeBefore);
    // Bind mode keeps the ordinary change; copy mode applies nothing of a run that failed a check.
    expect(fs.readFileSync(path.join(ws, "src/a.ts"), "utf8")).toBe(workspaceMode() === "bind" ? "changed\n" : "a\n");
  });

  notInWarm(
    "folders .envrc (PATH_add, layout node) and mise (_.path) put on PATH, the files they source (source_env, dotenv, _.source, [hooks]) and the scripts a husky hook and an MCP config name, in the tree's top, in a package below it and in another lent tree: what the run drops or changes there is put back, so the host's shell runs its own git, ls and npm, direnv and mise rerun nothing of the run's on cd, and the next commit, agent start or folder open runs the tree's own scripts; in node_modules/.bin only the host's command names are guarded",
    async () => {
      // A toolchain lent beside the workspace, which the workspace's .envrc puts on PATH.
      const tools = hostileWorkspace({ "bin/mytool": "#!/bin/sh\necho mytool\n" }, "sandbox-run-toolchain-");
      const toolsBefore = state(tools);
      const ws = repo({
        files: {
          ".envrc": `PATH_add bin\nlayout node\nsource_env .envrc.local\ndotenv\nPATH_add ${tools}/bin\n`,
          // A monorepo's package: direnv loads its .envrc on cd there, an editor opened there runs its tasks.
          "packages/web/.envrc": "source_env env.local\n",
          "packages/web/env.local": "export WEB=1\n",
          "packages/web/.vscode/tasks.json":
            '{"version":"2.0.0","tasks":[{"label":"t","type":"shell","command":"sh scripts/web-task.sh","runOptions":{"runOn":"folderOpen"}}]}\n',
          "packages/web/scripts/web-task.sh": "echo task\n",
          ".envrc.local": "export LOCAL=1\n",
          ".env": "DOTENV=1\n",
          "mise.toml":
            '[env]\n_.path = ["{{config_root}}/tools"]\n_.source = "scripts/env.sh"\n[hooks]\nenter = "sh ./hooks/enter.sh"\n',
          "scripts/env.sh": "export MISE_ENV=1\n",
          "hooks/enter.sh": "echo entered\n",
          ".husky/pre-commit": "./scripts/check.sh\n",
          "scripts/check.sh": "echo checked\n",
          ".mcp.json": '{"mcpServers":{"x":{"command":"node","args":["mcp/server.js"]}}}\n',
          "mcp/server.js": "console.log(1)\n",
          "bin/build": "#!/bin/sh\necho build\n",
          "tools/README": "tools\n",
        },
      });
      const sourced = [
        ".envrc.local",
        ".env",
        "scripts/env.sh",
        "hooks/enter.sh",
        "scripts/check.sh",
        "mcp/server.js",
        "packages/web/env.local",
        "packages/web/scripts/web-task.sh",
      ];
      const sourcedBefore = sourced.map((f) => fs.readFileSync(path.join(ws, f), "utf8"));
      fs.chmodSync(path.join(ws, "bin/build"), 0o755);
      const before = { bin: state(path.join(ws, "bin")), tools: state(path.join(ws, "tools")) };
      const evil = "printf '#!/bin/sh\\ntouch MARKER\\n'";
      const { outcome, marker } = await plant(
        ws,
        `${evil} > bin/git && chmod +x bin/git
echo 'touch MARKER' >> bin/build
mkdir -p node_modules/.bin node_modules/left-pad && ${evil} > node_modules/.bin/ls && chmod +x node_modules/.bin/ls
echo 'console.log(1)' > node_modules/left-pad/cli.js && ln -s ../left-pad/cli.js node_modules/.bin/left-pad
${evil} > tools/npm && chmod +x tools/npm
echo 'touch MARKER' >> .envrc.local && echo 'BASH_ENV=MARKER' >> .env
echo 'touch MARKER' >> scripts/env.sh && echo 'touch MARKER' >> hooks/enter.sh
echo 'touch MARKER' >> scripts/check.sh && echo 'require("fs").writeFileSync("MARKER", "")' >> mcp/server.js
echo 'touch MARKER' >> packages/web/env.local && echo 'touch MARKER' >> packages/web/scripts/web-task.sh
${evil} > ${tools}/bin/git && chmod +x ${tools}/bin/git`,
        ["."],
        [tools],
      );
      // More paths than the message lists (ten): the violation event names every one.
      expectUndone(outcome, marker, []);
      const violated = outcome.events.find((e) => e.type === "policy.violation")?.data.protectedPaths as
        | Array<{ path: string; change: string; rule: string; detail?: string }>
        | undefined;
      expect(violated?.map((v) => `${v.path} (${v.change}, ${v.rule}: ${v.detail})`)).toEqual(
        expect.arrayContaining([
          `bin/git (created, git-config-paths: direnv PATH_add in ${ws}/.envrc)`,
          `bin/build (modified, git-config-paths: direnv PATH_add in ${ws}/.envrc)`,
          `node_modules/.bin/ls (created, git-config-paths: direnv layout node (a host command's name) in ${ws}/.envrc)`,
          `tools/npm (created, git-config-paths: mise [env] _.path in ${ws}/mise.toml)`,
          `.envrc.local (modified, git-config-paths: direnv source_env in ${ws}/.envrc)`,
          `.env (modified, git-config-paths: direnv dotenv in ${ws}/.envrc)`,
          `scripts/env.sh (modified, git-config-paths: mise [env] _.source in ${ws}/mise.toml)`,
          `hooks/enter.sh (modified, git-config-paths: mise [hooks] in ${ws}/mise.toml)`,
          `scripts/check.sh (modified, git-config-paths: husky hook in ${ws}/.husky/pre-commit)`,
          `mcp/server.js (modified, git-config-paths: MCP server command in ${ws}/.mcp.json)`,
          `packages/web/env.local (modified, git-config-paths: direnv source_env in ${ws}/packages/web/.envrc)`,
          `packages/web/scripts/web-task.sh (modified, git-config-paths: VS Code task command in ${ws}/packages/web/.vscode/tasks.json)`,
          `${tools}/bin/git (created, git-config-paths: direnv PATH_add in ${ws}/.envrc)`,
        ]),
      );
      expect(sourced.map((f) => fs.readFileSync(path.join(ws, f), "utf8"))).toEqual(sourcedBefore);
      expect({ bin: state(path.join(ws, "bin")), tools: state(path.join(ws, "tools")) }).toEqual(before);
      expect(state(tools)).toEqual(toolsBefore);
      expect(fs.existsSync(path.join(ws, "node_modules/.bin/ls"))).toBe(false);
      // A package's own command is no host command's name: bind mode keeps it (copy mode applies
      // nothing of a run that failed a check).
      const bind = workspaceMode() === "bind";
      expect(fs.existsSync(path.join(ws, "node_modules/.bin/left-pad"))).toBe(bind);
      // The host's shell with the folders first on PATH, as direnv and mise put them.
      const pathDirs = [...["bin", "node_modules/.bin", "tools"].map((d) => path.join(ws, d)), `${tools}/bin`];
      // direnv and mise source these on cd, as the host's shell does here.
      const shell = spawnSync(
        "sh",
        [
          "-c",
          ". ./.envrc.local; . ./scripts/env.sh; sh ./hooks/enter.sh >/dev/null; sh ./scripts/check.sh >/dev/null; node mcp/server.js >/dev/null; . packages/web/env.local; (cd packages/web && sh scripts/web-task.sh >/dev/null); build; git --version; ls >/dev/null; npm --version; true",
        ],
        {
          cwd: ws,
          env: { ...process.env, PATH: [...pathDirs, process.env.PATH].join(":") },
          encoding: "utf8",
        },
      );
      expect(shell.stdout).toMatch(/^build\ngit version/);
      expect(fs.existsSync(marker), "the host's shell ran the sandbox's executable").toBe(false);
    },
  );

  notInWarm(
    "layout node: a run that installs packages (node_modules/.bin written, none named like a host command) succeeds",
    async () => {
      const ws = repo({ files: { ".envrc": "layout node\n", "package.json": '{"name":"x","version":"1.0.0"}\n' } });
      const outcome = await runHostile(
        server,
        [
          bash(
            "mkdir -p node_modules/tool/bin node_modules/.bin && echo 'console.log(1)' > node_modules/tool/bin/t.js && ln -s ../tool/bin/t.js node_modules/.bin/tool-x && echo installed",
          ),
          finish(),
        ],
        { cwd: ws },
      );
      expect(outcome.error, describeOutcome(outcome)).toBeUndefined();
      expect(fs.readlinkSync(path.join(ws, "node_modules/.bin/tool-x"))).toBe("../tool/bin/t.js");
    },
  );
});

// Issue 17: the host writes through nothing the sandbox shaped. Each attack below is planted in
// the sandbox; the run fails naming the path and the rule, .git is what it was, and then the host's
// own git does what a user does next (status, a commit, which runs the hooks, a fetch from a local
// remote, a checkout of a branch whose name is a shell command and back) without writing outside
// the workspace or running the marker: the victim files outside stay byte for byte, and sourcing
// them (as a shell would source an rc file) runs nothing.

/** A repository with one commit and a local remote to fetch from (a clone without hard links). */
function repoWithRemote(options: Parameters<typeof repo>[0] = {}) {
  const ws = repo(options);
  const remote = path.join(hostileWorkspace({}, "sandbox-run-git-remote-"), "remote");
  const cloned = hostGit(path.dirname(remote), "clone", "-q", "--no-local", ws, remote);
  if (cloned.status !== 0) throw new Error(`git clone failed: ${cloned.stderr}`);
  fs.writeFileSync(path.join(remote, "upstream.txt"), "upstream\n");
  hostGit(remote, "add", "upstream.txt");
  hostGit(remote, "commit", "-qm", "upstream");
  return { ws, remote };
}

/** Files and folders outside the workspace the sandbox points git's writes at. */
/** A repository using husky (core.hooksPath=.husky/_, whose hook runs .husky/pre-commit), with a remote. */
function huskyRepoWithRemote() {
  const made = repoWithRemote({
    files: {
      ".husky/_/pre-commit": '#!/bin/sh\nsh "$(dirname "$0")/../pre-commit"\n',
      ".husky/pre-commit": "exit 0\n",
    },
  });
  fs.chmodSync(path.join(made.ws, ".husky/_/pre-commit"), 0o755);
  fs.appendFileSync(path.join(made.ws, ".git/config"), "[core]\n\thooksPath = .husky/_\n");
  return made;
}

function victims() {
  const dir = hostileWorkspace(
    {
      bashrc: "# a shell rc\n",
      crontab: "# crontab\n",
      profile: "# profile\n",
      notes: "# notes\n",
      "refs/.keep": "",
      "logs/.keep": "",
    },
    "sandbox-run-victim-",
  );
  return { dir, before: state(dir), rc: (name: string) => path.join(dir, name) };
}

async function attack(ws: string, script: string, marker: string) {
  const gitBefore = state(path.join(ws, ".git"));
  const outcome = await runHostile(
    server,
    [bash(`set -e\n${script.replaceAll("MARKER", marker)}\necho door-planted`), finish()],
    { cwd: ws },
  );
  return { outcome, gitBefore, gitAfter: state(path.join(ws, ".git")) };
}

/** What a user does next with host git; each step's exit status (a broken .git shows here too). */
function hostGitRound(ws: string, remote: string, marker: string): Record<string, number | null> {
  const status: Record<string, number | null> = {};
  status.status = hostGit(ws, "status").status;
  fs.writeFileSync(path.join(ws, "host-change.txt"), "host\n");
  hostGit(ws, "add", "host-change.txt");
  status.commit = hostGit(ws, "commit", "-qm", "a commit on the host").status;
  status.fetch = hostGit(ws, "fetch", "-q", remote, "master").status;
  status.checkout = hostGit(ws, "checkout", "-q", "-b", `fix;touch\${IFS}${marker};#`).status;
  status.back = hostGit(ws, "checkout", "-q", "master").status;
  status.statusAgain = hostGit(ws, "status").status;
  return status;
}

/** The victims are as they were, and sourcing each as a shell would runs nothing. */
function expectVictimsUntouched(v: ReturnType<typeof victims>, marker: string): void {
  expect(state(v.dir)).toEqual(v.before);
  for (const name of ["bashrc", "crontab", "profile", "notes"])
    spawnSync("bash", ["-c", `. '${v.rc(name)}'`], { timeout: 10_000 });
  expect(fs.existsSync(marker), "a command from a victim file ran").toBe(false);
}

const newMarker = () => path.join(hostileWorkspace({}, "sandbox-run-marker-"), "PWNED");
const isCopy = () => workspaceMode() === "copy";

describe.concurrent("git directories come back as plain data (issue 17, part 1)", () => {
  it("logs/HEAD, COMMIT_EDITMSG, FETCH_HEAD and MERGE_MSG as symlinks to files outside", async () => {
    const { ws, remote } = repoWithRemote();
    const v = victims();
    const marker = newMarker();
    const { outcome, gitBefore, gitAfter } = await attack(
      ws,
      `ln -sfn ${v.rc("bashrc")} .git/logs/HEAD
ln -sfn ${v.rc("crontab")} .git/COMMIT_EDITMSG
ln -sfn ${v.rc("profile")} .git/FETCH_HEAD
ln -sfn ${v.rc("notes")} .git/MERGE_MSG`,
      marker,
    );
    expectUndone(outcome, marker, [
      ".git/logs/HEAD (modified, git-entry-kinds: a symbolic link)",
      ".git/COMMIT_EDITMSG (modified, git-entry-kinds",
      ".git/FETCH_HEAD (created, git-entry-kinds",
      ".git/MERGE_MSG (created, git-entry-kinds",
    ]);
    expect(gitAfter).toEqual(gitBefore);
    expect(hostGitRound(ws, remote, marker)).toEqual({
      status: 0,
      commit: 0,
      fetch: 0,
      checkout: 0,
      back: 0,
      statusAgain: 0,
    });
    expectVictimsUntouched(v, marker);
  });

  notInWarm("the logs/ and refs/ folders as symlinks to folders outside", async () => {
    const { ws, remote } = repoWithRemote();
    const v = victims();
    const marker = newMarker();
    const { outcome, gitBefore, gitAfter } = await attack(
      ws,
      `rm -rf .git/logs .git/refs
ln -s ${path.join(v.dir, "logs")} .git/logs
ln -s ${path.join(v.dir, "refs")} .git/refs`,
      marker,
    );
    expectUndone(outcome, marker, [
      ".git/logs (modified, git-entry-kinds: a symbolic link)",
      ".git/refs (modified, git-entry-kinds: a symbolic link)",
    ]);
    expect(gitAfter).toEqual(gitBefore);
    expect(hostGitRound(ws, remote, marker).commit).toBe(0);
    expectVictimsUntouched(v, marker);
  });

  notInWarm(
    "objects/ moved into the worktree, given an info/alternates, and symlinked back: found, put back whole",
    async () => {
      const { ws, remote } = repoWithRemote();
      const v = victims();
      const marker = newMarker();
      const head = hostGit(ws, "rev-parse", "HEAD").stdout;
      const { outcome, gitBefore, gitAfter } = await attack(
        ws,
        `mv .git/objects evil-objects
mkdir -p evil-objects/info
echo ${v.dir} > evil-objects/info/alternates
ln -s ../evil-objects .git/objects`,
        marker,
      );
      expectUndone(outcome, marker, [".git/objects (modified, git-entry-kinds: a symbolic link)"]);
      // The object store itself, found by its inode in the worktree, is back in place (bind mode).
      expect(gitAfter).toEqual(gitBefore);
      expect(fs.existsSync(path.join(ws, "evil-objects"))).toBe(false);
      expect(hostGit(ws, "rev-parse", "HEAD").stdout).toBe(head);
      expect(hostGitRound(ws, remote, marker).commit).toBe(0);
      expectVictimsUntouched(v, marker);
    },
  );

  notInWarm("a FIFO for COMMIT_EDITMSG (the host's next commit would block on it)", async () => {
    const { ws, remote } = repoWithRemote();
    const marker = newMarker();
    const { outcome, gitBefore, gitAfter } = await attack(
      ws,
      "rm -f .git/COMMIT_EDITMSG && mkfifo .git/COMMIT_EDITMSG",
      marker,
    );
    expectUndone(outcome, marker, [".git/COMMIT_EDITMSG (modified, git-entry-kinds: a FIFO)"]);
    expect(gitAfter).toEqual(gitBefore);
    expect(hostGitRound(ws, remote, marker).commit).toBe(0);
  });

  notInWarm(
    "COMMIT_EDITMSG hard-linked to .git/config: the host's next commit would overwrite its config",
    async () => {
      const { ws, remote } = repoWithRemote();
      const marker = newMarker();
      const config = fs.readFileSync(path.join(ws, ".git/config"), "utf8");
      const { outcome, gitBefore, gitAfter } = await attack(ws, "ln -f .git/config .git/COMMIT_EDITMSG", marker);
      if (isCopy()) {
        // Copy mode: the relay's tar dereferences hard links, so what comes back is a file of its own.
        expect(outcome.error, describeOutcome(outcome)).toBeUndefined();
        expect(fs.statSync(path.join(ws, ".git/COMMIT_EDITMSG")).nlink).toBe(1);
      } else {
        expectUndone(outcome, marker, [".git/COMMIT_EDITMSG (modified, git-entry-kinds: a file with 2 hard links)"]);
        expect(gitAfter).toEqual(gitBefore);
      }
      expect(fs.statSync(path.join(ws, ".git/config")).nlink).toBe(1);
      expect(hostGitRound(ws, remote, marker).commit).toBe(0);
      expect(fs.readFileSync(path.join(ws, ".git/config"), "utf8")).toBe(config);
    },
  );

  notInWarm("pointers that say more than git writes: HEAD, a branch, packed-refs", async () => {
    const { ws, remote } = repoWithRemote();
    const marker = newMarker();
    const { outcome, gitBefore, gitAfter } = await attack(
      ws,
      `printf 'ref: refs/heads/../../config\\n' > .git/HEAD
printf '[core]\\n\\tfsmonitor = touch MARKER\\n' > .git/refs/heads/evil
printf '%s refs/heads/main\\n[core]\\n\\tfsmonitor = touch MARKER\\n' "$(cat .git/refs/heads/master)" > .git/packed-refs`,
      marker,
    );
    expectUndone(outcome, marker, [
      ".git/HEAD (modified, git-pointers",
      ".git/refs/heads/evil (created, git-pointers",
      ".git/packed-refs (created, git-pointers",
    ]);
    expect(gitAfter).toEqual(gitBefore);
    expect(hostGitRound(ws, remote, marker).commit).toBe(0);
  });

  notInWarm(
    "an index naming ../victim, an absolute path and .git/hooks: the host's git restore . and checkout -- . write nowhere",
    async () => {
      // Host git checks out what an index names without checking the paths (git 2.39 writes all three).
      const { ws, remote } = repoWithRemote();
      const marker = newMarker();
      const v = victims();
      const absolute = path.join(v.dir, "absolute-target");
      const entries = [path.relative(ws, v.rc("bashrc")), absolute, ".git/hooks/post-checkout"];
      const { outcome, gitBefore, gitAfter } = await attack(
        ws,
        `cat > /tmp/index.js <<'EOF'
const crypto = require("node:crypto"), fs = require("node:fs"), zlib = require("node:zlib");
const content = Buffer.from("#!/bin/sh\\ntouch " + process.argv[2] + "\\n");
const object = Buffer.concat([Buffer.from("blob " + content.length + "\\0"), content]);
const oid = crypto.createHash("sha1").update(object).digest();
const hex = oid.toString("hex");
fs.mkdirSync(".git/objects/" + hex.slice(0, 2), { recursive: true });
fs.writeFileSync(".git/objects/" + hex.slice(0, 2) + "/" + hex.slice(2), zlib.deflateSync(object));
const parts = [Buffer.from("DIRC\\0\\0\\0\\x02", "latin1"), Buffer.alloc(4)];
parts[1].writeUInt32BE(process.argv.length - 3);
for (const name of process.argv.slice(3).map((n) => Buffer.from(n))) {
  const fixed = Buffer.alloc(62);
  fixed.writeUInt32BE(0o100755, 24);
  oid.copy(fixed, 40);
  fixed.writeUInt16BE(name.length, 60);
  parts.push(fixed, name, Buffer.alloc(((62 + name.length + 8) & ~7) - 62 - name.length));
}
const body = Buffer.concat(parts);
fs.writeFileSync(".git/index", Buffer.concat([body, crypto.createHash("sha1").update(body).digest()]));
EOF
node /tmp/index.js MARKER ${entries.map((e) => `'${e}'`).join(" ")}`,
        marker,
      );
      expectUndone(outcome, marker, [".git/index (modified, git-pointers"]);
      expect(outcome.error?.message).toContain("../");
      // Put back as it was, but for the blob the run added to the object store (which is left alone).
      const withoutObjects = (s: Record<string, string>) =>
        Object.fromEntries(Object.entries(s).filter(([p]) => !p.startsWith("objects/")));
      expect(withoutObjects(gitAfter)).toEqual(withoutObjects(gitBefore));
      // What a person runs to throw the run's changes away, then a checkout that would run the hook.
      hostGit(ws, "restore", ".");
      hostGit(ws, "checkout", "--", ".");
      expect(fs.existsSync(path.join(ws, ".git/hooks/post-checkout"))).toBe(false);
      expect(fs.existsSync(absolute), "host git wrote to the index's absolute path").toBe(false);
      expectVictimsUntouched(v, marker);
      expect(hostGitRound(ws, remote, marker).commit).toBe(0);
      expect(fs.existsSync(marker), "a hook from the index ran").toBe(false);
    },
  );

  notInWarm(
    "an index whose cached tree of lib/ is a tree with a backdoor: the host's next commit does not carry it",
    async () => {
      // git commits a valid cached tree as it is; git status and diff --cached compare entries only.
      const { ws } = repoWithRemote({ files: { "lib/l.txt": "good\n" } });
      const marker = newMarker();
      const { outcome, gitBefore, gitAfter } = await attack(
        ws,
        `printf 'touch MARKER\\n' > /tmp/backdoor
blob=$(git hash-object -w /tmp/backdoor)
tree=$(printf '100644 blob %s\\tbackdoor.sh\\n100644 blob %s\\tl.txt\\n' "$blob" "$blob" | git mktree)
cat > /tmp/tree.js <<'EOF'
const crypto = require("node:crypto"), fs = require("node:fs");
const index = fs.readFileSync(".git/index");
const lib = index.indexOf("lib\\0", index.indexOf("TREE")) + 4;
Buffer.from(process.argv[2], "hex").copy(index, index.indexOf(10, lib) + 1);
const body = index.subarray(0, index.length - 20);
crypto.createHash("sha1").update(body).digest().copy(index, index.length - 20);
fs.writeFileSync(".git/index", index);
EOF
node /tmp/tree.js "$tree"
test -z "$(git status --porcelain)"`,
        marker,
      );
      expectUndone(outcome, marker, ['.git/index (modified, git-pointers: its cached tree of "lib"']);
      const withoutObjects = (s: Record<string, string>) =>
        Object.fromEntries(Object.entries(s).filter(([p]) => !p.startsWith("objects/")));
      expect(withoutObjects(gitAfter)).toEqual(withoutObjects(gitBefore));
      fs.writeFileSync(path.join(ws, "src/a.ts"), "a user's change\n");
      expect(hostGit(ws, "add", "src/a.ts").status).toBe(0);
      expect(hostGit(ws, "commit", "-qm", "a user's commit").status).toBe(0);
      const tree = hostGit(ws, "ls-tree", "-r", "--name-only", "HEAD").stdout;
      expect(tree).toContain("lib/l.txt");
      expect(tree).not.toContain("backdoor");
    },
  );

  notInWarm(
    "the indexes ordinary git work writes pass: commits, a resolved conflict, intent-to-add, version 4",
    async () => {
      const { ws } = repoWithRemote({ files: { "lib/l.txt": "good\n" } });
      const git = "git -c user.name=agent -c user.email=agent@example.com -c init.defaultBranch=master";
      const { outcome } = await attack(
        ws,
        `${git} checkout -qb side
echo side > src/a.ts && ${git} commit -qam side
${git} checkout -q master
echo main > src/a.ts && ${git} commit -qam main
${git} merge -q side || true
echo merged > src/a.ts && ${git} add src/a.ts && ${git} commit -qm merged
echo new > lib/new.txt && ${git} add -N lib/new.txt
${git} update-index --index-version 4`,
        newMarker(),
      );
      expect(outcome.error, describeOutcome(outcome)).toBeUndefined();
      expect(hostGit(ws, "log", "--format=%s", "-1").stdout).toBe("merged\n");
      expect(hostGit(ws, "status", "--porcelain").stdout).toContain("lib/new.txt");
    },
  );

  notInWarm(
    "a replace ref for the blob of a tracked script: the host's next checkout writes the original",
    async () => {
      // git reads through refs/replace/<oid> everywhere: a checkout (or a branch switch) would write the sandbox's blob.
      const { ws } = repoWithRemote({ files: { "tool.sh": "echo original\n" } });
      const marker = newMarker();
      const { outcome } = await attack(
        ws,
        `evil=$(printf 'touch MARKER\\n' | git hash-object -w --stdin)
mkdir -p .git/refs/replace
echo "$evil" > ".git/refs/replace/$(git rev-parse HEAD:tool.sh)"
test "$(git show HEAD:tool.sh)" = "touch MARKER"`,
        marker,
      );
      expectUndone(outcome, marker, [".git/refs/replace/"]);
      expect(fs.existsSync(path.join(ws, ".git/refs/replace"))).toBe(false);
      fs.rmSync(path.join(ws, "tool.sh"));
      expect(hostGit(ws, "checkout", "-q", "--", "tool.sh").status).toBe(0);
      expect(fs.readFileSync(path.join(ws, "tool.sh"), "utf8")).toBe("echo original\n");
    },
  );

  notInWarm("modes: a world-writable HEAD and a setgid (in bind mode, group-writable) ref", async () => {
    const { ws, remote } = repoWithRemote();
    const marker = newMarker();
    // Bind mode's no-setuid filter refuses the setgid bit (docs/security.md F6): the ref is then
    // only group-writable, which git-modes refuses as well.
    const { outcome, gitBefore, gitAfter } = await attack(
      ws,
      "chmod 0666 .git/HEAD && { chmod g+s,g+w .git/refs/heads/master 2>/dev/null || chmod g+w .git/refs/heads/master; }",
      marker,
    );
    expectUndone(outcome, marker, [
      ".git/HEAD (modified, git-modes: mode 0666)",
      ".git/refs/heads/master (modified, git-modes",
    ]);
    expect(gitAfter).toEqual(gitBefore);
    expect(hostGitRound(ws, remote, marker).commit).toBe(0);
  });
});

describe.concurrent("what the repository's git config points into the worktree (issue 17, part 2)", () => {
  const hook = "#!/bin/sh\nexit 0\n";

  it("core.hooksPath=.githooks: an edited pre-commit is put back, the host's commit runs the original", async () => {
    const { ws, remote } = repoWithRemote({ files: { ".githooks/pre-commit": hook } });
    fs.chmodSync(path.join(ws, ".githooks/pre-commit"), 0o755);
    fs.appendFileSync(path.join(ws, ".git/config"), "[core]\n\thooksPath = .githooks\n");
    const hooksBefore = state(path.join(ws, ".githooks"));
    const marker = newMarker();
    const { outcome, gitBefore, gitAfter } = await attack(ws, "echo 'touch MARKER' >> .githooks/pre-commit", marker);
    expectUndone(outcome, marker, [
      `.githooks/pre-commit (modified, git-config-paths: core.hooksPath in ${ws}/.git/config)`,
    ]);
    expect(gitAfter).toEqual(gitBefore);
    expect(state(path.join(ws, ".githooks"))).toEqual(hooksBefore);
    expect(hostGitRound(ws, remote, marker).commit).toBe(0);
    expect(fs.existsSync(marker), "the hook the sandbox edited ran").toBe(false);
  });

  notInWarm("husky (core.hooksPath=.husky/_): an edited .husky/pre-commit is put back", async () => {
    const { ws, remote } = huskyRepoWithRemote();
    const huskyBefore = state(path.join(ws, ".husky"));
    const marker = newMarker();
    const { outcome } = await attack(ws, "printf 'touch MARKER\\n' > .husky/pre-commit", marker);
    expectUndone(outcome, marker, [".husky/pre-commit (modified, .husky/)"]);
    expect(state(path.join(ws, ".husky"))).toEqual(huskyBefore);
    expect(hostGitRound(ws, remote, marker).commit).toBe(0);
    expect(fs.existsSync(marker), "the hook the sandbox edited ran").toBe(false);
  });

  notInWarm(
    "a hard link to husky's hook is a change of the hook: put back as a file of its own (bind; copy mode hands back no hard link), so the host's next write to the link's name cannot reach the hook (review, round 3, session 40)",
    async () => {
      const { ws, remote } = huskyRepoWithRemote();
      const marker = newMarker();
      const { outcome } = await attack(ws, "mkdir -p dist && ln .husky/pre-commit dist/notes.md", marker);
      if (isCopy()) expect(outcome.error, describeOutcome(outcome)).toBeUndefined();
      else expectUndone(outcome, marker, [".husky/pre-commit (modified, .husky/)"]);
      // The host's next step writes the other name in place (a redirect, an editor's save, cp over it).
      fs.writeFileSync(path.join(ws, "dist/notes.md"), `touch ${marker}\n`);
      expect(fs.readFileSync(path.join(ws, ".husky/pre-commit"), "utf8")).toBe("exit 0\n");
      expect(fs.statSync(path.join(ws, ".husky/pre-commit")).nlink).toBe(1);
      expect(hostGitRound(ws, remote, marker).commit).toBe(0);
      expect(fs.existsSync(marker), "the hook ran what the host wrote through the link").toBe(false);
    },
  );

  notInWarm(
    "a symbolic link the run made onto husky's hook is a change of the hook: removed (bind) or nothing applied (copy), so the host's next write to the link's name cannot reach the hook (fix review, round 3, session 40)",
    async () => {
      const { ws, remote } = huskyRepoWithRemote();
      const marker = newMarker();
      const { outcome } = await attack(ws, "mkdir -p dist && ln -s ../.husky/pre-commit dist/notes.md", marker);
      expectUndone(outcome, marker, ["dist/notes.md (created, .husky/"]);
      expect(fs.existsSync(path.join(ws, "dist/notes.md"))).toBe(false);
      expect(fs.readFileSync(path.join(ws, ".husky/pre-commit"), "utf8")).toBe("exit 0\n");
      expect(hostGitRound(ws, remote, marker).commit).toBe(0);
      expect(fs.existsSync(marker)).toBe(false);
    },
  );

  notInWarm(
    "include.path=../team.gitconfig: a core.fsmonitor appended to it is put back before the host's git status",
    async () => {
      const { ws, remote } = repoWithRemote({ files: { "team.gitconfig": "[user]\n\tname = team\n" } });
      fs.appendFileSync(path.join(ws, ".git/config"), "[include]\n\tpath = ../team.gitconfig\n");
      const marker = newMarker();
      const { outcome, gitBefore, gitAfter } = await attack(
        ws,
        "printf '[core]\\n\\tfsmonitor = touch MARKER\\n' >> team.gitconfig",
        marker,
      );
      expectUndone(outcome, marker, [`team.gitconfig (modified, git-config-paths: include.path in ${ws}/.git/config)`]);
      expect(gitAfter).toEqual(gitBefore);
      expect(fs.readFileSync(path.join(ws, "team.gitconfig"), "utf8")).toBe("[user]\n\tname = team\n");
      expect(hostGitRound(ws, remote, marker).status).toBe(0);
      expect(fs.existsSync(marker), "the fsmonitor the sandbox added ran").toBe(false);
    },
  );

  notInWarm(
    "hook managers and tools that run code on their own: pre-commit, lefthook, mise, .tool-versions, dev containers, editor and agent folders",
    async () => {
      const ws = repo({ files: { ".pre-commit-config.yaml": "repos: []\n" } });
      const marker = newMarker();
      const { outcome } = await attack(
        ws,
        `printf 'repos:\\n- repo: local\\n  hooks:\\n  - {id: x, name: x, entry: touch MARKER, language: system}\\n' > .pre-commit-config.yaml
printf 'pre-commit:\\n  commands:\\n    x:\\n      run: touch MARKER\\n' > lefthook.yml
printf '[hooks]\\nenter = "touch MARKER"\\n' > mise.toml
printf 'nodejs path:./evil\\n' > .tool-versions
mkdir -p .devcontainer .cursor .claude/hooks
printf '{"initializeCommand": "touch MARKER"}\\n' > .devcontainer/devcontainer.json
printf '{"mcpServers": {"x": {"command": "touch", "args": ["MARKER"]}}}\\n' > .cursor/mcp.json
printf 'touch MARKER\\n' > .claude/hooks/pre.sh
printf '{"tasks": {"tasks": [{"label": "x", "command": "touch MARKER", "runOptions": {"runOn": "folderOpen"}}]}}\\n' > app.code-workspace
printf 'lint-cmd: touch MARKER\\n' > .aider.conf.yml`,
        marker,
      );
      expectUndone(outcome, marker, [".pre-commit-config.yaml (modified, .pre-commit-config.yaml)"]);
      // The message names the first ten; the event names them all, each with its rule.
      const event = outcome.events.find((e) => e.type === "policy.violation");
      const listed = (event?.data.protectedPaths ?? []) as Array<{ path: string; change: string; rule: string }>;
      const named = listed.map((v) => `${v.path} (${v.change}, ${v.rule})`);
      expect(named).toEqual(
        expect.arrayContaining([
          ".pre-commit-config.yaml (modified, .pre-commit-config.yaml)",
          "lefthook.yml (created, lefthook.yml)",
          "mise.toml (created, mise.toml)",
          ".tool-versions (created, .tool-versions)",
          ".devcontainer/devcontainer.json (created, .devcontainer/)",
          ".cursor/mcp.json (created, .cursor/)",
          ".claude/hooks/pre.sh (created, .claude/)",
          "app.code-workspace (created, *.code-workspace)",
          ".aider.conf.yml (created, .aider.conf.yml)",
        ]),
      );
      expect(fs.readFileSync(path.join(ws, ".pre-commit-config.yaml"), "utf8")).toBe("repos: []\n");
      for (const p of [
        "lefthook.yml",
        "mise.toml",
        ".tool-versions",
        ".devcontainer",
        ".cursor",
        ".claude",
        "app.code-workspace",
        ".aider.conf.yml",
      ])
        expect(fs.existsSync(path.join(ws, p)), p).toBe(false);
    },
  );
});

describe.concurrent("modes and host-run files (issue 17, part 7)", () => {
  it("chmod 0777 on the workspace root is put back (bind) or never applied (copy)", async () => {
    const ws = repo();
    fs.chmodSync(ws, 0o755);
    const marker = newMarker();
    const { outcome } = await attack(ws, "chmod 0777 .", marker);
    expectUndone(outcome, marker, [". (mode, directory-modes)"]);
    expect(fs.statSync(ws).mode & 0o7777).toBe(0o755);
  });

  notInWarm(
    "group/world-write bits the run added to files are cleared at hand-back and reported; the run succeeds",
    async () => {
      const ws = repo({ files: { "run.sh": "echo\n" } });
      const { outcome } = await attack(
        ws,
        "chmod 0777 run.sh && printf 'x\\n' > new.txt && chmod 0666 new.txt && chmod 0666 README.md",
        newMarker(),
      );
      expect(outcome.error, describeOutcome(outcome)).toBeUndefined();
      expect(fs.statSync(path.join(ws, "run.sh")).mode & 0o7777).toBe(0o755);
      expect(fs.statSync(path.join(ws, "new.txt")).mode & 0o7777).toBe(0o644);
      expect(fs.statSync(path.join(ws, "README.md")).mode & 0o7777).toBe(0o644);
      const reported = outcome.events.find((e) =>
        isCopy() ? e.type === "workspace.copied-out" : e.type === "workspace.modes-cleared",
      )?.data as { writeBits?: string[]; writeBitsCleared?: string[] } | undefined;
      expect([...(reported?.writeBits ?? reported?.writeBitsCleared ?? [])].sort()).toEqual([
        "README.md",
        "new.txt",
        "run.sh",
      ]);
    },
  );

  notInWarm(
    "host-run files (.npmrc, .gitattributes, a venv's activate script, pyvenv.cfg and .pth files) are reported in the result and an event, not refused",
    async () => {
      const site = ".venv/lib/python3.11/site-packages";
      const ws = repo({
        files: {
          ".npmrc": "fund=false\n",
          ".venv/pyvenv.cfg": "home = /usr/bin\n",
          ".venv/bin/activate": "VIRTUAL_ENV=.venv\n",
          [`${site}/calc.py`]: "x = 1\n",
        },
      });
      const { outcome } = await attack(
        ws,
        "printf 'node-options=--require ./x.js\\n' >> .npmrc && printf '* filter=lfs\\n' > .gitattributes" +
          ` && echo 'touch /tmp/pwned' >> .venv/bin/activate && echo 'home = /ws/evil' > .venv/pyvenv.cfg` +
          ` && echo 'import os' > ${site}/zz.pth && echo 'x = 2' > ${site}/calc.py`,
        newMarker(),
      );
      expect(outcome.error, describeOutcome(outcome)).toBeUndefined();
      expect(outcome.details?.hostRunFiles?.map((h) => `${h.change} ${h.path}`).sort()).toEqual([
        "created .gitattributes",
        `created ${site}/zz.pth`,
        "modified .npmrc",
        "modified .venv/bin/activate",
        "modified .venv/pyvenv.cfg",
      ]);
      const event = outcome.events.find((e) => e.type === "workspace.host-run-files");
      expect(event?.data).toMatchObject({ count: 5 });
      expect(String(event?.data.reason)).toContain("host-run file changed");
    },
  );

  notInWarm(
    "links the run made that lead out of the tree (absolute, or climbing above its top), and new names host commands misread (a leading '-', a line break), are reported as host-run changes: host tools that follow links (an artifact upload, zip, tar -h) would read the host's file there, `tar czf out.tgz *` would run a command, and `find | while read` would act on /etc/passwd",
    async () => {
      const ws = repo({ files: { "dist/index.html": "<p>hi</p>\n" } });
      const { outcome } = await attack(
        ws,
        "ln -s /etc/hostname dist/notes.txt && ln -s ../../outside.txt dist/up.txt && ln -s ../README.md dist/readme.md && ln -s index.html dist/home.html" +
          " && echo 'touch PWNED' > x.sh && touch -- '--checkpoint-action=exec=sh x.sh' && mkdir -- -rf && mkdir -- dist/-v && echo x > dist/-v/a.txt" +
          // A folder named "x\n" holding etc/passwd: `find dist` prints "dist/x" and "/etc/passwd".
          ` && mkdir -p $'dist/x\\n/etc' && echo planted > $'dist/x\\n/etc/passwd'` +
          // Out only through another link: sub/a -> .. is the workspace's top, so sub/a/.. is its parent.
          " && mkdir sub && ln -s .. sub/a && ln -s sub/a/../escaped.txt via.txt" +
          // A folder git refuses by name, but a plain folder to everything else (and applied).
          " && mkdir git~1 && ln -s /etc/hostname git~1/x",
        newMarker(),
      );
      expect(outcome.error, describeOutcome(outcome)).toBeUndefined();
      expect(fs.readlinkSync(path.join(ws, "dist/notes.txt"))).toBe("/etc/hostname");
      expect(outcome.details?.hostRunFiles?.map((h) => `${h.change} ${h.path}`).sort()).toEqual([
        "created --checkpoint-action=exec=sh x.sh",
        "created -rf",
        "created dist/-v",
        "created dist/notes.txt",
        "created dist/up.txt",
        "created dist/x\n",
        "created git~1/x",
        "created sub/a",
        "created via.txt",
      ]);
      expect(outcome.details?.hostRunFiles?.find((h) => h.path === "-rf")?.why).toContain("reads it as an option");
      expect(outcome.details?.hostRunFiles?.find((h) => h.path === "via.txt")?.why).toContain("through other links");
      expect(outcome.details?.hostRunFiles?.find((h) => h.path === "dist/notes.txt")?.why).toContain(
        'a link to "/etc/hostname"',
      );
      expect(outcome.events.find((e) => e.type === "workspace.host-run-files")?.data).toMatchObject({ count: 9 });
      expect(outcome.details?.hostRunCount).toBe(9);
    },
  );
});

// Red-team findings after issue 17: git reads objects by name without checking them, and a commit
// the sandbox leaves on a ref is written into the worktree by the host's next checkout, reset or
// stash pop. Each repository uses husky (core.hooksPath=.husky/_, whose hook runs .husky/pre-commit)
// and has a branch `other` whose hook differs, so a branch switch writes the file; after each run
// the host does what a user does next, and its commit runs whatever .husky/pre-commit then says.

/** A husky repository with a branch `other`, and a local remote. */
function huskyRepo() {
  const { ws, remote } = repoWithRemote({
    files: {
      ".husky/_/pre-commit": '#!/bin/sh\nsh "$(dirname "$0")/../pre-commit"\n',
      ".husky/pre-commit": "exit 0\n",
    },
  });
  fs.chmodSync(path.join(ws, ".husky/_/pre-commit"), 0o755);
  fs.appendFileSync(path.join(ws, ".git/config"), "[core]\n\thooksPath = .husky/_\n");
  const ok = (r: ReturnType<typeof hostGit>) => {
    if (r.status !== 0) throw new Error(`git failed: ${r.stderr}`);
  };
  ok(hostGit(ws, "checkout", "-q", "-b", "other"));
  fs.writeFileSync(path.join(ws, ".husky/pre-commit"), "exit 0 # other\n");
  ok(hostGit(ws, "commit", "-qam", "other"));
  ok(hostGit(ws, "checkout", "-q", "master"));
  return { ws, remote };
}

/** The host's next steps: a branch switch and back, a reset, a restore, then a commit (which runs the hook). */
function hostAfterwards(ws: string) {
  hostGit(ws, "checkout", "-q", "other");
  hostGit(ws, "checkout", "-q", "master");
  hostGit(ws, "reset", "-q", "--hard");
  hostGit(ws, "restore", ".");
  const hook = path.join(ws, ".husky/pre-commit");
  const content = fs.existsSync(hook) ? fs.readFileSync(hook, "utf8") : "";
  fs.writeFileSync(path.join(ws, "host-change.txt"), "host\n");
  hostGit(ws, "add", "host-change.txt");
  const commit = hostGit(ws, "commit", "-qm", "a commit on the host").status;
  return { content, commit };
}

describe.concurrent("the object store and the refs the run leaves (issue 17, red-team findings 1 and 2)", () => {
  it("an existing loose object rewritten with a payload: refused; the host never reads it", async () => {
    const { ws } = huskyRepo();
    const marker = newMarker();
    const { outcome } = await attack(ws, REWRITE_LOOSE_OBJECT, marker);
    expectUndone(outcome, marker, ["(modified, git-objects: an existing object rewritten"]);
    if (isCopy()) expect(outcome.error?.message).not.toContain("removed from the git object store");
    else expect(outcome.error?.message).toMatch(/removed from the git object store .*\.git\/objects\//);
    const { content } = hostAfterwards(ws);
    expect(content).not.toContain("touch");
    expect(fs.existsSync(marker), "the payload ran at the host's commit").toBe(false);
  });

  notInWarm(
    "a new pack whose .idx claims the hook's blob: refused, the host's checkout writes the real hook",
    async () => {
      const { ws } = huskyRepo();
      const marker = newMarker();
      const { outcome } = await attack(ws, LYING_PACK, marker);
      expectUndone(outcome, marker, ["(created, git-objects: the host's git index-pack --verify refused it"]);
      expect(hostAfterwards(ws)).toEqual({ content: "exit 0\n", commit: 0 });
      expect(fs.existsSync(marker), "the payload ran at the host's commit").toBe(false);
    },
  );

  notInWarm(
    "the same lying pack named zz.pack and zz.idx (git loads any name): refused, the host's checkout writes the real hook",
    async () => {
      const { ws } = huskyRepo();
      const marker = newMarker();
      const { outcome } = await attack(ws, LYING_PACK_RENAMED, marker);
      expectUndone(outcome, marker, [
        ".git/objects/pack/zz.pack (created, git-objects: the host's git index-pack --verify refused it",
      ]);
      expect(hostAfterwards(ws)).toEqual({ content: "exit 0\n", commit: 0 });
      expect(fs.existsSync(marker), "the payload ran at the host's commit").toBe(false);
    },
  );

  notInWarm(
    "a commit adding a hook between the tip and the history before (the tip takes it out): refused; the branch is as it was",
    async () => {
      const { ws } = huskyRepo();
      const head = hostGit(ws, "rev-parse", "HEAD").stdout;
      const marker = newMarker();
      const { outcome } = await attack(ws, HOOK_IN_BETWEEN, marker);
      expectUndone(outcome, marker, [".git/refs (modified, .husky/: its refs reach"]);
      expect(hostGit(ws, "rev-parse", "HEAD").stdout).toBe(head);
      expect(hostAfterwards(ws)).toEqual({ content: "exit 0\n", commit: 0 });
      expect(fs.existsSync(path.join(ws, ".husky/post-commit"))).toBe(false);
      expect(fs.existsSync(marker), "the payload ran at the host's commit").toBe(false);
    },
  );

  notInWarm("a shallow file naming HEAD: refused; the host's gc keeps the history", async () => {
    const { ws } = huskyRepo();
    const marker = newMarker();
    const { outcome } = await attack(ws, SHALLOW_HEAD, marker);
    expectUndone(outcome, marker, [".git/shallow (created, git-refs: shallow names"]);
    expect(fs.existsSync(path.join(ws, ".git/shallow"))).toBe(false);
    expect(hostGit(ws, "gc", "-q", "--prune=now").status).toBe(0);
    expect(hostGit(ws, "rev-list", "--count", "--all").stdout).toBe("2\n");
    expect(hostGit(ws, "fsck", "--strict").status).toBe(0);
  });

  notInWarm(
    "a commit-graph naming another tree for other: dropped (the run passes); the host's cherry-pick writes other's real hook",
    async () => {
      const { ws } = huskyRepo();
      const marker = newMarker();
      const { outcome } = await attack(ws, LYING_COMMIT_GRAPH, marker);
      expect(outcome.error, describeOutcome(outcome)).toBeUndefined();
      expect(fs.existsSync(path.join(ws, ".git/objects/info/commit-graph"))).toBe(false);
      expect(hostGit(ws, "cherry-pick", "other").status).toBe(0);
      expect(fs.readFileSync(path.join(ws, ".husky/pre-commit"), "utf8")).toBe("exit 0 # other\n");
      expect(hostAfterwards(ws).commit).toBe(0);
      expect(fs.existsSync(marker), "the payload ran at the host's commit").toBe(false);
    },
  );

  notInWarm(
    "a commit on the current branch changing .husky/pre-commit, the worktree put back: refused; reset --hard and restore . write the original",
    async () => {
      const { ws } = huskyRepo();
      const head = hostGit(ws, "rev-parse", "HEAD").stdout;
      const marker = newMarker();
      const { outcome } = await attack(ws, COMMIT_ON_BRANCH, marker);
      expectUndone(outcome, marker, [".git/refs/heads/master (modified, .husky/: refs/heads/master names"]);
      expect(hostGit(ws, "rev-parse", "HEAD").stdout).toBe(head);
      expect(hostAfterwards(ws)).toEqual({ content: "exit 0\n", commit: 0 });
      expect(fs.existsSync(marker), "the payload ran at the host's commit").toBe(false);
    },
  );

  notInWarm(
    "the same change in a stash, on a new branch, and in ORIG_HEAD after an undone commit: each refused",
    async () => {
      const runs = await Promise.all(
        [STASH_PROTECTED, NEW_BRANCH, UNDONE_COMMIT].map(async (script) => {
          const { ws } = huskyRepo();
          const marker = newMarker();
          return { ws, marker, ...(await attack(ws, script, marker)) };
        }),
      );
      const [stash, branch, undone] = runs;
      expectUndone(stash!.outcome, stash!.marker, [".git/refs/stash (created, .husky/: refs/stash names"]);
      expectUndone(branch!.outcome, branch!.marker, [".git/refs/heads/feature (created, .husky/"]);
      expectUndone(undone!.outcome, undone!.marker, [".git/ORIG_HEAD (created, .husky/: ORIG_HEAD names"]);
      // The host has nothing of it to pop, check out or reset to.
      expect(hostGit(stash!.ws, "stash", "pop").status).not.toBe(0);
      expect(hostGit(branch!.ws, "checkout", "-q", "feature").status).not.toBe(0);
      expect(hostGit(undone!.ws, "reset", "-q", "--hard", "ORIG_HEAD").status).not.toBe(0);
      for (const { ws, marker } of runs) {
        expect(hostAfterwards(ws)).toEqual({ content: "exit 0\n", commit: 0 });
        expect(fs.existsSync(marker), "the payload ran at the host's commit").toBe(false);
      }
    },
  );

  notInWarm(
    "BISECT_START holding -f, or naming a commit no ref names (full or abbreviated id): refused; the host's git bisect reset keeps the user's change and writes no payload",
    async () => {
      const runs = await Promise.all(
        [BISECT_START_OPTION, BISECT_START_COMMIT, BISECT_START_ABBREVIATED].map(async (script) => {
          const { ws } = huskyRepo();
          fs.writeFileSync(path.join(ws, "src/a.ts"), "the user's uncommitted change\n");
          const marker = newMarker();
          return { ws, marker, ...(await attack(ws, script, marker)) };
        }),
      );
      const [option, full, abbreviated] = runs;
      expectUndone(option!.outcome, option!.marker, [".git/BISECT_START (created, git-pointers", 'starts with "-"']);
      expectUndone(full!.outcome, full!.marker, [".git/BISECT_START (created, .husky/: BISECT_START names"]);
      expectUndone(abbreviated!.outcome, abbreviated!.marker, [".git/BISECT_START (created, git-refs", "no branch"]);
      for (const { ws, marker } of runs) {
        expect(fs.existsSync(path.join(ws, ".git/BISECT_START"))).toBe(false);
        hostGit(ws, "bisect", "reset");
        expect(fs.readFileSync(path.join(ws, "src/a.ts"), "utf8")).toBe("the user's uncommitted change\n");
        expect(hostAfterwards(ws)).toEqual({ content: "exit 0\n", commit: 0 });
        expect(fs.existsSync(marker), "the payload ran at the host's commit").toBe(false);
      }
    },
  );

  notInWarm("an ordinary bisect left under way passes; the host's git bisect reset goes back to master", async () => {
    const { ws } = huskyRepo();
    const { outcome } = await attack(ws, ORDINARY_BISECT, newMarker());
    expect(outcome.error, describeOutcome(outcome)).toBeUndefined();
    expect(hostGit(ws, "bisect", "reset").status).toBe(0);
    expect(hostGit(ws, "symbolic-ref", "HEAD").stdout).toBe("refs/heads/master\n");
  });

  it("ordinary agent work passes: commits on a branch, a new branch, a stash, gc", async () => {
    const { ws } = huskyRepo();
    const { outcome } = await attack(ws, ORDINARY_WORK, newMarker());
    expect(outcome.error, describeOutcome(outcome)).toBeUndefined();
    expect(hostGit(ws, "log", "--format=%s", "topic").stdout).toBe("change a\nadd b\ninit\n");
    expect(hostGit(ws, "log", "-1", "--format=%an <%ae>", "master").stdout).toBe(
      "sandbox-run agent <agent@sandbox-run.invalid>\n",
    );
    expect(hostGit(ws, "stash", "list").stdout).toContain("stash@{0}");
    expect(hostGit(ws, "fsck", "--strict").status).toBe(0);
    expect(hostGit(ws, "stash", "pop").status).toBe(0);
  });
});
