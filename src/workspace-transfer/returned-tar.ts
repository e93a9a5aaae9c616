// Copy out, host side: reads the tar the sandbox returned as hostile input, one entry at a time,
// never holding the archive (tar-entries.ts parses it; it refuses pax global and GNU long-name
// headers and pax headers over 64 KiB). What the relay's honest writer (images/pi/relay.mjs, a
// depth-first walk like `tar -c -C root .`) cannot produce fails the whole copy: absolute names,
// `..`, empty or `.` components, a component longer than NAME_MAX, hard links, an entry whose
// directory the archive did not create first (which is how "a symlink, then a file written through
// it" shows up), duplicates, unknown entry types, oversize names or link targets. What honest tar
// can produce but must not reach the host is left out and reported: FIFOs, devices, names that are
// not UTF-8. Setuid and setgid bits are dropped, and so are group/world-write bits the run added to
// a file (another local user could rewrite it); the rules still judge the mode the archive gave
// (TreeEntry.modeAsReturned).
// (Over 300 lines because each of those refusals sits beside the header field it checks.)
//
// Nothing here writes to the host tree. Content that differs from the host's is written to a
// private staging directory (one flat file per entry, created O_EXCL|O_NOFOLLOW, named by a
// counter, so no name from the archive is ever used as a path); content equal to the host file is
// compared on the fly and never written. Runs of zeros are left as holes, so a sparse file costs no
// disk. The archive's bytes and entries are capped, and so are the bytes of names and link targets
// the host keeps (NEW_METADATA_BYTES beyond those sent in): they bound the controller's memory.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { Readable } from "node:stream";
import { SandboxRunError } from "../errors.js";
import { hasUndecodedBytes } from "../util/name-bytes.js";
import { readAll } from "../util/read-fd.js";
import { mib } from "../util/units.js";
import type { HostTree, SkippedEntry } from "./host-tree.js";
import { readTarEntries, TarRefusal } from "./tar-entries.js";
import { UNCHANGED_PAX_KEY } from "./tar-header.js";
import { comparePaths, parentOf, type TreeEntry, type TreeEntryKind } from "./tree-entry.js";

export interface ReturnedTreeLimits {
  /** Bytes of archive read (headers and content) before the copy fails. */
  maxBytes: number;
  maxEntries: number;
  maxPathBytes: number;
  maxDepth: number;
  maxLinkTargetBytes: number;
  /** Bytes of names and link targets beyond those sent in (default NEW_METADATA_BYTES). */
  maxNewMetadataBytes?: number;
}

export interface ReturnedTree {
  /** Walk order; after[0] is the root (""). */
  after: TreeEntry[];
  /** Path -> staged file or symlink (absolute) for every entry whose content or target changed; EMPTY_FILE for an empty file. */
  staged: Map<string, string>;
  /** Entries left out, and why. */
  refused: SkippedEntry[];
  /** Entries left out for their kind, by path (the rules judge them as what they were). */
  refusedKinds: Map<string, "fifo" | "device">;
  /** Paths whose setuid/setgid bits were dropped (the first 100). */
  strippedModes: string[];
  /** Files whose group/world-write bits the run added, dropped (the first 100). */
  writeBitsCleared: string[];
  bytes: number;
  /** A returned file's content (staged, or the host's when it came back unchanged), at most maxBytes. */
  contentOf(path: string, maxBytes: number): Buffer | undefined;
  /** Where a returned file's content is: staged, or the host's file when unchanged; undefined when empty. */
  contentFile?(path: string): string | undefined;
  /** Drops entries (and all below them): the apply then removes them from the host (checks use it). */
  leaveOut?(paths: readonly string[]): void;
}

interface ReadReturnedOptions {
  /** The tree sent in: what content is compared with. */
  before: HostTree;
  /** A private, empty directory on the host (next to the root, so staged files can be renamed into place). */
  stagingDir: string;
  limits: ReturnedTreeLimits;
  /** What messages call the tree: "the workspace /path". */
  what: string;
}

const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_RDONLY } = fs.constants;
const COMPARE_BYTES = 1024 * 1024;
/** NAME_MAX: the longest name of one path component on Linux filesystems. */
const NAME_MAX_BYTES = 255;

/**
 * Names and link targets a returned tree may hold beyond those sent in, in UTF-8 bytes: what the
 * host keeps of each entry until the apply, so what bounds its memory besides the entry cap (a run
 * of 200,000 new entries with 4 KiB paths and 4 KiB targets took the controller to 1.8 GB). 64 MiB
 * is 200,000 new entries (the default limits.maxEntries) of 335 bytes each, paths of a deep
 * node_modules average under 50 bytes (this repository's do); V8 holds them in at most twice as
 * many bytes (two a character once one is outside Latin-1).
 */
export const NEW_METADATA_BYTES = 64 * 1024 * 1024;

/** `staged` value of a new empty file: created in place by the apply step, never staged. */
export const EMPTY_FILE = "";

class HostileArchive extends Error {}

// One loop on purpose: the reader's state (the caps, the directory stack, the metadata budget) lives
// across entries, and each refusal sits beside the field it checks.
export async function readReturnedTar(archive: Readable, options: ReadReturnedOptions): Promise<ReturnedTree> {
  const { limits } = options;
  const tree: ReturnedTree = {
    after: [],
    staged: new Map(),
    refused: [],
    refusedKinds: new Map(),
    strippedModes: [],
    writeBitsCleared: [],
    bytes: 0,
    contentOf: (rel, maxBytes) => contentOf(tree, options.before.root, rel, maxBytes),
    contentFile: (rel) => {
      const staged = tree.staged.get(rel);
      return staged === EMPTY_FILE ? undefined : (staged ?? path.join(options.before.root, rel));
    },
    leaveOut: (paths) => {
      const dropped = (p: string) => paths.some((x) => p === x || p.startsWith(`${x}/`));
      let kept = 0;
      for (const entry of tree.after) if (!dropped(entry.path)) tree.after[kept++] = entry;
      tree.after.length = kept;
      for (const rel of [...tree.staged.keys()]) if (dropped(rel)) tree.staged.delete(rel);
    },
  };
  // A FIFO or device is left out but still seen: a directory of its name after it was a second
  // entry the rules paired twice, and judged its contents outside any git directory (review,
  // session 45: a planted repository's config reached the host).
  const seen = new Map<string, TreeEntryKind | "refused">();
  const beforeByPath = new Map(options.before.entries.map((e) => [e.path, e]));
  const newMetadataBytes = limits.maxNewMetadataBytes ?? NEW_METADATA_BYTES;
  const metadataBudget = metadataBytesOf(options.before) + newMetadataBytes;
  let metadataBytes = 0;
  let overLimit: SandboxRunError | undefined;
  let staged = 0;

  // The byte cap, as the archive is pulled: it is never buffered whole.
  async function* capped(): AsyncGenerator<Buffer> {
    for await (const chunk of archive as AsyncIterable<Buffer>) {
      tree.bytes += chunk.length;
      if (tree.bytes > limits.maxBytes) {
        overLimit = limitError(
          options,
          `more than ${mib(limits.maxBytes)} MiB (a sparse or runaway file, or far more than was copied in)`,
        );
        throw overLimit;
      }
      yield chunk;
    }
  }

  try {
    let entries = 0;
    for await (const { header, content } of readTarEntries(capped())) {
      if (++entries > limits.maxEntries) {
        const sent = options.before.entries.length;
        overLimit = limitError(
          options,
          `more than ${limits.maxEntries} entries (${sent} copied in and ${limits.maxEntries - sent} more, limits.maxEntries)`,
          "entries",
        );
        throw overLimit;
      }
      // What the host keeps of every entry until the apply: its path and (a symlink's) target.
      metadataBytes +=
        Buffer.byteLength(header.name) + (header.type === "symlink" ? Buffer.byteLength(header.linkname) : 0);
      if (metadataBytes > metadataBudget) {
        overLimit = limitError(
          options,
          `more than ${mib(metadataBudget)} MiB of names and link targets (those copied in and ${mib(newMetadataBytes)} MiB more)`,
          "entries",
          "Keep generated trees of very long paths out of the workspace if the task really makes them; otherwise treat this run's output as hostile.",
        );
        throw overLimit;
      }
      const rel = entryPath(header.name, options);
      if (rel === undefined) {
        tree.refused.push({
          path: header.name.replace(/^\.\//, "").slice(0, 200),
          reason: "its name is not valid UTF-8",
        });
        continue;
      }
      if (seen.has(rel)) throw new HostileArchive(`"${rel}" appears twice`);
      if (rel === "" ? entries !== 1 : !seen.has("")) throw new HostileArchive("it does not start with its root");
      const parent = rel === "" ? undefined : parentOf(rel);
      if (parent !== undefined && seen.get(parent) !== "directory") {
        throw new HostileArchive(
          seen.get(parent) === "symlink"
            ? `"${rel}" is written through the symbolic link "${parent}"`
            : `"${rel}" comes before its directory`,
        );
      }
      const kind = kindOf(header.type);
      if (kind === "refused") {
        tree.refused.push({ path: rel, reason: `it is a ${header.type}` });
        tree.refusedKinds.set(rel, header.type === "fifo" ? "fifo" : "device");
        seen.set(rel, "refused");
        continue;
      }
      if (kind === undefined) throw new HostileArchive(`"${rel}" is a ${header.type ?? "entry of no known type"}`);
      if (rel === "" && kind !== "directory") throw new HostileArchive("its root is not a directory");
      seen.set(rel, kind);

      const before = beforeByPath.get(rel);
      const returnedMode = header.mode & 0o7777;
      let mode = returnedMode & (kind === "directory" ? 0o1777 : 0o777);
      if (header.mode & 0o6000 && tree.strippedModes.length < 100) tree.strippedModes.push(rel);
      const addedWriteBits = kind === "file" ? mode & 0o022 & ~(before?.kind === "file" ? before.mode : 0) : 0;
      if (addedWriteBits) {
        mode &= ~addedWriteBits;
        if (tree.writeBitsCleared.length < 100) tree.writeBitsCleared.push(rel);
      }
      const after: TreeEntry = { path: rel, kind, mode, size: 0, mtimeMs: header.mtimeMs };
      if (kind !== "symlink" && mode !== returnedMode) after.modeAsReturned = returnedMode;
      if (kind === "symlink") {
        const target = header.linkname;
        if (target === "" || target.includes("\0") || Buffer.byteLength(target) > limits.maxLinkTargetBytes) {
          throw new HostileArchive(`the symbolic link "${rel}" has an invalid target`);
        }
        after.target = target;
        after.hash = target;
        if (before?.kind !== "symlink" || before.target !== target) {
          const file = path.join(options.stagingDir, String(++staged));
          hostWrite(() => fs.symlinkSync(target, file));
          tree.staged.set(rel, file);
        }
      } else if (kind === "file" && header.pax[UNCHANGED_PAX_KEY] !== undefined) {
        // The relay says its status has not changed since the copy-in: believing that can only
        // keep the host's own copy, so the claim needs no proof, only a file to refer to.
        if (before?.kind !== "file" || header.size) {
          throw new HostileArchive(`"${rel}" is claimed unchanged but was never sent as a file`);
        }
        Object.assign(after, { mode: before.mode, size: before.size, hash: before.hash, mtimeMs: before.mtimeMs });
      } else if (kind === "file") {
        const result = await stageContent(content, {
          size: header.size,
          stagePath: path.join(options.stagingDir, String(++staged)),
          compareWith:
            before?.kind === "file" && before.size === header.size ? path.join(options.before.root, rel) : undefined,
          compareIno: options.before.facts.get(rel)?.ino,
        });
        after.size = header.size;
        after.hash = result.hash;
        if (result.staged !== undefined) tree.staged.set(rel, result.staged);
      }
      // Content left unread (a directory's, a symlink's) is skipped by the reader.
      tree.after.push(after);
    }
  } catch (error) {
    archive.destroy();
    if (overLimit) throw overLimit;
    if (error instanceof SandboxRunError) throw error;
    if (error instanceof StagingWriteFailed) throw stagingFailed(error.failure, options.stagingDir, options.what);
    throw new SandboxRunError(
      "policy-violation",
      `The sandbox returned ${options.what} as an archive that cannot be applied: ${
        error instanceof HostileArchive || error instanceof TarRefusal
          ? error.message
          : `it is not a complete tar archive (${(error as Error).message})`
      }. Nothing was applied.`,
      {
        hint: "Honest tar never produces this: code in the sandbox tampered with the copy-out. Treat this run's output as hostile.",
      },
    );
  }
  if (!seen.has("")) {
    throw new SandboxRunError(
      "policy-violation",
      `The sandbox returned ${options.what} without its root. Nothing was applied.`,
      {
        hint: "Code in the sandbox tampered with the copy-out; treat this run's output as hostile.",
      },
    );
  }
  tree.after.sort((a, b) => comparePaths(a.path, b.path));
  return tree;
}

/**
 * A returned file's content: its staged copy, or the host file when the content came back
 * unchanged (copy mode never lets the sandbox write the host tree). Read without following a
 * symlink, at most maxBytes.
 */
function contentOf(tree: ReturnedTree, root: string, rel: string, maxBytes: number): Buffer | undefined {
  const staged = tree.staged.get(rel);
  if (staged === EMPTY_FILE) return Buffer.alloc(0);
  const file = staged ?? path.join(root, rel);
  let fd: number;
  try {
    fd = fs.openSync(file, O_RDONLY | O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile() || stat.size > maxBytes) return undefined;
    return readAll(fd, stat.size);
  } catch {
    return undefined;
  } finally {
    fs.closeSync(fd);
  }
}

/** The entry's path relative to the root ("" for the root), undefined for a name that is not UTF-8; hostile names throw. */
function entryPath(name: string, options: ReadReturnedOptions): string | undefined {
  const { limits } = options;
  if (name.includes("\0")) throw new HostileArchive("a name contains a NUL byte");
  if (Buffer.byteLength(name) > limits.maxPathBytes) throw pathCap(options, `longer than ${limits.maxPathBytes} bytes`);
  if (name.startsWith("/")) throw new HostileArchive(`"${name.slice(0, 200)}" is an absolute path`);
  let rel = name.startsWith("./") ? name.slice(2) : name === "." ? "" : name;
  if (rel.endsWith("/")) rel = rel.slice(0, -1);
  if (rel === "") return "";
  const parts = rel.split("/");
  if (parts.length > limits.maxDepth) throw pathCap(options, `deeper than ${limits.maxDepth} levels`);
  for (const part of parts) {
    // No Linux filesystem holds a longer name, so an honest relay never sends one.
    if (Buffer.byteLength(part) > NAME_MAX_BYTES) {
      throw new HostileArchive(`"${rel.slice(0, 200)}" has a name longer than ${NAME_MAX_BYTES} bytes`);
    }
    if (part === "..") throw new HostileArchive(`"${rel.slice(0, 200)}" climbs out with ".."`);
    if (part === "" || part === ".") throw new HostileArchive(`"${rel.slice(0, 200)}" has an empty or "." component`);
  }
  // Not U+FFFD: a real name may hold it (it was left out, and the apply took the file for deleted).
  return hasUndecodedBytes(rel) ? undefined : rel;
}

function kindOf(type: string | null | undefined): TreeEntryKind | "refused" | undefined {
  switch (type) {
    case "file":
    case "contiguous-file":
      return "file";
    case "directory":
      return "directory";
    case "symlink":
      return "symlink";
    case "fifo":
    case "character-device":
    case "block-device":
      return "refused";
    default:
      return undefined; // "link" (a hard link: we asked tar for none) and anything else
  }
}

/**
 * Streams one file's content: hashed, compared with the host file while they agree, and written to
 * the staging file from the first difference on (with the agreeing prefix copied from the host).
 * A new empty file is not staged at all (EMPTY_FILE): creating files is the slow part here.
 */
async function stageContent(
  entry: AsyncIterable<Buffer>,
  options: { size: number; stagePath: string; compareWith?: string; compareIno?: number },
): Promise<{ hash: string; staged?: string }> {
  const hash = crypto.createHash("sha256");
  const hostFd = openForCompare(options.compareWith, options.compareIno);
  let stageFd: number | undefined;
  let offset = 0;
  let scratch: Buffer | undefined;
  const startStaging = () => {
    stageFd = hostWrite(() => fs.openSync(options.stagePath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600));
    // The prefix read so far equals the host file's: copy it from there.
    for (let at = 0; at < offset; ) {
      const n = fs.readSync(hostFd!, scratch!, 0, Math.min(scratch!.length, offset - at), at);
      if (n === 0) throw new Error("the host file shrank while the returned copy was compared");
      hostWrite(() => writeSparse(stageFd!, scratch!.subarray(0, n), at));
      at += n;
    }
  };
  try {
    for await (const chunk of entry) {
      hash.update(chunk);
      if (stageFd === undefined) {
        if (hostFd === undefined) startStaging();
        else if (!sameAsHost(hostFd, chunk, offset, (scratch ??= Buffer.allocUnsafe(COMPARE_BYTES)))) startStaging();
      }
      if (stageFd !== undefined) hostWrite(() => writeSparse(stageFd!, chunk, offset));
      offset += chunk.length;
    }
    if (stageFd !== undefined) hostWrite(() => fs.ftruncateSync(stageFd!, offset));
    const staged = stageFd !== undefined ? options.stagePath : hostFd === undefined ? EMPTY_FILE : undefined;
    return { hash: hash.digest("hex"), staged };
  } finally {
    if (stageFd !== undefined) fs.closeSync(stageFd);
    if (hostFd !== undefined) fs.closeSync(hostFd);
  }
}

/**
 * A write of the host's own into the staging folder that failed (a full disk, a quota, too many
 * open files): the host's trouble, not the sandbox's tampering (review, session 32: a full disk was
 * reported as a hostile archive).
 */
class StagingWriteFailed extends Error {
  constructor(readonly failure: NodeJS.ErrnoException) {
    super(failure.message);
  }
}

/** What only the host's own state causes; anything else (a name or link target too long) is the archive's doing. */
const HOST_TROUBLE = new Set(["ENOSPC", "EDQUOT", "EMFILE", "ENFILE", "EROFS", "EIO"]);

function hostWrite<T>(write: () => T): T {
  try {
    return write();
  } catch (error) {
    if (!HOST_TROUBLE.has((error as NodeJS.ErrnoException)?.code ?? "")) throw error;
    throw new StagingWriteFailed(error as NodeJS.ErrnoException);
  }
}

function stagingFailed(failure: NodeJS.ErrnoException, stagingDir: string, what: string): SandboxRunError {
  const where = path.dirname(stagingDir);
  const code = failure.code ?? "an error";
  const hint =
    code === "ENOSPC" || code === "EDQUOT"
      ? `Free space (or raise the quota) on the filesystem holding ${where}, then run the task again.`
      : code === "EMFILE" || code === "ENFILE"
        ? "Raise the limit of open files (`ulimit -n`), then run the task again."
        : `Check that ${where} is writable and has room, then run the task again.`;
  return new SandboxRunError(
    "not-applied",
    `The host could not stage ${what} the sandbox returned: ${code} writing in ${where}. Nothing was applied; this run's changes are not kept.`,
    { hint, cause: failure },
  );
}

function openForCompare(file: string | undefined, ino: number | undefined): number | undefined {
  if (!file) return undefined;
  try {
    const fd = fs.openSync(file, O_RDONLY | O_NOFOLLOW);
    const stat = fs.fstatSync(fd);
    if (stat.isFile() && stat.ino === ino) return fd;
    fs.closeSync(fd);
  } catch {
    // gone or swapped: stage the returned content
  }
  return undefined;
}

function sameAsHost(hostFd: number, chunk: Buffer, offset: number, scratch: Buffer): boolean {
  for (let at = 0; at < chunk.length; ) {
    const want = Math.min(scratch.length, chunk.length - at);
    const n = fs.readSync(hostFd, scratch, 0, want, offset + at);
    if (n !== want || !scratch.subarray(0, n).equals(chunk.subarray(at, at + n))) return false;
    at += n;
  }
  return true;
}

const ZEROS = Buffer.alloc(64 * 1024);

/** Writes `chunk` at `offset`, leaving parts (up to 64 KiB) that are all zeros as holes. */
function writeSparse(fd: number, chunk: Buffer, offset: number): void {
  for (let at = 0; at < chunk.length; at += ZEROS.length) {
    const part = chunk.subarray(at, Math.min(chunk.length, at + ZEROS.length));
    if (part.equals(ZEROS.subarray(0, part.length))) continue;
    fs.writeSync(fd, part, 0, part.length, offset + at);
  }
}

/**
 * A path past copy mode's caps: honest tools make such trees (a recursion gone wrong, a generated
 * fixture), so it is a limit, not a sign of tampering (review, session 29: the message said the
 * sandbox had tampered with the copy-out).
 */
function pathCap(options: ReadReturnedOptions, what: string): SandboxRunError {
  return limitError(
    options,
    `a path ${what} (copy mode's cap)`,
    "entries",
    "Bind mode (--workspace bind) takes such trees; if the task should not make them, treat this run's output as hostile.",
  );
}

function limitError(
  options: ReadReturnedOptions,
  what: string,
  limit: "disk" | "entries" = "disk",
  hint = `Raise limits.${limit === "disk" ? "diskMb" : "maxEntries"} in a policy file if the task really writes that much; otherwise treat this run's output as hostile.`,
): SandboxRunError {
  return new SandboxRunError("limit", `The sandbox returned ${options.what} with ${what}. Nothing was applied.`, {
    limit,
    hint,
  });
}

/** The path and link-target bytes of the tree sent in: a returned tree may hold those and NEW_METADATA_BYTES more. */
function metadataBytesOf(tree: HostTree): number {
  let bytes = 0;
  for (const entry of tree.entries) bytes += Buffer.byteLength(entry.path) + Buffer.byteLength(entry.target ?? "");
  return bytes;
}
