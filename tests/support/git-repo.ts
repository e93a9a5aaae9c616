// Git repositories for the hand-back tests: made and inspected with the test's own git (a private
// HOME, no system config), and traps a host-side commit must never spring: hooks, an fsmonitor and
// a filter driver in the repository's own config that each leave a marker file when they run.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const home = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-git-home-"));
const env = {
  PATH: process.env.PATH,
  HOME: home,
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_AUTHOR_NAME: "Host User",
  GIT_AUTHOR_EMAIL: "host@example.test",
  GIT_COMMITTER_NAME: "Host User",
  GIT_COMMITTER_EMAIL: "host@example.test",
};

/** Runs the test's git in `cwd`; returns stdout. */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, { cwd, env, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** Makes `dir` a repository with everything in it committed once (on branch main). */
export function commitAll(dir: string, message = "base"): string {
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-qm", message);
  return git(dir, "rev-parse", "HEAD").trim();
}

/** The hooks and config a commit by the host's git must never run; each leaves `<markers>/<name>`. */
export const TRAP_HOOKS = [
  "pre-commit",
  "commit-msg",
  "post-commit",
  "reference-transaction",
  "post-index-change",
  "post-checkout",
  "post-rewrite",
];

export function setTraps(repo: string, markers: string): void {
  const hooks = path.join(repo, ".git", "hooks");
  fs.mkdirSync(hooks, { recursive: true });
  for (const hook of TRAP_HOOKS) {
    fs.writeFileSync(path.join(hooks, hook), `#!/bin/sh\ntouch '${markers}/hook-${hook}'\n`, { mode: 0o755 });
  }
  git(repo, "config", "core.fsmonitor", `touch '${markers}/fsmonitor'; false`);
  git(repo, "config", "filter.probe.clean", `touch '${markers}/filter-clean'; cat`);
  git(repo, "config", "filter.probe.smudge", `touch '${markers}/filter-smudge'; cat`);
  git(repo, "config", "filter.probe.required", "true");
  git(repo, "config", "commit.gpgSign", "true");
  git(repo, "config", "gpg.program", `${markers}/gpg`);
  fs.writeFileSync(path.join(markers, "gpg"), `#!/bin/sh\ntouch '${markers}/gpg-ran'\nexit 1\n`, { mode: 0o755 });
}

/** Markers a trap left (the gpg stand-in itself aside). */
export function sprungTraps(markers: string): string[] {
  return fs.readdirSync(markers).filter((name) => name !== "gpg");
}

/**
 * Every entry of the repository's working tree and `.git` with its facts (mode, size, inode, times,
 * content): what a branch hand-back must leave byte for byte. Left out: what creating one new
 * branch adds by design (objects, the branch's ref and reflog, and the times of their folders).
 */
export function repoFingerprint(repo: string): Record<string, string> {
  const out: Record<string, string> = {};
  const grows = new Set([".git/objects", ".git/refs/heads", ".git/logs/refs/heads"]);
  const walk = (rel: string) => {
    if (rel.startsWith(".git/objects/") || /^\.git\/(logs\/)?refs\/heads\/sandbox-run(\/|$)/.test(rel)) return;
    const p = path.join(repo, rel);
    const st = fs.lstatSync(p);
    const facts = `${(st.mode & 0o7777).toString(8)}:${st.size}:${st.ino}:${st.mtimeMs}:${st.ctimeMs}`;
    if (st.isSymbolicLink()) out[rel] = `link:${facts}:${fs.readlinkSync(p)}`;
    else if (st.isDirectory()) {
      out[rel || "."] = grows.has(rel) ? "dir" : `dir:${facts}`;
      for (const name of fs.readdirSync(p).sort()) walk(rel ? `${rel}/${name}` : name);
    } else out[rel] = `file:${facts}:${fs.readFileSync(p, "base64")}`;
  };
  walk("");
  return out;
}

/** `git ls-tree -r` of a commit: path -> "mode blob-content" (links: their target). */
export function committedTree(repo: string, commit: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of git(repo, "ls-tree", "-r", "-z", commit).split("\0")) {
    if (!line) continue;
    const [meta, file] = line.split("\t") as [string, string];
    const [mode, , oid] = meta.split(" ") as [string, string, string];
    out[file] = `${mode} ${git(repo, "cat-file", "blob", oid)}`;
  }
  return out;
}
