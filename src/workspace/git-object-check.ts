// The object-store files a run created or changed, each checked against what its name says
// (git-object-verify.ts), because host git never does when it reads them:
// - a loose object must inflate to content whose hash is its name; an existing one whose size or
//   inode changed was rewritten, which git never does (it only touches the times of one it would
//   write again: then its content is checked like a new one);
// - a pack and its .idx the run made (or whose .idx changed) must be what the host's `git
//   index-pack --verify` makes of the pack; an existing pack whose times alone changed (git's
//   freshen) must still hash to the checksum its unchanged .idx records; an existing pack written
//   anew (`git gc`, `git repack -a -d` or `git maintenance run` over a repository already in one
//   pack write the same pack again, under the same name, and its .idx) or whose .idx alone was
//   written anew must hash to the checksum its name says (so it is byte for byte the pack that name
//   had), and its .idx must be what index-pack makes of it. Refusing such a pack would remove the
//   repository's history, which the run never wrote: its check has no time budget (its bytes are
//   the user's own, and take what the user's git takes);
// - a git-lfs object must hash to its name;
// - caches derived from them (commit-graph, multi-pack-index, *.rev, *.bitmap) are not checked but
//   dropped: git rebuilds them (gc, maintenance) and works without them meanwhile, only slower.
//   Refusing them would fail every honest `git gc` (it writes a commit-graph by default). So are
//   stray files (git-object-store.ts): a temporary file left behind, or a name no check knows.
// What fails its check is removed after the run (restore step `remove`, kept even when the git
// directory is reverted: a revert leaves the object store alone): git then reports a missing
// object loudly where it would have read the run's content. The work is bounded: bytes inflated,
// pack bytes verified and the time verifying packs per run; what is past a bound is refused
// (removed) unchecked. A pack this host could not check at all (its git could not be started, or
// its scratch folder written: git-object-verify.ts PackNotCheckedHere) is no refusal: it is set
// aside with its .idx (restore step `remove` with `setAside`: moved into the run's folder, not
// deleted; review, session 34: an honest `git gc` lost the history when the host had no git).
import fs from "node:fs";
import { yieldToEventLoop } from "./fd-walk.js";
import { derivedRemovals, storeFileOf } from "./git-object-store.js";
import {
  checkFreshenedPack,
  checkLfsObject,
  checkLooseObject,
  checkPack,
  isPackNotCheckedHere,
  type PackNotCheckedHere,
  packNameProblem,
} from "./git-object-verify.js";
import { OBJECT_RULE } from "./git-rule-names.js";
import { type GitAccess, inGitDir, type StoreChange, type StoreFacts } from "./git-work.js";
import type { RestoreStep, Violation } from "./workspace-rules.js";

/** Bytes of loose objects inflated per run (a zip bomb costs this much at most). */
const MAX_INFLATED_BYTES = 4 * 1024 ** 3;
/** Bytes of packs verified per run. */
const MAX_PACK_BYTES = 8 * 1024 ** 3;
/**
 * Time the packs' verification may take in all, per run (one pack may take all of it). A pack of a
 * few kilobytes can hold deltas that each rebuild 64 MiB, seconds of index-pack each: without a bound
 * over all of them, a thousand such packs held the judgement, and the restore behind it, for days.
 */
const PACK_TIME_BUDGET_MS = 10 * 60 * 1000;
/** How much longer new packs may take to verify once the run was stopped (for all of them). */
const STOP_GRACE_MS = 30 * 1000;
/**
 * How long index-pack may take over a pack the user had (its .idx written anew): its bytes are the
 * pack its name says, so this is what the user's own git takes, not something the run can stretch.
 */
const EXISTING_PACK_TIMEOUT_MS = 60 * 60 * 1000;

/** How a violation's detail starts when this host could not run a pack's check (not a refusal). */
export const NOT_CHECKED_HERE = "not checked on this host: ";

export interface ObjectCheckStats {
  loose: number;
  inflatedBytes: number;
  packs: number;
  packBytes: number;
  ms: number;
}

interface ObjectCheckResult {
  violations: Violation[];
  /** Restore steps beyond the violations' own (the .idx of a refused pack). */
  steps: RestoreStep[];
  /** Derived caches and stray files to drop (tree paths; directories as a whole). */
  derived: string[];
  /** Git directories with a violation here (their refs are not trusted). */
  refusedRoots: Set<string>;
  stats: ObjectCheckStats;
}

/**
 * The time one run may spend verifying packs, over all its trees (PACK_TIME_BUDGET_MS by default),
 * and how much of it is left to new packs once the run was stopped (STOP_GRACE_MS).
 */
export class PackTimeBudget {
  constructor(
    public leftMs = PACK_TIME_BUDGET_MS,
    readonly stopGraceMs = STOP_GRACE_MS,
  ) {}
}

/** One tree's checker; it remembers results by file identity, so a later walk of the same run pays nothing again. */
export class ObjectChecker {
  private readonly memo = new Map<string, string | null>();
  private inflated = 0;
  private packBytes = 0;

  /** Aborts STOP_GRACE_MS after the run's stop: new packs not verified by then are refused unchecked. */
  private readonly graceOver = new AbortController();

  /**
   * `packTime`: the run's budget for verifying packs, shared by the checkers of all its trees.
   * `stop`: the run's own stop (the caller's signal: Ctrl-C, a CI cancel). New packs then get
   * STOP_GRACE_MS more in all (an honest `git gc`'s pack verifies within it; the running index-pack is
   * killed at its end and every new pack not yet verified is refused unchecked), so a run the sandbox
   * filled with slow packs is judged and restored soon after it was stopped. A pack git only
   * freshened (an existing one whose times changed) is always checked: its check is a hash, and
   * refusing it would remove history the run never wrote.
   */
  constructor(
    private readonly packTime: PackTimeBudget = new PackTimeBudget(),
    stop?: AbortSignal,
  ) {
    const startGrace = () => setTimeout(() => this.graceOver.abort(), packTime.stopGraceMs).unref();
    if (stop?.aborted) startGrace();
    else stop?.addEventListener("abort", startGrace, { once: true });
  }

  async check(changes: readonly StoreChange[], access: GitAccess): Promise<ObjectCheckResult> {
    const started = performance.now();
    const out: ObjectCheckResult = {
      violations: [],
      steps: [],
      derived: [],
      refusedRoots: new Set(),
      stats: { loose: 0, inflatedBytes: 0, packs: 0, packBytes: 0, ms: 0 },
    };
    const refuse = (change: StoreChange, detail: string, setAside = false) => {
      out.violations.push({
        path: change.path,
        change: change.change,
        rule: OBJECT_RULE,
        detail,
        restore: { action: "remove", path: change.path, objectStore: true, ...(setAside ? { setAside } : {}) },
      });
      out.refusedRoots.add(change.gitRoot);
    };
    const derived = new Set<string>();
    const packs = new Map<string, { gitRoot: string; stem: string; pack?: StoreChange; idx?: StoreChange }>();
    let sinceYield = 0;
    for (const change of changes) {
      const file = storeFileOf(change.relative);
      if (file.kind === "derived") {
        for (const r of derivedRemovals(change.relative)) derived.add(inGitDir(change.gitRoot, r));
      } else if (file.kind === "stray") {
        derived.add(change.path);
      } else if (file.kind === "pack" || file.kind === "pack-index") {
        const key = `${change.gitRoot}\0${file.stem}`;
        const entry = packs.get(key) ?? { gitRoot: change.gitRoot, stem: file.stem };
        entry[file.kind === "pack" ? "pack" : "idx"] = change;
        packs.set(key, entry);
      } else if (file.kind === "loose" || file.kind === "lfs") {
        if (rewritten(change)) {
          refuse(change, "an existing object rewritten: git never rewrites one, and reads it by its name");
          continue;
        }
        const problem = await this.remembered(change, () =>
          file.kind === "loose" ? this.loose(change, file.oid, access, out) : this.lfs(change, file.oid, access),
        );
        if (problem) refuse(change, problem);
        if (++sinceYield >= 256) {
          sinceYield = 0;
          await yieldToEventLoop();
        }
      }
    }
    for (const { gitRoot, stem, pack, idx } of packs.values()) {
      const problem = await this.pack(gitRoot, stem, pack, idx, access, out);
      if (!problem) continue;
      const first = pack ?? idx!;
      // Not checked for a reason of this host (its git could not run): neither left where git reads
      // it unchecked nor removed (an honest gc packed the history into it), but set aside, pair and all.
      const here = isPackNotCheckedHere(problem);
      refuse(first, here ? `${NOT_CHECKED_HERE}${problem.hostReason}` : problem, here);
      // The pair goes together: git finds a pack only through its .idx.
      const other = inGitDir(gitRoot, `objects/pack/${stem}.${first === pack ? "idx" : "pack"}`);
      out.steps.push({ action: "remove", path: other, objectStore: true, ...(here ? { setAside: true } : {}) });
    }
    out.derived = [...derived];
    out.stats.ms = Math.round(performance.now() - started);
    return out;
  }

  private async loose(change: StoreChange, oid: string, access: GitAccess, out: ObjectCheckResult) {
    const fd = access.open(change.path);
    if (fd === undefined) return "it cannot be read as the file the walk saw";
    try {
      const result = await checkLooseObject(fd, oid, MAX_INFLATED_BYTES - this.inflated);
      this.inflated += result.inflated;
      out.stats.loose++;
      out.stats.inflatedBytes += result.inflated;
      return result.problem;
    } finally {
      fs.closeSync(fd);
    }
  }

  private async lfs(change: StoreChange, oid: string, access: GitAccess) {
    if (change.after.size > MAX_INFLATED_BYTES - this.inflated)
      return "not checked: more git-lfs content than one run may have checked";
    const fd = access.open(change.path);
    if (fd === undefined) return "it cannot be read as the file the walk saw";
    try {
      this.inflated += change.after.size;
      return await checkLfsObject(fd, oid);
    } finally {
      fs.closeSync(fd);
    }
  }

  private async pack(
    gitRoot: string,
    stem: string,
    pack: StoreChange | undefined,
    idx: StoreChange | undefined,
    access: GitAccess,
    out: ObjectCheckResult,
  ): Promise<string | PackNotCheckedHere | undefined> {
    const packPath = pack?.path ?? inGitDir(gitRoot, `objects/pack/${stem}.pack`);
    const idxPath = idx?.path ?? inGitDir(gitRoot, `objects/pack/${stem}.idx`);
    const key = `pack\0${identity(packPath, pack?.after)}\0${identity(idxPath, idx?.after)}`;
    const remembered = this.memo.get(key);
    if (remembered !== undefined) return remembered ?? undefined;
    const packFd = access.open(packPath);
    const idxFd = packFd === undefined ? undefined : access.open(idxPath);
    try {
      // One without the other is never read: git finds packs through their .idx, and an .idx without its pack is skipped.
      if (packFd === undefined || idxFd === undefined) return undefined;
      const size = fs.fstatSync(packFd).size + fs.fstatSync(idxFd).size;
      if (size > MAX_PACK_BYTES - this.packBytes) return "not checked: more pack data than one run may have verified";
      const format = access.format(gitRoot);
      // A pack the user had: unchanged, or changed and named after its checksum as git names it,
      // its content hashed below (with its .idx's recorded checksum, or by index-pack with a new .idx).
      const existing = pack === undefined || pack.before !== undefined;
      const freshened = pack?.before !== undefined && idx === undefined && !rewritten(pack);
      if (pack?.before !== undefined && !freshened) {
        const problem = packNameProblem(packFd, stem, format);
        if (problem) return problem;
      }
      const timeLeft = this.packTime.leftMs;
      if (!existing && timeLeft <= 0) return "not checked: its packs took longer to verify than one run may take";
      if (!existing && this.graceOver.signal.aborted)
        return "not checked: the run was stopped, and its packs took longer to verify than a stopped run waits";
      this.packBytes += size;
      out.stats.packs++;
      out.stats.packBytes += size;
      const started = performance.now();
      const problem =
        existing && idx === undefined
          ? await checkFreshenedPack({ pack: packFd, idx: idxFd }, format)
          : await checkPack(
              { pack: packFd, idx: idxFd },
              existing
                ? { format, scratch: access.scratch, timeoutMs: EXISTING_PACK_TIMEOUT_MS }
                : { format, scratch: access.scratch, timeoutMs: timeLeft, signal: this.graceOver.signal },
            );
      if (!existing) this.packTime.leftMs -= performance.now() - started;
      // What this host could not check is asked again by a later walk (it is set aside meanwhile).
      if (!isPackNotCheckedHere(problem)) this.memo.set(key, problem ?? null);
      return problem;
    } finally {
      if (packFd !== undefined) fs.closeSync(packFd);
      if (idxFd !== undefined) fs.closeSync(idxFd);
    }
  }

  private async remembered(change: StoreChange, run: () => Promise<string | undefined>): Promise<string | undefined> {
    const key = identity(change.path, change.after);
    const known = this.memo.get(key);
    if (known !== undefined) return known ?? undefined;
    const problem = await run();
    this.memo.set(key, problem ?? null);
    return problem;
  }
}

/** An existing file whose size, inode or known content changed: written anew, not only touched. */
function rewritten(change: StoreChange): boolean {
  const { before, after } = change;
  if (!before) return false;
  if (before.kind !== after.kind || before.size !== after.size || before.ino !== after.ino) return true;
  return before.hash !== undefined && after.hash !== undefined && before.hash !== after.hash;
}

function identity(path: string, facts: StoreFacts | undefined): string {
  if (!facts) return `${path}\0unchanged`;
  return [path, facts.ino, facts.size, facts.mtimeMs, facts.ctimeMs, facts.hash].join("\0");
}
