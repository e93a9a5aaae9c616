// When the caller is root the sandbox still runs as an unprivileged uid. Before the run we
// lend the mounted trees to that uid (recording every original owner); afterwards every
// entry gets its owner back and whatever the sandbox created belongs to the caller.
import fs from "node:fs/promises";
import path from "node:path";

interface Owner {
  uid: number;
  gid: number;
}

export class OwnershipLease {
  private constructor(
    private readonly roots: string[],
    private readonly original: Map<string, Owner>,
  ) {}

  static async lend(roots: string[], to: Owner): Promise<OwnershipLease> {
    const original = new Map<string, Owner>();
    for (const root of roots) {
      await walk(root, async (entry, stat) => {
        original.set(entry, { uid: stat.uid, gid: stat.gid });
        // A file with another hard link is also a file outside the workspace (`git clone
        // --local` objects, a planted link): lending it would let the sandbox write there.
        if (!stat.isDirectory() && stat.nlink > 1) return;
        if (stat.uid !== to.uid || stat.gid !== to.gid) await fs.lchown(entry, to.uid, to.gid);
      });
    }
    return new OwnershipLease(roots, original);
  }

  /** Restores original owners; entries the sandbox created go to `caller`. */
  async restore(caller: Owner): Promise<void> {
    for (const root of this.roots) {
      await walk(root, async (entry, stat) => {
        const owner = this.original.get(entry) ?? caller;
        if (stat.uid !== owner.uid || stat.gid !== owner.gid)
          await fs.lchown(entry, owner.uid, owner.gid).catch(() => {});
      });
    }
  }
}

/**
 * After a crash, when the lease's record of original owners died with the controller: every
 * entry of `root` that `from` (the sandbox uid) owns goes to `to`. Never follows symlinks.
 */
export async function handBackOrphanedTree(root: string, from: Owner, to: Owner): Promise<void> {
  await walk(root, async (entry, stat) => {
    if (stat.uid === from.uid || stat.gid === from.gid) await fs.lchown(entry, to.uid, to.gid).catch(() => {});
  });
}

async function walk(
  root: string,
  visit: (entry: string, stat: import("node:fs").Stats) => Promise<void>,
): Promise<void> {
  const stack = [root];
  while (stack.length > 0) {
    const entry = stack.pop()!;
    const stat = await fs.lstat(entry).catch(() => undefined);
    if (!stat) continue;
    await visit(entry, stat);
    if (stat.isDirectory()) {
      const names = await fs.readdir(entry).catch(() => [] as string[]);
      for (const name of names) stack.push(path.join(entry, name));
    }
  }
}
