// What the ref checks learn of objects through the private repository (git-object-reader.ts), a
// batch at a time: types, the content of commits and tags (small ones only: git writes them far
// below MAX_COMMIT_BYTES), tags peeled, and the trees a named object leads to.
import type { ObjectInfo, PrivateRepo } from "./git-object-reader.js";

/** A commit or tag larger than this is not read. */
const MAX_COMMIT_BYTES = 1024 * 1024;

export /** What the checks learn of objects through the private repository, a batch at a time. */
class ObjectGraph {
  private readonly info = new Map<string, ObjectInfo>();
  private readonly parsed = new Map<string, { tree?: string; parents: string[]; object?: string }>();
  private readonly peeled = new Map<string, string>();

  constructor(private readonly repo: PrivateRepo) {}

  /** A learned commit's parents (undefined when it is no commit read here). */
  parentsOf(oid: string): string[] | undefined {
    return this.isCommit(oid) ? this.parsed.get(oid)?.parents : undefined;
  }

  isCommit(oid: string): boolean {
    const facts = this.info.get(oid);
    return facts !== undefined && "type" in facts && facts.type === "commit";
  }

  /** Types, and the content of commits and tags (small ones), of objects not known yet. */
  async learn(oids: readonly string[]): Promise<void> {
    const unknown = [...new Set(oids)].filter((oid) => !this.info.has(oid));
    for (const [oid, facts] of await this.repo.info(unknown)) this.info.set(oid, facts);
    const readable = unknown.filter((oid) => {
      const facts = this.info.get(oid)!;
      return "type" in facts && (facts.type === "commit" || facts.type === "tag") && facts.size <= MAX_COMMIT_BYTES;
    });
    for (const [oid, content] of await this.repo.contents(readable, readable.length * MAX_COMMIT_BYTES))
      this.parsed.set(oid, parseCommitOrTag(content));
  }

  /** What each object names once its tags are peeled (at most 5 deep). */
  async peel(oids: readonly string[]): Promise<Map<string, string>> {
    for (const oid of oids) this.peeled.set(oid, oid);
    let frontier = [...new Set(oids)];
    for (let depth = 0; depth < 6 && frontier.length > 0; depth++) {
      await this.learn(frontier);
      const next: string[] = [];
      for (const [start, current] of this.peeled) {
        const object = this.parsed.get(current)?.object;
        const facts = this.info.get(current);
        if (facts && "type" in facts && facts.type === "tag" && object) {
          this.peeled.set(start, object);
          next.push(object);
        }
      }
      frontier = next;
    }
    return this.peeled;
  }

  /**
   * The trees an object leads to (a commit its tree, a tree itself, a blob none; a stash commit
   * also its index and untracked commits' trees), or why not.
   */
  async treesOf(oid: string, stash: boolean): Promise<string[] | string> {
    await this.peel([oid]);
    const end = this.peeled.get(oid)!;
    const own = this.treeOf(end);
    if (typeof own === "string" || !stash) return own;
    const parents = this.parsed.get(end)?.parents.slice(1, 3) ?? [];
    await this.learn(parents);
    const out = [...own];
    for (const parent of parents) {
      const trees = this.treeOf(parent);
      if (typeof trees === "string") return `its stash parent ${short(parent)} is ${trees}`;
      for (const tree of trees) out.push(tree);
    }
    return out;
  }

  private treeOf(oid: string): string[] | string {
    const facts = this.info.get(oid);
    if (!facts || "missing" in facts) return "an object that is not in the repository";
    if (facts.type === "tree") return [oid];
    if (facts.type === "blob") return [];
    const parsed = this.parsed.get(oid);
    if (!parsed) return `a ${facts.type} of ${facts.size} bytes, too large to read`;
    if (facts.type === "tag") return "a tag chain too deep to follow";
    return parsed.tree ? [parsed.tree] : "a commit without a tree";
  }
}

function parseCommitOrTag(content: Buffer): { tree?: string; parents: string[]; object?: string } {
  const headerEnd = content.indexOf("\n\n");
  const header = content.toString("utf8", 0, headerEnd < 0 ? content.length : headerEnd);
  const out: { tree?: string; parents: string[]; object?: string } = { parents: [] };
  for (const line of header.split("\n")) {
    const space = line.indexOf(" ");
    const key = line.slice(0, space);
    const value = line.slice(space + 1);
    if (key === "tree" && out.tree === undefined) out.tree = value;
    else if (key === "parent") out.parents.push(value);
    else if (key === "object" && out.object === undefined) out.object = value;
  }
  return out;
}

const short = (oid: string) => oid.slice(0, 12);
