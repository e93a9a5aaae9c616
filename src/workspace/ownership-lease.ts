// When the caller is root the sandbox still runs as an unprivileged uid. Before the run the
// mounted trees are lent to that uid; afterwards every inode the sandbox uid owns is handed
// back: to its original owner if it was lent, to the caller if the sandbox created it.
//
// Identity, not paths: the sandbox can rename, link and swap anything in a tree it may write,
// so a path names nothing reliable after the run. The lease records each lent inode by
// (dev, ino) with its original owner, and hands back only inodes the sandbox uid owns now, found
// by a walk through directory fds that never follows a symlink (fd-walk.ts). An inode that had
// other hard links when the run started (a file that is also outside the tree), and a socket, FIFO
// or device node, is never lent and never touched. Setuid/setgid bits of files the sandbox owned are cleared at any depth.
//
// An inode number is reused: the sandbox deletes a lent file and its next new file gets the number
// (ext4 hands it out at once), which would give the new file the lent file's owner (another local
// user, who could then write a folder the sandbox shaped). So an inode counts as lent only when its
// birth time (statx btime, which nothing but the inode's creation sets) is also the one it had when
// lent. Residual: where the file system keeps no birth time (older kernels' tmpfs, NFS, FAT, ext4
// inodes of 128 bytes), Node reports 0 for every inode and a reused number still matches.
//
// The container is stopped (and gone) before the hand-back runs; the lchown through
// /proc/self/fd/<dir fd>/<name> right after an lstat cannot then be raced by the sandbox.
//
// Memory: two 64-bit words per lent inode per device, each array sorted: ino << 16 | owner class,
// and a fingerprint of (ino, birth time); owners are a small table of distinct (uid, gid) pairs.
import fs from "node:fs";
import path from "node:path";
import { mountPointsInside } from "../util/mount-table.js";
import { type EntryKind, type WalkEntry, walkTree, YIELD_EVERY, yieldToEventLoop } from "./fd-walk.js";

interface Owner {
  uid: number;
  gid: number;
}

/** Owner class of inodes that must never be chowned (they had other links: they are also elsewhere). */
const NEVER_TOUCH = 0xffff;
const NEVER_LENT_KINDS: ReadonlySet<EntryKind> = new Set(["socket", "fifo", "device"]);

class InodeTable {
  /** ino << 16 | owner class. */
  private words = new BigUint64Array(1024);
  /** incarnation(ino, birth time) of the same inodes, sorted on their own. */
  private births = new BigUint64Array(1024);
  private length = 0;
  private sorted = true;

  add(stat: fs.Stats, ownerClass: number): void {
    if (this.length === this.words.length) {
      const size = Math.max(1024, this.words.length * 2);
      const words = new BigUint64Array(size);
      const births = new BigUint64Array(size);
      words.set(this.words);
      births.set(this.births);
      this.words = words;
      this.births = births;
    }
    this.words[this.length] = (BigInt(stat.ino) << 16n) | BigInt(ownerClass);
    this.births[this.length++] = incarnation(stat);
    this.sorted = false;
  }

  seal(): void {
    this.words = this.words.slice(0, this.length);
    this.births = this.births.slice(0, this.length);
    this.words.sort();
    this.births.sort();
    this.sorted = true;
  }

  /**
   * The owner class recorded for an inode, or undefined (also when its number was reused since,
   * where `byBirth`: the file system's birth times are real, see OwnershipLease.birthTimesKept).
   */
  get(stat: fs.Stats, byBirth = true): number | undefined {
    if (!this.sorted) this.seal();
    const key = BigInt(stat.ino) << 16n;
    const at = search(this.words, this.length, key, ~0xffffn);
    if (at === undefined) return undefined;
    if (byBirth && search(this.births, this.length, incarnation(stat), ~0n) === undefined) return undefined;
    return Number(this.words[at]! & 0xffffn);
  }
}

/** The index of a word of a sorted array whose masked bits are `key`, or undefined. */
function search(words: BigUint64Array, length: number, key: bigint, mask: bigint): number | undefined {
  let lo = 0;
  let hi = length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const midKey = words[mid]! & mask;
    if (midKey === key) return mid;
    if (midKey < key) lo = mid + 1;
    else hi = mid - 1;
  }
  return undefined;
}

const incarnationBytes = new DataView(new ArrayBuffer(16));

/**
 * A 64-bit fingerprint of an inode's number and birth time: which incarnation of the number it
 * is. Neither input is the sandbox's to choose (the kernel picks both), so a fast mix is enough:
 * a new inode passes for a lent one only if its fingerprint equals one of the n recorded (n/2^64).
 */
function incarnation(stat: fs.Stats): bigint {
  incarnationBytes.setFloat64(0, stat.ino);
  incarnationBytes.setFloat64(8, stat.birthtimeMs);
  let h1 = 0x9e3779b9;
  let h2 = 0x85ebca6b;
  for (let i = 0; i < 16; i += 4) {
    const k = incarnationBytes.getUint32(i);
    h1 = Math.imul(rotate(h1 ^ Math.imul(k, 0xcc9e2d51), 13), 5) + 0xe6546b64;
    h2 = Math.imul(rotate(h2 ^ Math.imul(k, 0x1b873593), 17), 5) + 0x561ccd1b;
    h1 = (h1 + h2) | 0;
    h2 = (h2 + h1) | 0;
  }
  return (BigInt(finalMix(h1) >>> 0) << 32n) | BigInt(finalMix(h2 ^ h1) >>> 0);
}

const rotate = (x: number, r: number) => (x << r) | (x >>> (32 - r));

/** murmur3's finaliser: every input bit reaches every output bit. */
function finalMix(h: number): number {
  let x = h ^ (h >>> 16);
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  return x ^ (x >>> 16);
}

export interface OwnershipReport {
  /** Inodes given back to their original owner. */
  restored: number;
  /** Inodes the sandbox created, given to the caller. */
  created: number;
  /** Files whose setuid/setgid bits were cleared. */
  setuidCleared: number;
  /** Entries that could not be handed back (at most 20), with why. */
  failed: Array<{ path: string; why: string }>;
  /**
   * Where the walk could not look (at most 20), with why: a folder it could not open or read
   * (EMFILE, EIO), one that changed, an entry it could not lstat, a tree it could not open.
   * Whatever the sandbox uid owns there is still its own.
   */
  unreached: Array<{ path: string; why: string }>;
  /** Entries of `failed` and `unreached` in all (they list the first 20). */
  leftCount: number;
}

const MAX_LISTED = 20;

const emptyReport = (): OwnershipReport => ({
  restored: 0,
  created: 0,
  setuidCleared: 0,
  failed: [],
  unreached: [],
  leftCount: 0,
});

export class OwnershipLease {
  private readonly owners: Owner[] = [];
  private readonly ownerIndex = new Map<string, number>();
  private readonly inodes = new Map<number, InodeTable>();
  /** Roots the sandbox reads only, and those of them where an entry changed owner. */
  private readonly readOnly: ReadonlySet<string>;
  private readonly chownedIn = new Set<string>();
  /**
   * Whether stat's birth times are the file system's own, learnt at the first chown of a lend: where
   * statx is unavailable (ENOSYS, or an old seccomp filter around the controller), libuv reports
   * ctime as the birth time, which the lease's own chown moves; then every lent inode would look
   * reborn and go to the caller. Without real birth times inodes match by number alone, as before
   * (a reused number can then still match; docs/security.md, what is not promised).
   */
  private birthTimesKept: boolean | undefined;

  private constructor(
    private readonly roots: readonly string[],
    private readonly to: Owner,
    readOnly: readonly string[],
  ) {
    this.readOnly = new Set(readOnly);
  }

  /**
   * Lends every entry of `roots` to `to`; of the roots in `readOnly` (mounted read-only: the
   * sandbox can neither write nor create there) only what `to` could not read otherwise. If lending
   * fails half-way, what was lent is handed back before the error is thrown.
   */
  static async lend(
    roots: readonly string[],
    to: Owner,
    options: { readOnly?: readonly string[] } = {},
  ): Promise<OwnershipLease> {
    const lease = new OwnershipLease(roots, to, options.readOnly ?? []);
    try {
      for (const root of roots) await lease.lendTree(root);
    } catch (error) {
      await lease.restore(to).catch(() => {});
      throw error;
    }
    for (const table of lease.inodes.values()) table.seal();
    return lease;
  }

  /** The owner an entry had before the lease (for entries the sandbox uid owns now). */
  originalOwner(stat: fs.Stats): Owner {
    const ownerClass = this.inodes.get(stat.dev)?.get(stat, this.birthTimesKept !== false);
    if (ownerClass === undefined || ownerClass === NEVER_TOUCH) return { uid: stat.uid, gid: stat.gid };
    return this.owners[ownerClass]!;
  }

  /**
   * Hands back every inode the sandbox uid owns: lent ones to their original owner, the ones
   * the sandbox created to `caller`. Call only once the container is gone.
   */
  async restore(caller: Owner): Promise<OwnershipReport> {
    const report = emptyReport();
    for (const root of this.roots) {
      // A read-only tree where nothing changed owner holds nothing to hand back: the sandbox could
      // create nothing there (review, session 27: a read-only run walked and chowned a 170,000-entry
      // tree twice, 20 s, and moved every file's ctime, so git status then re-read every file).
      if (this.readOnly.has(root) && !this.chownedIn.has(root)) continue;
      // Not through what was mounted inside the tree: its files were never lent, and one the
      // sandbox's uid or gid owned before the run (a volume such a container wrote) is not the
      // caller's (review, session 26: they were handed to root). Where they are now, not where they
      // were: the sandbox may rename a mount point's parent folder (the mount moves with it), and a
      // plain folder it then makes at the old path must be handed back like any other (session 27).
      await handBackTree(root, report, (entry, stat, into) => {
        if (stat.uid !== this.to.uid && stat.gid !== this.to.gid) return;
        // Not lent (or a lent inode's number, reused by a file the sandbox made): the caller's.
        const ownerClass = this.inodes.get(stat.dev)?.get(stat, this.birthTimesKept !== false);
        if (ownerClass === NEVER_TOUCH) return;
        const owner = ownerClass === undefined ? caller : this.owners[ownerClass]!;
        handBack(entry, stat, owner, into);
        if (ownerClass === undefined) into.created++;
        else into.restored++;
      });
    }
    return report;
  }

  private async lendTree(root: string): Promise<void> {
    const readOnly = this.readOnly.has(root);
    // What the walk cannot reach is not lent (the sandbox cannot write it): nothing to report.
    await forEachEntry(root, mountPointsInside(root), (entry, stat) => {
      let table = this.inodes.get(stat.dev);
      if (!table) this.inodes.set(stat.dev, (table = new InodeTable()));
      // What is mounted inside the tree (a CI cache, a volume, a bind mount of a root-only folder)
      // is another tree: the engine's recursive bind shows it to the sandbox, and lending it let
      // the sandbox's uid write there (review, session 25). Never lent, at any depth.
      // Not recorded either: a mount whose source is in the same tree shows the same inodes twice,
      // and a never-touch record beside the lent one left some of them with the sandbox's uid.
      // A file with another hard link is also a file outside the tree (`git clone --local`
      // objects, a planted link): lending it would let the sandbox write there. A socket, FIFO or
      // device node is a door to something else (a root-only service's socket, a disk): never lent.
      if ((entry.kind !== "directory" && stat.nlink > 1) || NEVER_LENT_KINDS.has(entry.kind)) {
        table.add(stat, NEVER_TOUCH);
        return;
      }
      table.add(stat, this.classOf(stat));
      if (readOnly && (entry.kind === "symlink" || readableBy(stat, entry.kind, this.to))) return;
      if (stat.uid !== this.to.uid || stat.gid !== this.to.gid) {
        this.chownedIn.add(root);
        fs.lchownSync(entry.at, this.to.uid, this.to.gid);
        this.birthTimesKept ??= fs.lstatSync(entry.at).birthtimeMs === stat.birthtimeMs && stat.birthtimeMs !== 0;
      }
    });
  }

  private classOf(stat: fs.Stats): number {
    const key = `${stat.uid}:${stat.gid}`;
    let index = this.ownerIndex.get(key);
    if (index === undefined) {
      index = this.owners.length;
      if (index >= NEVER_TOUCH) throw new Error("too many distinct owners in the tree to lend it");
      this.owners.push({ uid: stat.uid, gid: stat.gid });
      this.ownerIndex.set(key, index);
    }
    return index;
  }
}

/** Whether `who` (no capabilities, no other groups) may read a file, or list and enter a folder, as it is. */
function readableBy(stat: fs.Stats, kind: EntryKind, who: Owner): boolean {
  const bits = stat.uid === who.uid ? stat.mode >> 6 : stat.gid === who.gid ? stat.mode >> 3 : stat.mode;
  const need = kind === "directory" ? 0o5 : 0o4;
  return (bits & need) === need;
}

/**
 * Visits every entry (root included) with its lstat, yielding to the event loop now and then;
 * `unreached` hears of each entry the walk could not lstat and each folder it could not walk below.
 */
async function forEachEntry(
  root: string,
  mounts: readonly string[],
  visit: (entry: WalkEntry, stat: fs.Stats) => void,
  unreached: (path: string, why: string) => void = () => {},
): Promise<void> {
  let sinceYield = 0;
  const mounted = new Set(mounts);
  // In any order: a folder of more names than a walk holds (hard links cost the sandbox nothing) is
  // streamed, and past a number of those the shallowest is paused and resumed (fd-walk.ts), so every
  // entry is handed back whatever the tree's shape. A mount point is neither visited nor entered.
  const walk = walkTree(root, {
    maxDepth: Number.POSITIVE_INFINITY,
    descend: (e) => e.fd !== undefined && !mounted.has(e.path),
    order: "any",
  });
  for (const entry of walk) {
    if (!mounted.has(entry.path)) {
      if (entry.stat) visit(entry, entry.stat);
      if (!entry.stat || entry.unwalked) unreached(entry.path || ".", entry.problem ?? "unknown");
    }
    if (++sinceYield >= YIELD_EVERY) {
      sinceYield = 0;
      await yieldToEventLoop();
    }
  }
}

/** One entry back to `owner` (`stat` is the walk's lstat of it); exported for its unit test. */
export function handBack(
  entry: Pick<WalkEntry, "at" | "kind" | "path">,
  stat: fs.Stats,
  owner: Owner,
  report: OwnershipReport,
): void {
  try {
    // chown by root clears setuid on most kernels, setgid only with group-execute: clear both.
    if (entry.kind === "file" && (stat.mode & 0o6000) !== 0) handBackSetuidFile(entry.at, stat, owner, report);
    else if (stat.uid !== owner.uid || stat.gid !== owner.gid) fs.lchownSync(entry.at, owner.uid, owner.gid);
  } catch (error) {
    report.leftCount++;
    if (report.failed.length < MAX_LISTED)
      report.failed.push({ path: entry.path || ".", why: (error as NodeJS.ErrnoException).code ?? String(error) });
  }
}

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK, O_NOCTTY } = fs.constants;

/**
 * A setuid or setgid file, through its own fd: the tree is handed back folder by folder, so a
 * folder's owner (another local user, for a root controller) may already rename names in it while
 * the walk goes on below. A chmod by name would follow a symlink swapped in for the file (and make
 * a root-owned file 0777); the fd is opened without following one and must be the inode judged.
 */
function handBackSetuidFile(at: string | Buffer, judged: fs.Stats, owner: Owner, report: OwnershipReport): void {
  const fd = fs.openSync(at, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile() || stat.ino !== judged.ino || stat.dev !== judged.dev)
      throw Object.assign(new Error("replaced while it was handed back"), { code: "replaced" });
    if ((stat.mode & 0o6000) !== 0) {
      fs.fchmodSync(fd, stat.mode & 0o1777);
      report.setuidCleared++;
    }
    if (stat.uid !== owner.uid || stat.gid !== owner.gid) fs.fchownSync(fd, owner.uid, owner.gid);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * After a crash, when the lease's record died with the controller: every entry of `root` that
 * `from` (the sandbox uid or gid) owns goes to `to`, through the fd walk (no symlink followed,
 * any depth), setuid/setgid bits cleared. Call only once the container is gone.
 */
export async function handBackOrphanedTree(root: string, from: Owner, to: Owner): Promise<OwnershipReport> {
  const report = emptyReport();
  await handBackTree(root, report, (entry, stat, into) => {
    if (stat.uid !== from.uid && stat.gid !== from.gid) return;
    handBack(entry, stat, to, into);
    into.created++;
  });
  return report;
}

/**
 * One tree's hand-back into `report`, its paths made absolute (a report covers every root). A tree
 * that cannot be walked (or moved under the walk) is reported as unreached, never thrown: the other
 * roots are still handed back, and the caller keeps the lease for a later `gc`.
 */
async function handBackTree(
  root: string,
  report: OwnershipReport,
  visit: (entry: WalkEntry, stat: fs.Stats, into: OwnershipReport) => void,
): Promise<void> {
  const here = emptyReport();
  const unreached = (at: string, why: string) => {
    here.leftCount++;
    if (here.unreached.length < MAX_LISTED) here.unreached.push({ path: at, why });
  };
  try {
    await forEachEntry(root, mountPointsInside(root), (entry, stat) => visit(entry, stat, here), unreached);
  } catch (error) {
    unreached(".", (error as Error).message ?? String(error));
  }
  const absolute = (list: OwnershipReport["failed"]) => list.map((e) => ({ ...e, path: path.join(root, e.path) }));
  report.restored += here.restored;
  report.created += here.created;
  report.setuidCleared += here.setuidCleared;
  report.leftCount += here.leftCount;
  report.failed.push(...absolute(here.failed).slice(0, MAX_LISTED - report.failed.length));
  report.unreached.push(...absolute(here.unreached).slice(0, MAX_LISTED - report.unreached.length));
}

/** Whether a hand-back left something the sandbox uid may still own (its lease must be kept). */
export function handedBackWhole(report: OwnershipReport): boolean {
  return report.leftCount === 0;
}

/** What a hand-back left, one "path: why" each (at most 40, then how many more). */
export function leftBehind(report: OwnershipReport): string[] {
  const lines = [
    ...report.failed.map((e) => `${e.path}: ${e.why}`),
    ...report.unreached.map((e) => `${e.path}: ${e.why}`),
  ];
  const more = report.leftCount - lines.length;
  return more > 0 ? [...lines, `${more} more`] : lines;
}

/**
 * The container label value that lets a reaper find what a run lent (every root, whatever the
 * mode: a read-only workspace is lent too), and its reader, which accepts only absolute paths.
 */
export function encodeLentRoots(roots: readonly string[]): string {
  return JSON.stringify(roots);
}

export function decodeLentRoots(label: string | undefined): string[] {
  if (!label) return [];
  try {
    const value: unknown = JSON.parse(label);
    if (!Array.isArray(value)) return [];
    return value.filter((p): p is string => typeof p === "string" && p.startsWith("/") && !p.includes("\0"));
  } catch {
    return [];
  }
}
