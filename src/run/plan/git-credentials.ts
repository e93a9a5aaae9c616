// A credential in the git config of any repository the sandbox can read (the workspace's own, one
// nested in it, one in a writable or read-only folder the run lends) is a file the sandbox reads
// like any other, in bind and copy mode alike: the run refuses to start, naming the keys (never
// their values) and the git command that removes each kind (docs/security.md S9).
import { usageError } from "../../errors.js";
import { type GitConfigFacts, gitDirOf, MAX_FILES, scanGitConfig } from "../../workspace/git-config-scan.js";
import {
  type FoundRepositories,
  findRepositories,
  MAX_REPOSITORIES,
  MAX_WALKED_ENTRIES,
} from "../../workspace/nested-repositories.js";
import type { ResolvedRun } from "./resolve-options.js";

/** Refuses a folder whose repository's git config holds a credential or reaches more files than are read. */
export function refuseGitCredentials(folder: string, { credentials, unread }: GitConfigFacts): void {
  if (unread > 0)
    throw usageError(
      `The git config of ${folder} reaches more than ${MAX_FILES} files (includes, submodules): sandbox-run reads that many to find the drivers it neutralises and any credential, and does not start with more unread.`,
      "Lend a checkout with fewer submodules checked out or fewer include.path entries (a clone without --recurse-submodules), or a smaller tree.",
    );
  if (credentials.length === 0) return;
  const fixes = credentials.map((key) =>
    /^remote\.[^.]+\.(push)?url$/.test(key)
      ? `git -C ${folder} remote set-url ${/\.pushurl$/.test(key) ? "--push " : ""}${key.slice("remote.".length, key.lastIndexOf("."))} <the URL without it>`
      : key.startsWith("url.")
        ? `git -C ${folder} config --remove-section 'url.<that URL>'`
        : `git -C ${folder} config --unset-all '${key}'`,
  );
  throw usageError(
    `The git config of ${folder} holds a credential the sandbox could read: ${credentials.join(", ")}.`,
    `Remove it before the run (${[...new Set(fixes)].join("; ")}; a submodule's is in .git/modules/<name>/config; in GitHub Actions check out with persist-credentials: false, every checkout the run lends included). To let the agent push, give it the token through the policy's secrets, which the egress proxy adds on the host (README: "Let the agent push a branch without holding the token").`,
  );
}

/**
 * Every repository in the trees the sandbox will see, not only each tree's top one: a checkout
 * nested in the workspace keeps its token in its own `.git/config` (review, session 34). Walks each
 * tree once (nested-repositories.ts) and scans each repository's config within that tree. What the
 * walk found goes to `onWalked` too (the sockets: lent-sockets.ts), so no other walk is needed.
 */
export async function refuseNestedGitCredentials(
  trees: readonly string[],
  signal?: AbortSignal,
  options: { maxEntries?: number; onWalked?: (tree: string, found: FoundRepositories) => void } = {},
): Promise<void> {
  const maxEntries = options.maxEntries ?? MAX_WALKED_ENTRIES;
  for (const tree of trees) {
    const found = await findRepositories(tree, {
      maxEntries,
      ...(signal ? { signal } : {}),
      // Git's own folders hold sockets too (`git fsmonitor--daemon`'s): walked when they are looked for.
      intoGitDirs: options.onWalked !== undefined,
    });
    if (found.cut)
      throw usageError(
        `${tree} holds more than ${maxEntries.toLocaleString("en-US")} entries or ${MAX_REPOSITORIES.toLocaleString("en-US")} repositories: sandbox-run looks for a credential in the git config of every repository in the trees the sandbox sees, and does not start with part of one unchecked.`,
        "Lend a smaller tree (--cwd a subfolder), or move what the run does not need out of it.",
      );
    if (found.unlistable)
      throw usageError(
        `sandbox-run cannot list ${found.unlistable.dir} (${found.unlistable.code}), which the sandbox can enter: it looks for a credential in the git config of every repository in the trees the sandbox sees, and one in there would go unchecked.`,
        `Make it listable (\`chmod u+r ${found.unlistable.dir}\`), or move it out of the tree.`,
      );
    options.onWalked?.(tree, found);
    for (const [i, repository] of found.repositories.entries()) {
      // Each scan reads a few small files: a tree of thousands of repositories yields now and then.
      if (i > 0 && i % 200 === 0) {
        signal?.throwIfAborted();
        await new Promise((resolve) => setImmediate(resolve));
      }
      refuseGitCredentials(
        repository.workTree,
        scanGitConfig(tree, repository.gitDir ?? gitDirOf(repository.workTree, tree)),
      );
    }
  }
}

/** The host trees a run's sandbox sees: the workspace, the writable roots and the read-only mounts. */
export function sandboxTrees(run: Pick<ResolvedRun, "cwd" | "writableRoots" | "readOnlyMounts">): string[] {
  return [run.cwd, ...run.writableRoots, ...run.readOnlyMounts];
}
