// Workspace changes as a patch, for run records: a copy of the workspace is taken before the
// run (only when a record is asked for) and diffed against the workspace afterwards with
// `git diff --no-index` (binary-safe), or `diff -ruN` where git is missing. The .git folder
// is left out of the copy: its contents are not source changes.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const SKIP = new Set([".git"]);

export class WorkspaceBaseline {
  private constructor(
    private readonly workspace: string,
    private readonly scratch: string,
  ) {}

  static take(workspace: string): WorkspaceBaseline {
    const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-baseline-"));
    copyTree(workspace, path.join(scratch, "a"));
    return new WorkspaceBaseline(workspace, scratch);
  }

  /** The unified diff from the baseline to the workspace now ("" when nothing changed). */
  patch(): string {
    copyTree(this.workspace, path.join(this.scratch, "b"));
    const git = spawnSync("git", ["diff", "--no-index", "--binary", "--no-color", "--no-ext-diff", "a", "b"], {
      cwd: this.scratch,
      encoding: "utf8",
      maxBuffer: 512 * 1024 * 1024,
    });
    if (!git.error && (git.status === 0 || git.status === 1)) {
      // Paths come out as a/a/<file>, b/b/<file> (and a/b/<file> for new files); drop the folder.
      return git.stdout.replace(/(^|\s)([ab])\/[ab]\//gm, "$1$2/");
    }
    const diff = spawnSync("diff", ["-ruN", "a", "b"], {
      cwd: this.scratch,
      encoding: "utf8",
      maxBuffer: 512 * 1024 * 1024,
    });
    return diff.stdout ?? "";
  }

  dispose(): void {
    fs.rmSync(this.scratch, { recursive: true, force: true });
  }
}

function copyTree(from: string, to: string): void {
  fs.cpSync(from, to, {
    recursive: true,
    verbatimSymlinks: true,
    filter: (source) => !SKIP.has(path.basename(source)) || path.dirname(source) !== from,
  });
}
