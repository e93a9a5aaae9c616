// Copy mode judges a returned tree with the same rules as bind mode's walk of the host tree
// (workspace/workspace-rules.ts: git safety, the built-in protections, the policy's protectedPaths):
// the tree sent in and the tree that came back become the rule engine's (before, after) pairs, so a
// violation is found before anything reaches the host.
import type { RuleConfig } from "../workspace/workspace-rules.js";
import { type EntryFacts, evaluateWorkspaceRules, type EntryPair } from "../workspace/workspace-rules.js";
import { looksLikeGitDir } from "../workspace/fd-walk.js";
import { comparePaths, type ReturnedTreeCheck, type TreeEntry } from "../workspace-transfer/tree-entry.js";

const TYPE_BITS = { file: 0o100000, directory: 0o040000, symlink: 0o120000 } as const;

export function workspaceRulesCheck(config: RuleConfig): ReturnedTreeCheck {
  return (before, after, root) => {
    // The policy's own globs are workspace paths; the built-in protections apply to every root.
    const rules = root.kind === "workspace" ? config : { ...config, protectedPaths: [] };
    return evaluateWorkspaceRules(pairsOf(before, after), rules).map(({ path, change, rule }) => ({
      path,
      change,
      rule,
    }));
  };
}

/** Both lists merged in walk order into (path; before; after), unchanged entries included. */
function* pairsOf(before: readonly TreeEntry[], after: readonly TreeEntry[]): Generator<EntryPair> {
  const b = [...before].sort((x, y) => comparePaths(x.path, y.path));
  const a = [...after].sort((x, y) => comparePaths(x.path, y.path));
  const gitLikeBefore = gitLikeDirectories(b);
  const gitLikeAfter = gitLikeDirectories(a);
  let i = 0;
  let j = 0;
  while (i < b.length || j < a.length) {
    const order = i >= b.length ? 1 : j >= a.length ? -1 : comparePaths(b[i]!.path, a[j]!.path);
    const path = order <= 0 ? b[i]!.path : a[j]!.path;
    yield {
      path,
      ...(order <= 0 ? { before: factsOf(b[i++]!, gitLikeBefore) } : {}),
      ...(order >= 0 ? { after: factsOf(a[j++]!, gitLikeAfter) } : {}),
    };
  }
}

function factsOf(entry: TreeEntry, gitLike: ReadonlySet<string>): EntryFacts {
  return {
    kind: entry.kind,
    mode: TYPE_BITS[entry.kind] | entry.mode,
    size: entry.size,
    ...(entry.hash !== undefined ? { hash: entry.hash } : {}),
    mtimeMs: entry.mtimeMs,
    ...(entry.kind === "directory" && gitLike.has(entry.path) ? { gitLike: true } : {}),
  };
}

/** Directories whose children look like a git directory (HEAD + objects + refs, or HEAD + commondir). */
function gitLikeDirectories(entries: readonly TreeEntry[]): Set<string> {
  const children = new Map<string, string[]>();
  for (const { path } of entries) {
    if (path === "") continue;
    const slash = path.lastIndexOf("/");
    const parent = slash < 0 ? "" : path.slice(0, slash);
    const names = children.get(parent) ?? [];
    names.push(path.slice(slash + 1));
    children.set(parent, names);
  }
  const out = new Set<string>();
  for (const [dir, names] of children) if (looksLikeGitDir(names)) out.add(dir);
  return out;
}
