// Where a branch hand-back's commit goes, found when the run starts (before the sandbox exists):
// the repository the workspace belongs to, the workspace's place in its working tree, and the
// commit HEAD names now, which becomes the new commit's parent whatever happens to HEAD during
// the run. A workspace outside any repository, or in one without a commit, is a usage error.
import fs from "node:fs";
import path from "node:path";
import { SandboxRunError, usageError } from "../errors.js";
import { hostGit } from "../util/host-git.js";

export interface HandBackBase {
  /** The repository's git directory (absolute), as git names it for this working tree. */
  gitDir: string;
  /** The top of its working tree (canonical). */
  top: string;
  /** The workspace inside it: "" for the top itself, else "sub/dir/". */
  prefix: string;
  /** The commit HEAD named when the run started. */
  commit: string;
  objectFormat: "sha1" | "sha256";
}

/** `home`: a private empty folder (see util/host-git.ts). */
export async function findHandBackBase(workspace: string, home: string): Promise<HandBackBase> {
  const notRepository = (detail: string) =>
    usageError(
      `Hand-back "branch" commits the run's changes onto a new branch of the workspace's git repository, but ${workspace} ${detail}.`,
      "Run it in a git repository with at least one commit (git init && git commit), or use --hand-back patch or apply.",
    );
  const located = await hostGit(["rev-parse", "--absolute-git-dir", "--show-toplevel", "--show-object-format"], {
    cwd: workspace,
    home,
  });
  if (located.status !== 0) {
    const message = located.stderr.trim().split("\n").pop() ?? "";
    throw notRepository(
      /not a git repository/i.test(message)
        ? "is not inside one"
        : `cannot be used as one (git: ${message.slice(0, 300)})`,
    );
  }
  const [gitDir, topShown, format] = located.stdout.toString("utf8").split("\n");
  if (!gitDir || !topShown || (format !== "sha1" && format !== "sha256")) {
    throw notRepository("has no working tree git can name");
  }
  const top = fs.realpathSync(topShown);
  const relative = path.relative(top, workspace);
  if (relative.startsWith("..") || path.isAbsolute(relative)) {
    throw notRepository(`lies outside the working tree git names for it (${top})`);
  }
  const head = await hostGit(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], {
    cwd: home,
    home,
    gitDir,
  });
  const commit = head.stdout.toString("utf8").trim();
  if (head.status !== 0 || !/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(commit)) {
    throw notRepository(`is in a repository whose HEAD names no commit yet (${top})`);
  }
  // A branch named `sandbox-run` (any earlier run may make one) blocks every sandbox-run/<id>: found
  // now, not after the run did its work and spent its model budget (review, session 26).
  const blocking = await hostGit(["rev-parse", "--verify", "--quiet", "refs/heads/sandbox-run"], {
    cwd: home,
    home,
    gitDir,
  });
  if (blocking.status === 0)
    throw usageError(
      `Hand-back "branch" makes the branch sandbox-run/<run id> in ${top}, but a branch named sandbox-run exists there, and git cannot have both.`,
      "Rename or delete that branch (git branch -m sandbox-run <other name>), or use --hand-back patch.",
    );
  return {
    gitDir,
    top,
    prefix: relative === "" ? "" : `${relative.split(path.sep).join("/")}/`,
    commit,
    objectFormat: format,
  };
}

/** The ref a run's branch gets. Run ids are unique and hex, so the name is always valid and new. */
export function handBackBranch(runId: string): string {
  if (!/^[0-9a-zA-Z_-]+$/.test(runId)) throw new SandboxRunError("usage", `Run id "${runId}" cannot name a branch.`);
  return `sandbox-run/${runId}`;
}
