// The git checks that need more than the rule walk's one entry at a time, run after it on what it
// noted (git-work.ts): first every object-store file the run created or changed
// (git-object-check.ts), then, in each git directory whose objects passed and that is not reverted
// anyway, what its refs, reflogs, `*_HEAD` files and index make host git write (git-ref-check.ts).
// Both modes run this; each passes how to reach its files (GitAccess).
import path from "node:path";
import { lastConfigValue } from "./git-config-parse.js";
import { ObjectChecker, type ObjectCheckStats } from "./git-object-check.js";
import { checkRefs } from "./git-ref-check.js";
import { REF_RULE } from "./git-rule-names.js";
import { type GitAccess, type GitWork, inGitDir, type PointerChange } from "./git-work.js";
import { pathProtection } from "./path-protection.js";
import type { RestoreStep, RuleConfig, Violation } from "./workspace-rules.js";

/** A git directory's config read to find its worktree (git's own are a few hundred bytes). */
const MAX_CONFIG_BYTES = 1024 * 1024;

export interface GitCheckResult {
  violations: Violation[];
  /** Restore steps beyond the violations' own. */
  steps: RestoreStep[];
  /** Derived caches the run wrote, to drop (tree paths). */
  derived: string[];
  stats: ObjectCheckStats & { refRoots: number; refMs: number };
}

export class GitChecks {
  /**
   * `objects`: a checker of the same tree kept across walks of one run, so what a walk checked
   * is not checked again.
   */
  constructor(
    private readonly config: RuleConfig,
    private readonly objects = new ObjectChecker(),
  ) {}

  /**
   * `reverted`: whether a git directory is put back as a whole anyway (its refs then go back too,
   * so they need no check).
   */
  async run(
    work: GitWork,
    access: GitAccess,
    reverted: (gitRoot: string) => boolean,
    /**
     * A store some repository borrows objects from changed in the run (git-config-paths.ts): git
     * would read what the sandbox left there (a FIFO held the check 5 minutes; review, session 37),
     * so no ref is checked: every git directory whose refs changed goes back as a whole.
     */
    borrowedStoreChanged = false,
  ): Promise<GitCheckResult> {
    const objects = await this.objects.check(work.store, access);
    const result: GitCheckResult = {
      violations: [...objects.violations],
      steps: objects.steps,
      derived: objects.derived,
      stats: { ...objects.stats, refRoots: 0, refMs: 0 },
    };
    // Refs may name what was refused: its git directory goes back as a whole (bind mode).
    for (const root of objects.refusedRoots) result.steps.push({ action: "revert", path: root });
    const started = performance.now();
    const protection = pathProtection(this.config);
    const builtinProtection = pathProtection({ disabled: this.config.disabled });
    for (const [root, changes] of byCommonRoot(work)) {
      if (objects.refusedRoots.has(root) || reverted(root)) continue;
      // Refs that cannot be checked: the git directory goes back as a whole.
      const unchecked = borrowedStoreChanged
        ? "an object store repositories here borrow from changed in the run"
        : work.pointerOverflow.has(root)
          ? "too many changed refs, reflogs and index files"
          : undefined;
      if (unchecked) {
        result.violations.push({
          path: inGitDir(root, "refs"),
          change: "modified",
          rule: REF_RULE,
          detail: `not checked: ${unchecked}`,
          restore: { action: "revert", path: root },
        });
        continue;
      }
      result.stats.refRoots++;
      result.violations.push(
        ...(await checkRefs({
          root,
          changes,
          storeChanges: work.store.filter((s) => s.gitRoot === root),
          worktree: worktreeOf(root, access),
          access,
          protection,
          builtinProtection,
        })),
      );
    }
    result.stats.refMs = Math.round(performance.now() - started);
    return result;
  }
}

/**
 * Pointer changes by the git directory whose refs they are: a linked worktree's folder
 * (`<common>/worktrees/<name>`) counts as part of its common directory, its files named
 * `worktrees/<name>/<file>` there.
 */
function byCommonRoot(work: GitWork): Map<string, PointerChange[]> {
  const out = new Map<string, PointerChange[]>();
  for (const change of work.pointers) {
    const linked = /^(?:(.*)\/)?(worktrees\/[^/]+)$/.exec(change.gitRoot);
    const common = linked && work.gitRoots.has(linked[1] ?? "") ? (linked[1] ?? "") : undefined;
    const root = common ?? change.gitRoot;
    const relative = common === undefined ? change.relative : `${linked![2]}/${change.relative}`;
    const list = out.get(root) ?? [];
    list.push({ ...change, gitRoot: root, relative });
    out.set(root, list);
  }
  return out;
}

/**
 * The worktree a git directory belongs to, in the tree: a `.git` folder's parent; another's (a
 * submodule's `.git/modules/<name>`) the folder its `core.worktree` names, read from its config as
 * it was before the run, when that folder is in the tree. Others' (bare) are not known here.
 */
function worktreeOf(root: string, access: GitAccess): string | undefined {
  const name = root.slice(root.lastIndexOf("/") + 1);
  if (name.toLowerCase() === ".git") return root.includes("/") ? root.slice(0, root.lastIndexOf("/")) : "";
  const config = access.before(inGitDir(root, "config"), MAX_CONFIG_BYTES);
  if (!config) return undefined;
  const worktree = lastConfigValue(config.toString("utf8"), "core.worktree");
  if (!worktree || path.posix.isAbsolute(worktree)) return undefined;
  const top = path.posix.normalize(path.posix.join(root, worktree));
  return top === "." ? "" : top.startsWith("../") || top === ".." ? undefined : top.replace(/\/$/, "");
}
