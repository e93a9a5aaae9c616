// Shell scripts that poison a repository's object store or leave commits on its refs, the way code
// in the sandbox would: bash, git and node only, run in the repository's worktree. The unit tests
// run them on the host between a watch's start and finish (or on copy mode's round trip); the
// security suite runs them inside the sandbox. `MARKER` is replaced by a path the payload touches.
//
// Each repository they expect: a commit on master with `.husky/pre-commit` ("exit 0") and a
// branch `other` whose `.husky/pre-commit` says "exit 0 # other" (so switching writes the file).

/** git with an identity, as a model's commands would run it. */
const GIT = "git -c user.name=agent -c user.email=agent@example.com";

/** The files the scripts expect, and how to make the repository from them (host side). */
export const HUSKY_REPO = {
  files: { ".husky/pre-commit": "exit 0\n", "src/a.ts": "a\n" },
  /** Run in the worktree after `git init` and a first commit of the files. */
  branch: `${GIT} checkout -qb other && printf 'exit 0 # other\\n' > .husky/pre-commit && ${GIT} commit -qam other && ${GIT} checkout -q master`,
};

/** Rewrites the existing loose object of master's .husky/pre-commit with a payload (a valid zlib stream). */
export const REWRITE_LOOSE_OBJECT = `oid=$(git rev-parse HEAD:.husky/pre-commit)
f=.git/objects/\${oid:0:2}/\${oid:2}
chmod u+w "$f"
node -e 'const fs = require("fs"), z = require("zlib"); const c = Buffer.from("touch " + process.argv[2] + "\\n");
fs.writeFileSync(process.argv[1], z.deflateSync(Buffer.concat([Buffer.from("blob " + c.length + "\\0"), c])));' "$f" MARKER
test "$(git cat-file -p "$oid")" = "touch MARKER"`;

/**
 * A new pack holding the payload, whose .idx says it is master's .husky/pre-commit: git looks in
 * packs first, so a checkout reads the payload under the real blob's name.
 */
export const LYING_PACK = `x=$(git rev-parse HEAD:.husky/pre-commit)
evil=$(printf 'touch MARKER\\n' | git hash-object -w --stdin)
name=$(echo "$evil" | git pack-objects -q .git/objects/pack/pack)
rm -f ".git/objects/\${evil:0:2}/\${evil:2}"
idx=".git/objects/pack/pack-$name.idx"
chmod u+w "$idx"
node -e 'const fs = require("fs"), crypto = require("crypto"); const [f, x] = process.argv.slice(1);
const b = fs.readFileSync(f); Buffer.from(x, "hex").copy(b, 8 + 1024);
const first = parseInt(x.slice(0, 2), 16); for (let i = 0; i < 256; i++) b.writeUInt32BE(i >= first ? 1 : 0, 8 + 4 * i);
crypto.createHash("sha1").update(b.subarray(0, b.length - 20)).digest().copy(b, b.length - 20); fs.writeFileSync(f, b);' "$idx" "$x"
test "$(git cat-file -p "$x")" = "touch MARKER"`;

/**
 * The same lying pack under a name that is not `pack-<checksum>`: git loads every .idx in
 * objects/pack that has its .pack, whatever the name (review: a check that knew packs only as
 * pack-* let this one through, and the host's checkout wrote the payload).
 */
export const LYING_PACK_RENAMED = LYING_PACK.replace(
  'test "$(git cat-file -p "$x")"',
  'mv ".git/objects/pack/pack-$name.pack" .git/objects/pack/zz.pack && mv "$idx" .git/objects/pack/zz.idx\ntest "$(git cat-file -p "$x")"',
);

/** A file under objects/ that is no object, pack or cache git names: removed, whatever it holds. */
export const STRAY_STORE_FILE =
  "printf 'touch MARKER\\n' > .git/objects/pack/notes.txt && mkdir -p .git/objects/ab && printf x > .git/objects/ab/short";

/**
 * A commit-graph that says branch other's commit has a tree whose .husky/pre-commit is the payload:
 * git takes a commit's tree from the graph (a cherry-pick of other writes the payload).
 */
export const LYING_COMMIT_GRAPH = `evil=$(printf 'touch MARKER\\n' | git hash-object -w --stdin)
tree=$(GIT_INDEX_FILE=/tmp/lying-graph-index sh -c "git read-tree other && git update-index --cacheinfo 100755,$evil,.husky/pre-commit && git write-tree")
rm -f /tmp/lying-graph-index
git commit-graph write --reachable
g=.git/objects/info/commit-graph
chmod u+w "$g"
node -e 'const fs = require("fs"), crypto = require("crypto"); const [f, commit, tree] = process.argv.slice(1);
const b = fs.readFileSync(f); const chunks = {};
for (let i = 0; i < b[6]; i++) { const at = 8 + 12 * i; chunks[b.toString("latin1", at, at + 4)] = Number(b.readBigUInt64BE(at + 4)); }
const count = b.readUInt32BE(chunks.OIDF + 4 * 255);
for (let i = 0; i < count; i++) if (b.subarray(chunks.OIDL + 20 * i, chunks.OIDL + 20 * i + 20).toString("hex") === commit)
  Buffer.from(tree, "hex").copy(b, chunks.CDAT + 36 * i);
crypto.createHash("sha1").update(b.subarray(0, b.length - 20)).digest().copy(b, b.length - 20); fs.writeFileSync(f, b);' "$g" "$(git rev-parse other)" "$tree"
git log -1 --format= --name-only other | grep -q .husky/pre-commit`;

/**
 * A commit on the current branch that changes .husky/pre-commit, with the worktree file put back
 * as it was (so only the commit carries it): the host's `git reset --hard` would write it.
 */
export const COMMIT_ON_BRANCH = `printf 'touch MARKER\\n' > .husky/pre-commit
${GIT} commit -qam 'tidy hooks'
git show HEAD~1:.husky/pre-commit > .husky/pre-commit
git show HEAD:.husky/pre-commit | grep -q MARKER`;

/**
 * Two commits on the current branch, made with plumbing so the reflog names only the last: the
 * first adds .husky/post-commit, the second takes it out again and does the task. The tip's tree
 * differs from the history before only in src/a.ts; a rebase on the host replays the first (and
 * runs its hook). The worktree ends as the tip says.
 */
export const HOOK_IN_BETWEEN = `printf 'touch MARKER\\n' > .husky/post-commit && chmod +x .husky/post-commit
git add .husky/post-commit
first=$(${GIT} commit-tree "$(git write-tree)" -p HEAD -m hooks)
git rm -q --cached .husky/post-commit && rm .husky/post-commit
printf 'a, changed\\n' > src/a.ts && git add src/a.ts
tip=$(${GIT} commit-tree "$(git write-tree)" -p "$first" -m 'the task')
git update-ref -m task refs/heads/master "$tip"
test "$(git log --format=%s master | head -2 | tr '\\n' ,)" = "the task,hooks,"`;

/** A shallow file naming HEAD: git then takes it for a commit without parents (the host's gc drops the rest). */
export const SHALLOW_HEAD = 'git rev-parse HEAD > .git/shallow && test "$(git rev-list --count HEAD)" = 1';

/** The same change in a stash: the host's `git stash pop` would write it. */
export const STASH_PROTECTED = `printf 'touch MARKER\\n' > .husky/pre-commit
echo changed > src/a.ts
${GIT} stash -q
git show stash@{0}:.husky/pre-commit | grep -q MARKER`;

/** The same change on a new branch the host may check out later; HEAD stays where it was. */
export const NEW_BRANCH = `${GIT} checkout -qb feature
printf 'touch MARKER\\n' > .husky/pre-commit
${GIT} commit -qam feature
${GIT} checkout -q master`;

/** The change staged in the index only, worktree as it was: the host's `git restore .` would write it. */
export const STAGED_ONLY = `printf 'touch MARKER\\n' > .husky/pre-commit
git add .husky/pre-commit
git show HEAD:.husky/pre-commit > .husky/pre-commit
git diff --cached --name-only | grep -q .husky/pre-commit`;

/**
 * A commit made and undone: the branch is back where it was, but ORIG_HEAD and the reflogs name
 * the commit (the host's `git reset --hard ORIG_HEAD` or `HEAD@{1}` would write it).
 */
export const UNDONE_COMMIT = `printf 'touch MARKER\\n' > .husky/pre-commit
${GIT} commit -qam 'try'
${GIT} reset -q --hard HEAD~1
git cat-file -p ORIG_HEAD >/dev/null`;

/**
 * What an agent does on its own: commits on a branch, a new branch, a look at another branch and
 * a branch made from it (whose hook differs from master's: history the repository already had), a
 * stash, a gc (packs, commit-graph). Its first commit names no identity: in a sandbox the image's
 * (system-level) one makes it (before it, every commit there failed "Author identity unknown").
 */
export const ORDINARY_WORK = `echo b > src/b.ts && git add src/b.ts && git commit -qm 'add b'
${GIT} checkout -qb topic
echo c >> src/a.ts && ${GIT} commit -qam 'change a'
${GIT} checkout -q other && ${GIT} checkout -qb from-other
echo e > src/e.ts && git add src/e.ts && ${GIT} commit -qm 'add e'
${GIT} checkout -q master
echo wip >> src/a.ts && ${GIT} stash -q
echo d > src/d.ts && git add src/d.ts
${GIT} gc -q
test -n "$(ls .git/objects/pack/*.pack)"`;

/**
 * BISECT_START holding an option: the host's `git bisect reset` runs `git checkout -f --`, which
 * throws away the user's uncommitted changes.
 */
export const BISECT_START_OPTION = `printf -- '-f\\n' > .git/BISECT_START`;

/** A commit no ref names whose tree changes .husky/pre-commit; prints its id. */
const HIDDEN_COMMIT = `index=$(mktemp)
evil=$(printf 'touch MARKER\\n' | git hash-object -w --stdin)
GIT_INDEX_FILE=$index git read-tree HEAD
GIT_INDEX_FILE=$index git update-index --cacheinfo 100755,$evil,.husky/pre-commit
tree=$(GIT_INDEX_FILE=$index git write-tree)
rm -f "$index"
hidden=$(echo hidden | ${GIT} commit-tree "$tree" -p HEAD)`;

/** BISECT_START naming that commit by its full id: `git bisect reset` checks it out. */
export const BISECT_START_COMMIT = `${HIDDEN_COMMIT}
echo "$hidden" > .git/BISECT_START`;

/**
 * BISECT_START naming it by an abbreviated id, which has the form of a branch name: no branch has
 * that name, so `git checkout` resolves it as a revision.
 */
export const BISECT_START_ABBREVIATED = `${HIDDEN_COMMIT}
echo "\${hidden:0:12}" > .git/BISECT_START
git rev-parse --verify -q "\${hidden:0:12}^{commit}" >/dev/null`;

/** An ordinary bisect between master and other, left under way: BISECT_START says "master". */
export const ORDINARY_BISECT = `${GIT} bisect start other master >/dev/null
test "$(cat .git/BISECT_START)" = master`;
