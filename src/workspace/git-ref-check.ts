// What the run's refs and index make host git write later. A commit the sandbox made on the
// current branch that changes `.husky/pre-commit` is written into the worktree by the host's next
// `git reset --hard` (or `restore .`, which copies the index); the same with refs/stash and `git
// stash pop`, a new branch later checked out, ORIG_HEAD and `reset --hard ORIG_HEAD`, a reflog
// entry and `reset --hard HEAD@{1}`, BISECT_START and `git bisect reset`. So, per git directory whose pointers the run changed:
// - every ref it created or moved (loose refs, packed-refs lines, HEAD and worktree HEADs), every
//   new object id in a `*_HEAD` file or BISECT_START and every reflog line it added names an object (tags peeled);
//   a commit the history before the run already reached (from any ref, reflog or `*_HEAD` file it
//   had) is nothing new; any other commit's tree is compared with the tree of the nearest commit
//   on its first-parent line that history had (a branch made from another branch, commits on top
//   of one), or, for a commit without one (and a tree), with what the ref named before the run
//   (a new ref: HEAD's), by the host's git (`diff-tree -r` in a private repository:
//   git-object-reader.ts); for refs/stash also its index and untracked commits' trees;
// - every entry of an index it wrote, against the index before;
// and each changed path is judged as the worktree's would be (path-protection.ts). A protected
// path passes only when what the commit or index puts there is what the worktree held before the
// run (committing the user's own file is no new content); otherwise the run fails naming the
// pointer, and the git directory is reverted (the commits stay as unreachable objects: nothing
// names them). A gitlink (submodule) that moves is refused: the commit it names lives in another
// repository and is not checked. Commits only reachable through parents are not judged (a checkout
// of one is a deliberate look at history). Bounded: targets, object sizes, new commits, diff
// output; past a bound, or when git cannot answer, the git directory is refused as a whole.
import { ObjectGraph } from "./git-object-graph.js";
import { ObjectReadError, PrivateRepo } from "./git-object-reader.js";
import { PathJudge } from "./git-path-judge.js";
import { isBranchName } from "./git-plain-data.js";
import { newReflogOids, oidsOf, parsePackedRefs, type ReadFile, refOfReflog, resolveRef } from "./git-ref-files.js";
import { REF_RULE } from "./git-rule-names.js";
import { type GitAccess, inGitDir, type PointerChange, type StoreChange } from "./git-work.js";
import type { ProtectionOf } from "./path-protection.js";
import type { Violation } from "./workspace-rules.js";

/** Distinct (before, after) pairs of commits judged per git directory. */
const MAX_REF_TARGETS = 1000;
/** Commits the run's pointers reach anew, each judged against its first parent, per git directory. */
const MAX_NEW_COMMITS = 10_000;
/** Bytes of diff-tree output read per git directory. */
const MAX_DIFF_BYTES = 64 * 1024 * 1024;
/** Pointer files are read up to this size (git-plain-data.ts refuses larger ones). */
const MAX_POINTER_BYTES = 64 * 1024 * 1024;
/** Bytes of pointer files one ref check reads in all, per side: past it a file "cannot be read" and its git directory is refused. */
const MAX_POINTER_BYTES_IN_ALL = 256 * 1024 * 1024;

interface RefCheckInput {
  /** The git directory whose refs these are (a linked worktree's own folder counts as part of it). */
  root: string;
  /** Its pointer changes, relative to `root` (a worktree's as `worktrees/<name>/HEAD`). */
  changes: readonly PointerChange[];
  /** Its object-store changes (all passed their checks). */
  storeChanges: readonly StoreChange[];
  /** The worktree's top (relative to the tree's root) when known: `.git`'s parent. */
  worktree?: string;
  access: GitAccess;
  /** Protection of a tree path, all rules; and of a path whose worktree is not known (built-in names only). */
  protection: ProtectionOf;
  builtinProtection: ProtectionOf;
}

interface Target {
  oid: string;
  /**
   * What it is compared with when its first-parent line reaches nothing of the history before the
   * run: what the ref named before the run, or HEAD's (undefined: the empty tree).
   */
  base?: string;
  /** What names it ("refs/heads/main", "HEAD@{new}", "ORIG_HEAD"). */
  label: string;
  /** The pointer file (tree path), and how it changed. */
  path: string;
  change: PointerChange["change"];
  /** A stash commit: its index and untracked commits are applied too. */
  stash: boolean;
}

export async function checkRefs(input: RefCheckInput): Promise<Violation[]> {
  const { root, access } = input;
  const refuse = (path: string, change: Violation["change"], rule: string, detail: string): Violation => ({
    path,
    change,
    rule,
    detail,
    restore: { action: "revert", path: root },
  });
  const read = (side: "before" | "after"): ReadFile => {
    const cache = new Map<string, Buffer | null | undefined>();
    // Every file read stays cached for the check: all of them together are bounded, not only each
    // (sparse 64 MiB reflogs cost the sandbox no disk and held 64 MiB of the controller's memory each).
    let left = MAX_POINTER_BYTES_IN_ALL;
    return (relative) => {
      if (!cache.has(relative)) {
        const content = access[side](inGitDir(root, relative), Math.min(MAX_POINTER_BYTES, left));
        if (content) left -= content.length;
        cache.set(relative, content);
      }
      return cache.get(relative);
    };
  };
  const before = read("before");
  const after = read("after");
  const format = access.format(root);
  const judge = new PathJudge(input, format);
  const out: Violation[] = [];

  // The index: each entry for a protected path holds what the worktree (or the old index) held.
  for (const change of input.changes) {
    if (change.change === "deleted" || !/(^|\/)(index|sharedindex\.[0-9a-f]+)$/.test(change.relative)) continue;
    const problem = judge.index(before(change.relative), after(change.relative), change.relative);
    if (problem) out.push(refuse(change.path, change.change, problem.rule, problem.detail));
  }

  for (const change of input.changes) {
    const problem = bisectStartProblem(change, after);
    if (problem) out.push(refuse(change.path, change.change, REF_RULE, problem));
  }
  const shallowChange = input.changes.find((c) => c.relative === "shallow" && c.change !== "deleted");
  const shallow = shallowChange ? shallowAdded(before, after) : [];
  if (typeof shallow === "string") out.push(refuse(shallowChange!.path, shallowChange!.change, REF_RULE, shallow));

  const targets = collectTargets(input, before, after);
  // New lines in shallow are fetched history's boundary (`fetch --depth` brings new refs); with no
  // ref moved they can only name what was there before.
  if (Array.isArray(shallow) && shallow.length > 0 && (typeof targets === "string" || targets.length === 0))
    out.push(refuse(shallowChange!.path, shallowChange!.change, REF_RULE, shallowWords(shallow)));
  if (typeof targets === "string") return [...out, refuse(inGitDir(root, "refs"), "modified", REF_RULE, targets)];
  if (targets.length === 0) return out;
  if (targets.length > MAX_REF_TARGETS)
    return [
      ...out,
      refuse(
        targets[0]!.path,
        targets[0]!.change,
        REF_RULE,
        `not checked: more than ${MAX_REF_TARGETS} new commits on its refs, reflogs and *_HEAD files`,
      ),
    ];

  const { stores, loose, close } = access.stores(root, input.storeChanges);
  // Inside the try: making it follows the stores' alternates and may refuse (an fd was left open).
  let repo: PrivateRepo | undefined;
  try {
    repo = PrivateRepo.create(access.scratch, format, stores, before("shallow") ?? undefined);
    const named = targets.flatMap((t) => [t.oid, ...(t.base ? [t.base] : [])]);
    await repo.importLoose(loose, new Set(named));
    const graph = new ObjectGraph(repo);
    const finals = await graph.peel(named);
    // Each commit is compared with the nearest commit on its first-parent line that the history
    // before the run already had (a branch made from another branch, a commit on top of one).
    const commits = [...new Set(targets.map((t) => finals.get(t.oid)).filter((f) => f && graph.isCommit(f)))];
    const trusted = trustedOids(input, before);
    const parents = await repo.firstParents(commits as string[], trusted);
    const baseOf = (target: Target): string | undefined | "trusted" => {
      const final = finals.get(target.oid);
      if (!final || !graph.isCommit(final)) return target.base;
      let at = final;
      for (let steps = 0; parents.has(at); steps++) {
        const parent = parents.get(at);
        if (parent === null || steps > parents.size) return target.base; // a root: no older history
        at = parent!;
      }
      return at === final ? "trusted" : at;
    };
    const planned: Array<{ target: Target; base: string | undefined; trees: string[] }> = [];
    for (const target of targets) {
      const base = baseOf(target);
      if (base === "trusted") continue; // the history before the run named it: nothing new
      const trees = await graph.treesOf(target.oid, target.stash);
      if (typeof trees === "string") {
        out.push(refuse(target.path, target.change, REF_RULE, `${target.label} names ${short(target.oid)}: ${trees}`));
        continue;
      }
      planned.push({ target, base, trees });
    }
    const pairs = new Map<string, readonly [string, string]>();
    const withBase: Array<{ target: Target; pairs: Array<readonly [string, string]> }> = [];
    for (const { target, base, trees } of planned) {
      const baseTrees = base ? await graph.treesOf(base, false) : undefined;
      const baseTree = Array.isArray(baseTrees) && baseTrees.length > 0 ? baseTrees[0]! : repo.emptyTree;
      const own = trees.map((tree) => [baseTree, tree] as const);
      for (const pair of own) pairs.set(pair.join(" "), pair);
      withBase.push({ target, pairs: own });
    }
    const diffs = await repo.diff([...pairs.values()], MAX_DIFF_BYTES);
    for (const { target, pairs: own } of withBase) {
      for (const pair of own) {
        const problem = judge.diff(diffs.get(pair.join(" ")) ?? []);
        if (!problem) continue;
        out.push(
          refuse(
            target.path,
            target.change,
            problem.rule,
            `${target.label} names ${short(target.oid)}, whose tree ${problem.detail}: host git writes it at a checkout, reset --hard or stash pop`,
          ),
        );
        break;
      }
    }
    if (Array.isArray(shallow) && shallow.length > 0) {
      // Each new boundary must hide nothing: its parents are absent, or boundaries themselves (what
      // `fetch --depth` marks in a shallow clone), never history behind it (the run's own commit on
      // HEAD named there would make gc drop everything behind HEAD).
      await graph.learn(shallow);
      const boundaries = new Set([...shallowLines(before("shallow")), ...shallow]);
      const parents = shallow.map((oid) => graph.parentsOf(oid));
      const present = await repo.info(parents.flatMap((p) => p ?? []));
      const hides = (p: string) => !boundaries.has(p) && !("missing" in (present.get(p) ?? { missing: true }));
      const hiding = shallow.filter((_, i) => parents[i] === undefined || parents[i]!.some(hides));
      if (hiding.length > 0)
        out.push(refuse(shallowChange!.path, shallowChange!.change, REF_RULE, shallowWords(hiding)));
    }
    if (out.length === 0) {
      const step = await stepProblem(repo, graph, judge, commits as string[], trusted);
      if (step) out.push(refuse(inGitDir(root, "refs"), "modified", step.rule, step.detail));
    }
  } catch (error) {
    if (!(error instanceof ObjectReadError)) throw error;
    out.push(refuse(targets[0]!.path, targets[0]!.change, REF_RULE, `not checked: ${error.message}`));
  } finally {
    repo?.dispose();
    close();
  }
  return out;
}

/**
 * Each commit the run's refs reach anew, against its first parent (a root against the empty
 * tree): a commit between a ref's tip and the history before the run is checked out by a rebase,
 * cherry-pick or bisect on the host, whose hooks run from that checkout (review: a commit adding
 * .githooks/post-commit, the next one removing it, and the host's `git pull --rebase` ran them).
 * A deletion is no new content and passes here; the tips' own comparison above judges those.
 */
async function stepProblem(
  repo: PrivateRepo,
  graph: ObjectGraph,
  judge: PathJudge,
  commits: readonly string[],
  trusted: readonly string[],
): Promise<{ rule: string; detail: string } | undefined> {
  const steps = await repo.newCommits(commits, trusted);
  if (steps.size === 0) return undefined;
  if (steps.size > MAX_NEW_COMMITS)
    return { rule: REF_RULE, detail: `not checked: its refs reach more than ${MAX_NEW_COMMITS} new commits` };
  await graph.learn([...steps.keys(), ...[...steps.values()].flatMap((p) => p.slice(0, 1))]);
  const pairs = new Map<string, { pair: readonly [string, string]; commit: string }>();
  for (const [commit, parents] of steps) {
    const own = await graph.treesOf(commit, false);
    if (typeof own === "string") return { rule: REF_RULE, detail: `the run's commit ${short(commit)} is ${own}` };
    const parentTrees = parents[0] ? await graph.treesOf(parents[0], false) : [repo.emptyTree];
    if (typeof parentTrees === "string")
      return { rule: REF_RULE, detail: `the parent of the run's commit ${short(commit)} is ${parentTrees}` };
    const pair = [parentTrees[0] ?? repo.emptyTree, own[0] ?? repo.emptyTree] as const;
    if (pair[0] !== pair[1]) pairs.set(pair.join(" "), { pair, commit });
  }
  const diffs = await repo.diff(
    [...pairs.values()].map((p) => p.pair),
    MAX_DIFF_BYTES,
  );
  for (const [key, { commit }] of pairs) {
    const added = (diffs.get(key) ?? []).filter((record) => record.dstMode !== 0);
    const problem = judge.diff(added);
    if (problem)
      return {
        rule: problem.rule,
        detail: `its refs reach ${short(commit)}, a commit the run made whose tree ${problem.detail}: host git writes it when a rebase, cherry-pick or bisect replays that commit`,
      };
  }
  return undefined;
}

/**
 * Every object id the git directory's pointers named before the run: HEAD, loose and packed refs,
 * the `*_HEAD` files and the reflogs. What they reach is history the run did not write.
 */
function trustedOids(input: RefCheckInput, before: ReadFile): string[] {
  const out = new Set<string>();
  const packed = before("packed-refs");
  if (packed) for (const oid of parsePackedRefs(packed).values()) out.add(oid);
  const head = resolveRef(before, undefined, "HEAD");
  if (head && head !== "unknown") out.add(head);
  for (const path of input.access.listBefore(input.root)) {
    const relative = input.root === "" ? path : path.slice(input.root.length + 1);
    const file = relative.replace(/^worktrees\/[^/]+\//, "");
    const log = file.startsWith("logs/");
    if (relative.endsWith(".lock") || !(log || relative.startsWith("refs/") || /^[A-Z_]+HEAD$/.test(file))) continue;
    const content = before(relative);
    if (!content) continue;
    for (const oid of log ? newReflogOids(null, content) : oidsOf(content)) out.add(oid);
  }
  return [...out];
}

/** The commits the run's pointers name anew, each with what it is compared with; or why they cannot be read. */
function collectTargets(input: RefCheckInput, before: ReadFile, after: ReadFile): Target[] | string {
  const packedOf = (read: ReadFile) => {
    const content = read("packed-refs");
    return content === undefined ? undefined : content === null ? new Map<string, string>() : parsePackedRefs(content);
  };
  const packedBefore = packedOf(before);
  const packedAfter = packedOf(after);
  if (packedAfter === undefined) return "its packed-refs cannot be read";
  const known = (value: string | undefined | "unknown") => (value === "unknown" ? undefined : value);
  const headBefore = known(resolveRef(before, packedBefore, "HEAD"));
  const out = new Map<string, Target>();
  const add = (oid: string, base: string | undefined, label: string, change: PointerChange, stash = false) => {
    if (oid === base) return;
    const key = `${base ?? ""} ${oid} ${stash}`;
    if (!out.has(key)) out.set(key, { oid, base, label, path: change.path, change: change.change, stash });
  };

  const names = new Map<string, PointerChange>();
  const packedChange = input.changes.find((c) => c.relative === "packed-refs");
  if (packedChange) {
    for (const name of new Set([...(packedBefore?.keys() ?? []), ...packedAfter.keys()]))
      if (packedBefore?.get(name) !== packedAfter.get(name)) names.set(name, packedChange);
  }
  for (const change of input.changes) {
    const rel = change.relative;
    if (rel.startsWith("refs/") || rel === "HEAD" || /^worktrees\/[^/]+\/HEAD$/.test(rel)) names.set(rel, change);
  }
  for (const [name, change] of names) {
    const now = resolveRef(after, packedAfter, name);
    if (now === "unknown") return `${name} cannot be read`;
    if (now === undefined) continue;
    const was = known(resolveRef(before, packedBefore, name));
    add(now, was ?? headBefore, name, change, name === "refs/stash");
  }

  for (const change of input.changes) {
    if (change.change === "deleted") continue;
    const rel = change.relative;
    const file = rel.replace(/^worktrees\/[^/]+\//, "");
    if (
      /^(ORIG_HEAD|FETCH_HEAD|MERGE_HEAD|CHERRY_PICK_HEAD|REVERT_HEAD|REBASE_HEAD|AUTO_MERGE|BISECT_EXPECTED_REV|BISECT_START)$/.test(
        file,
      )
    ) {
      const now = after(rel);
      if (now === undefined) return `${rel} cannot be read`;
      const old = new Set(before(rel) ? oidsOf(before(rel)!) : []);
      for (const oid of oidsOf(now ?? Buffer.alloc(0))) if (!old.has(oid)) add(oid, headBefore, file, change);
    } else if (rel.startsWith("logs/") || /^worktrees\/[^/]+\/logs\//.test(rel)) {
      const now = after(rel);
      if (now === undefined) return `${rel} cannot be read`;
      if (now === null) continue;
      const ref = rel.startsWith("logs/") ? refOfReflog(rel) : rel.replace("/logs/", "/");
      const base = known(resolveRef(before, packedBefore, ref)) ?? headBefore;
      for (const oid of newReflogOids(before(rel), now, input.access.beforeSize(inGitDir(input.root, rel))))
        add(oid, base, `${ref}@{...}`, change, ref === "refs/stash");
    }
  }
  return [...out.values()];
}

/**
 * A BISECT_START the run wrote that names a branch (git-plain-data.ts has checked its form; an
 * object id there is judged with the `*_HEAD` files) must name one the git directory has after the
 * run: `git bisect reset` checks it out, and `git checkout` takes any other name for whatever
 * revision it resolves to (a tag, a remote branch, an abbreviated id of a commit no ref names,
 * `<name>-g<hex>`), which nothing here judged.
 */
function bisectStartProblem(change: PointerChange, after: ReadFile): string | undefined {
  if (change.change === "deleted" || change.relative.replace(/^worktrees\/[^/]+\//, "") !== "BISECT_START") return;
  const content = after(change.relative);
  if (content === undefined) return `${change.relative} cannot be read`;
  const name = (content ?? Buffer.alloc(0)).toString("utf8").trim();
  if (name === "" || /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/i.test(name)) return;
  if (!isBranchName(name)) return `BISECT_START names ${JSON.stringify(name.slice(0, 80))}, which is no branch name`;
  const packed = after("packed-refs");
  if (packed === undefined) return "its packed-refs cannot be read";
  const branch = resolveRef(after, packed === null ? new Map() : parsePackedRefs(packed), `refs/heads/${name}`);
  if (branch === "unknown") return `refs/heads/${name} cannot be read`;
  if (branch === undefined)
    return `BISECT_START names ${JSON.stringify(name)}, which is no branch: the host's bisect reset would check out whatever revision that name resolves to`;
  return;
}

/**
 * The commits a `shallow` the run wrote names anew (undefined problem: a string). Git takes each
 * for a commit without parents, and the host's next `git gc` drops the history behind it as
 * unreachable (review: `git rev-parse HEAD > .git/shallow` and a month-old clone's history was
 * gone at gc). Lines may go (`--deepen`, `--unshallow`); a new one must be the boundary of history
 * the run fetched (`fetch --depth` in a shallow clone): a commit whose parents are not there.
 */
function shallowAdded(before: ReadFile, after: ReadFile): string[] | string {
  const now = after("shallow");
  if (now === undefined) return "shallow cannot be read";
  const had = shallowLines(before("shallow"));
  const added = [...shallowLines(now)].filter((line) => !had.has(line));
  const odd = added.find((line) => !/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(line));
  return odd === undefined ? added : `shallow holds ${JSON.stringify(odd.slice(0, 80))}, which is no commit id`;
}

function shallowLines(content: Buffer | null | undefined): Set<string> {
  return new Set(
    (content ?? Buffer.alloc(0))
      .toString("latin1")
      .split("\n")
      .map((line) => line.trim())
      .filter(Boolean),
  );
}

function shallowWords(oids: readonly string[]): string {
  const which = oids.length === 1 ? short(oids[0]!) : `${oids.length} commits`;
  return `shallow names ${which} anew as having no parents, though the repository holds history behind ${oids.length === 1 ? "it" : "them"}: the host's next git gc would drop that history`;
}

const short = (oid: string) => oid.slice(0, 12);
