// FIFOs, sockets and devices a run leaves in a writable tree: a host tool that opens a file by name
// (a prompt's nvm hook reading `.nvmrc`, `npm` reading `package.json`, an editor) blocks forever on
// a FIFO. Each one the run made is removed after the run; one that cannot be removed fails it.
import fs from "node:fs";
import { atPath, errorCode, folderFdOf, kindOf, openRoot, type WalkEntry } from "./fd-walk.js";
import { withOwnerWrite } from "./owner-write.js";
import { lstatOrUndefined, openDirBelow } from "./remove-tree.js";
import type { EntryPair } from "./workspace-rules.js";

const SPECIAL_KINDS = new Set(["fifo", "socket", "device"]);

/**
 * The rule of a FIFO, socket or device the run left that the host could not remove. No policy
 * allows it: a tool on this machine would block on it.
 */
export const SPECIAL_LEFT_RULE = "special-files";

export interface SpecialEntry {
  path: string;
  kind: string;
  /** Created, or made of another entry (the change its violation names if it stays). */
  change: "created" | "modified";
  /** The folder the walk found it in, as "dev:ino": the only folder its removal changes. */
  folder: string;
}

/** The identity of the folder the walk holds `entry` in, while it visits it. */
export function walkedFolder(entry: WalkEntry): string {
  const folder = fs.fstatSync(folderFdOf(entry.at));
  return `${folder.dev}:${folder.ino}`;
}

/** A FIFO, socket or device that the run made: none was at its name before, or another entry was. */
export function plantedSpecial(pair: EntryPair): boolean {
  const { before, after } = pair;
  if (!after || !SPECIAL_KINDS.has(after.kind)) return false;
  return !before || before.kind !== after.kind || before.ino !== after.ino;
}

/**
 * Unlinks each listed entry that is still a FIFO, socket or device (through its folder's fd, no
 * link followed; in a folder the run made read-only, owner write is lent for the unlink:
 * owner-write.ts). Nothing in the sandbox runs any more, but the kind is checked again at the
 * unlink all the same: what is there now is what is removed. Returns those removed and those left,
 * with why.
 */
export function removeSpecialEntries(
  root: string,
  entries: readonly SpecialEntry[],
): { removed: SpecialEntry[]; left: Array<SpecialEntry & { why: string }> } {
  const removed: SpecialEntry[] = [];
  const left: Array<SpecialEntry & { why: string }> = [];
  if (entries.length === 0) return { removed, left };
  const rootFd = openRoot(root);
  try {
    for (const entry of entries) {
      const slash = entry.path.lastIndexOf("/");
      let dirFd: number | undefined;
      try {
        dirFd = openDirBelow(rootFd, slash < 0 ? "" : entry.path.slice(0, slash));
        if (dirFd === undefined) continue; // its folder is gone, and the entry with it
        const folder = fs.fstatSync(dirFd);
        if (`${folder.dev}:${folder.ino}` !== entry.folder) throw new Error("its folder is not the one the walk saw");
        const at = atPath(dirFd, entry.path.slice(slash + 1));
        const stat = lstatOrUndefined(at);
        if (!stat || !SPECIAL_KINDS.has(kindOf(stat))) continue;
        withOwnerWrite(dirFd, () => fs.unlinkSync(at));
        removed.push(entry);
      } catch (error) {
        left.push({ ...entry, why: errorCode(error) });
      } finally {
        if (dirFd !== undefined) fs.closeSync(dirFd);
      }
    }
  } finally {
    fs.closeSync(rootFd);
  }
  return { removed, left };
}
