// Judges the paths a git pointer names against the worktree's rules (path-protection.ts): the
// entries of an index, and the paths a commit's tree changes. A protected path passes only when
// what the pointer puts there is what the worktree held before the run (mode and content, hashed
// as git hashes a blob): committing or staging the user's own file is no new content. A gitlink
// that moves is refused: the commit it names lives in another repository.
import crypto from "node:crypto";
import { indexEntriesOf } from "./git-index-paths.js";
import { REF_RULE } from "./git-rule-names.js";
import { type GitAccess, inGitDir, type WorktreeEntry } from "./git-work.js";
import type { Protection, ProtectionOf } from "./path-protection.js";

const ZERO_MODE = 0;
const GITLINK = 0o160000;

interface PathJudgeInput {
  /** The worktree's top (relative to the tree's root) when known. */
  worktree?: string;
  access: GitAccess;
  /** Protection of a tree path, all rules; and of a path whose worktree is not known (built-in names only). */
  protection: ProtectionOf;
  builtinProtection: ProtectionOf;
}

export /** Judges the paths an index or a diff names against the protections and the worktree before the run. */
class PathJudge {
  private readonly blobOids = new Map<string, WorktreeEntry | null | undefined>();

  constructor(
    private readonly input: PathJudgeInput,
    private readonly format: "sha1" | "sha256",
  ) {}

  /** An index's entries for protected paths, against the old index's and the worktree's. */
  index(
    beforeContent: Buffer | null | undefined,
    afterContent: Buffer | null | undefined,
    relative: string,
  ): { rule: string; detail: string } | undefined {
    if (!afterContent) return undefined; // unreadable: git-pointers refuses it already
    const hashBytes = this.format === "sha256" ? 32 : 20;
    const entries = indexEntriesOf(afterContent, hashBytes);
    if (!entries) return { rule: REF_RULE, detail: "an index that cannot be read" };
    const old = new Map<string, string>();
    for (const entry of (beforeContent && indexEntriesOf(beforeContent, hashBytes)) || [])
      old.set(
        `${entry.name.toString("latin1")}\0${stageOf(entry.flags)}`,
        `${entry.mode} ${entry.oid?.toString("hex")}`,
      );
    // A linked worktree's index (`worktrees/<name>/index`) is judged by the same rules, its paths
    // taken from the worktree's top as the main worktree's are (its config is the common one, whose
    // relative paths mean the same in every worktree), but only against its old index: its worktree
    // is not in the tree to compare with.
    const linked = relative.startsWith("worktrees/");
    for (const entry of entries) {
      const name = entry.name.toString("utf8");
      const protection = this.protectionOf(name, !linked || this.input.worktree !== undefined, entry.mode);
      if (!protection) continue;
      const oid = entry.oid?.toString("hex") ?? "";
      if (old.get(`${entry.name.toString("latin1")}\0${stageOf(entry.flags)}`) === `${entry.mode} ${oid}`) continue;
      if (!linked && this.sameAsWorktree(name, entry.mode, oid)) continue;
      return {
        rule: protection.rule,
        detail: `it stages ${name}${why(protection)} with content the worktree did not hold: host git's restore . and checkout -- . would write it`,
      };
    }
    return undefined;
  }

  /** The first protected path a diff changes to something the worktree did not hold. */
  diff(records: ReadonlyArray<{ path: string; srcMode: number; dstMode: number; dstOid: string }>) {
    let found: { rule: string; detail: string } | undefined;
    let more = 0;
    const worktreeKnown = this.input.worktree !== undefined;
    for (const record of records) {
      if (record.srcMode === GITLINK || record.dstMode === GITLINK) {
        if (found) more++;
        else
          found = {
            rule: REF_RULE,
            detail: `moves the submodule ${record.path} (a commit in another repository is not checked)`,
          };
        continue;
      }
      const protection = this.protectionOf(record.path, worktreeKnown, record.dstMode);
      if (!protection) continue;
      if (worktreeKnown) {
        const held = this.worktree(record.path);
        if (
          record.dstMode === ZERO_MODE ? held === null : this.sameAsWorktree(record.path, record.dstMode, record.dstOid)
        )
          continue;
      }
      if (found) {
        more++;
        continue;
      }
      found = {
        rule: protection.rule,
        detail: `${record.dstMode === ZERO_MODE ? "deletes" : "changes"} ${record.path}${why(protection)}`,
      };
    }
    if (found && more > 0) found.detail += ` (and ${more} more)`;
    return found;
  }

  /** `mode`: what the pointer puts there (a link where a guarded path's parent is counts). */
  private protectionOf(path: string, worktreeKnown: boolean, mode: number): Protection | undefined {
    return worktreeKnown
      ? this.input.protection(inGitDir(this.input.worktree ?? "", path), mode)
      : this.input.builtinProtection(path, mode);
  }

  private worktree(path: string): WorktreeEntry | null | undefined {
    const full = inGitDir(this.input.worktree ?? "", path);
    if (!this.blobOids.has(full)) this.blobOids.set(full, this.input.access.worktreeBefore(full));
    return this.blobOids.get(full);
  }

  /** Whether the worktree held exactly this (mode and content) at the path before the run. */
  private sameAsWorktree(path: string, mode: number, oid: string): boolean {
    const held = this.worktree(path);
    if (!held || held.mode !== mode) return false;
    const header = Buffer.from(`blob ${held.content.length}\0`);
    return crypto.createHash(this.format).update(header).update(held.content).digest("hex") === oid;
  }
}

const stageOf = (flags = 0) => (flags >> 12) & 3;
const why = (protection: Protection) => (protection.why ? ` (${protection.why})` : "");
