// Before a run: a copy of what a violation could poison, so that after the run it can be put
// back exactly. Kept, for every writable tree:
// - every git directory's metadata: all of it except the object store (objects/** but the
//   alternates files, lfs/**), which is large, written once by content, and never executed;
// - every entry named .git that is not a directory (gitdir: pointers);
// - everything in a built-in protected scope (.envrc, .vscode/, ...) that is not turned off;
// - in the workspace, every file the caller's protectedPaths match.
// Contents go to files in the run's private folder, with an index (JSON lines) of path, kind,
// mode, owner, times, hash and link target. Caps: KEEP_FILE_MAX_BYTES per file and
// KEEP_TOTAL_MAX_BYTES in all. Past a cap a file is indexed (size, times; its hash up to
// HASH_ONLY_*: a same-bytes rewrite is no change) but not copied;
// if a run then changes or deletes it, the restore cannot bring it back: a git file that
// ordinary git work writes (refs, logs) stays as the sandbox left it, anything else (an index too)
// is removed (a trap must not stay), and the error names it. packed-refs, which host git reads
// as pointers and which grows with the number of tags, is copied up to the total cap; an index and
// the reflogs, which the ref checks compare with what the run left, up to KEEP_POINTER_MAX_BYTES.
// The walk also notes what the run's rules need beyond names: every git directory, every
// `.git` file and `commondir` (pointers to more git directories), and each object store's
// inode (to find it if the run moves it). What the repositories' config names is known only
// after the walk (git-config-paths.ts): keepPaths keeps it in a second, targeted pass.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { StringDecoder } from "node:string_decoder";
import { builtinProtectionOf, gitObjectStorePath, gitPathAllowed } from "./builtin-protections.js";
import { atPath, kindOf, openRoot, type WalkEntry, walkTree } from "./fd-walk.js";
import { pointerFormatOf } from "./git-plain-data.js";
import { compileGlobs, type PathMatcher } from "./path-glob.js";
import { openDirBelow } from "./remove-tree.js";
import { isGitDirectory, isInside, lastName, type RuleConfig } from "./workspace-rules.js";
import { hashFileAt, readFileAt } from "./workspace-snapshot.js";

const KEEP_FILE_MAX_BYTES = 1024 * 1024;
const KEEP_TOTAL_MAX_BYTES = 64 * 1024 * 1024;
/**
 * A file past the copy's caps is still hashed (streamed), up to these: a byte-identical rewrite
 * of a large guarded file (a reproducible build writing a 30 MB tool again into the `bin/` an
 * .envrc puts on PATH) is then no change, where its new inode alone failed the run and removed it.
 */
const HASH_ONLY_FILE_MAX_BYTES = 256 * 1024 * 1024;
const HASH_ONLY_TOTAL_MAX_BYTES = 512 * 1024 * 1024;
/** An index or a reflog: the ref checks compare it with what the run left (git-ref-check.ts). */
const KEEP_POINTER_MAX_BYTES = 8 * 1024 * 1024;

/** How much of a git directory's file (relative to it) is kept: pointer files more than the rest. */
function keepLimitOf(relative: string): number {
  if (relative === "packed-refs") return KEEP_TOTAL_MAX_BYTES;
  if (relative === "index" || /^sharedindex\.[0-9a-f]+$/.test(relative) || relative.startsWith("logs/"))
    return KEEP_POINTER_MAX_BYTES;
  return KEEP_FILE_MAX_BYTES;
}
/** Git directories and pointer files noted per tree (more are not followed). */
const MAX_NOTED = 10_000;

export interface Owner {
  uid: number;
  gid: number;
}

export interface KeptEntry {
  path: string;
  kind: WalkEntry["kind"];
  /** st_mode */
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtimeMs: number;
  atimeMs: number;
  ctimeMs: number;
  dev: number;
  ino: number;
  /** Files: sha256 of the content (when read). Symlinks: the target. */
  hash?: string;
  /** Files: the number of the copy in the store; absent when not copied. */
  blob?: number;
  /** Why a file's content was not copied. */
  notCopied?: string;
  /** A git directory's object store (objects/, lfs/): kept as a directory, contents left alone. */
  objectStore?: boolean;
  /** Ordinary git work may change it (index, refs, ...): not a trap if it cannot be restored. */
  gitAllowed?: boolean;
}

/** A kept file's content hash, and the facts of the file it was read from (KeptEntry's). */
export interface KeptHash {
  hash: string;
  mode: number;
  size: number;
  mtimeMs: number;
  ctimeMs: number;
  ino: number;
}

interface Frame {
  path: string;
  gitRoot?: string;
}

/** Where an object store was before the run, to find it by inode if the run moves it. */
interface ObjectStoreIdentity {
  path: string;
  dev: number;
  ino: number;
}

interface ProtectedCopyOptions extends RuleConfig {
  /** The folder to keep the copy in (created, 0700). */
  dir: string;
  /** An entry's owner before the run (the ownership lease knows the owners of lent inodes). */
  ownerOf?: (stat: fs.Stats) => Owner;
}

/** Decides, in walk order, which entries are kept, and keeps them. */
export class ProtectedCopy {
  private readonly stack: Frame[] = [];
  private readonly disabled: ReadonlySet<string>;
  private readonly callerProtected?: PathMatcher;
  /** The index's fd while keeping; -1 in a copy reopened to be read. */
  private readonly index: number;
  private blobs = 0;
  bytes = 0;
  /** Bytes hashed of files too large to copy (HASH_ONLY_TOTAL_MAX_BYTES). */
  private hashedOnly = 0;
  entries = 0;
  /** Files whose content was not copied, with why (at most 100 listed). */
  readonly notCopied: Array<{ path: string; why: string }> = [];
  /** Every git directory met (relative), the root's included. */
  readonly gitDirs: string[] = [];
  /** `.git` entries that are files and `commondir` files of git directories (relative). */
  readonly pointerFiles: string[] = [];
  readonly objectStores: ObjectStoreIdentity[] = [];

  constructor(
    private readonly options: ProtectedCopyOptions,
    reopened = false,
  ) {
    if (reopened) this.index = -1;
    else {
      fs.mkdirSync(options.dir, { mode: 0o700 });
      this.index = fs.openSync(path.join(options.dir, "index.jsonl"), "wx", 0o600);
    }
    this.disabled = new Set(options.disabled ?? []);
    const globs = options.protectedPaths ?? [];
    this.callerProtected = globs.length > 0 ? compileGlobs(globs) : undefined;
  }

  /** Keeps the entry if it is protected; returns the content hash of a kept file. */
  consider(entry: WalkEntry): string | undefined {
    const p = entry.path;
    while (this.stack.length > 0 && !isInside(this.stack[this.stack.length - 1]!.path, p)) this.stack.pop();
    const parent = this.stack[this.stack.length - 1];
    const stat = entry.stat;
    if (!stat) return undefined;
    const lower = lastName(p).toLowerCase();
    const isGit = isGitDirectory(
      lower,
      { kind: entry.kind, mode: stat.mode, size: stat.size, gitLike: entry.gitLike },
      parent?.path,
      parent?.gitRoot,
    );
    if (entry.kind === "directory") this.stack.push({ path: p, gitRoot: isGit ? p : parent?.gitRoot });
    if (isGit) note(this.gitDirs, p);

    const root = parent?.gitRoot;
    const relative = root === undefined ? undefined : root === "" ? p : p.slice(root.length + 1);
    let keep = isGit || (lower === ".git" && entry.kind !== "directory");
    if (lower === ".git" && entry.kind === "file") note(this.pointerFiles, p);
    let objectStore = false;
    if (relative !== undefined) {
      if (gitObjectStorePath(relative)) return undefined;
      keep = true;
      objectStore = entry.kind === "directory" && (relative === "objects" || relative === "lfs");
      if (objectStore) this.objectStores.push({ path: p, dev: stat.dev, ino: stat.ino });
      if (relative === "commondir" && entry.kind === "file") note(this.pointerFiles, p);
    }
    keep ||= builtinProtectionOf(p, this.disabled) !== undefined;
    keep ||= entry.kind !== "directory" && this.callerProtected?.(p) === true;
    if (!keep || p === "") return undefined;
    return this.keep(entry, stat, {
      objectStore,
      gitAllowed: relative !== undefined && gitPathAllowed(relative),
      maxBytes: relative === undefined ? KEEP_FILE_MAX_BYTES : keepLimitOf(relative),
      checkout: relative !== undefined && pointerFormatOf(relative) === "index",
    });
  }

  /**
   * Keeps what the walk could not know to keep when it passed: the paths the repositories'
   * config names, and git directories only a pointer names (their metadata, as for any git
   * directory). Each is reached from the root through directory fds, never through a symlink;
   * a path that does not exist has nothing to keep (creating it will be removed).
   */
  keepPaths(root: string, paths: ReadonlyArray<{ path: string; gitDir?: boolean }>): void {
    if (paths.length === 0) return;
    const rootFd = openRoot(root);
    try {
      for (const target of paths) {
        const parts = target.path === "" ? ["."] : target.path.split("/");
        const parentFd = openDirBelow(rootFd, parts.slice(0, -1).join("/"));
        if (parentFd === undefined) continue;
        try {
          const at = atPath(parentFd, parts[parts.length - 1]!);
          let top: fs.Stats;
          try {
            top = fs.lstatSync(at);
          } catch {
            continue;
          }
          if (!top.isDirectory()) {
            if (!this.alreadyKept(target.path, false))
              this.keep(
                {
                  path: target.path,
                  name: lastName(target.path),
                  depth: parts.length,
                  kind: kindOf(top),
                  stat: top,
                  at,
                },
                top,
                {
                  objectStore: false,
                  gitAllowed: false,
                  maxBytes: KEEP_FILE_MAX_BYTES,
                  checkout: false,
                },
              );
            continue;
          }
          for (const entry of walkTree(at, { maxDepth: Number.POSITIVE_INFINITY })) {
            const p =
              entry.path === "" ? target.path : target.path === "" ? entry.path : `${target.path}/${entry.path}`;
            if (p === "" || !entry.stat || this.alreadyKept(p, entry.kind === "directory")) continue;
            let objectStore = false;
            if (target.gitDir) {
              if (gitObjectStorePath(entry.path)) continue;
              objectStore = entry.kind === "directory" && (entry.path === "objects" || entry.path === "lfs");
              if (objectStore) this.objectStores.push({ path: p, dev: entry.stat.dev, ino: entry.stat.ino });
            }
            this.keep({ ...entry, path: p }, entry.stat, {
              objectStore,
              gitAllowed: target.gitDir === true && gitPathAllowed(entry.path),
              maxBytes: target.gitDir === true ? keepLimitOf(entry.path) : KEEP_FILE_MAX_BYTES,
              checkout: target.gitDir === true && pointerFormatOf(entry.path) === "index",
            });
          }
        } finally {
          fs.closeSync(parentFd);
        }
      }
    } finally {
      fs.closeSync(rootFd);
    }
  }

  /** Whether the first pass kept this path already (a built-in scope, a caller glob, a git directory). */
  private alreadyKept(p: string, isDirectory: boolean): boolean {
    if (builtinProtectionOf(p, this.disabled)) return true;
    if (!isDirectory && this.callerProtected?.(p)) return true;
    if (this.gitDirSet === undefined) this.gitDirSet = new Set(this.gitDirs);
    if (this.gitDirSet.has("")) return true;
    for (let end = p.length; end > 0; end = p.lastIndexOf("/", end - 1))
      if (this.gitDirSet.has(p.slice(0, end))) return true;
    return false;
  }
  private gitDirSet?: Set<string>;

  close(): void {
    if (this.index >= 0) fs.closeSync(this.index);
  }

  /**
   * The copy a watch kept in `dir` (its index and contents), read back to judge the run after its
   * controller died (workspace-watch.ts, resume): it loads and finds contents, and keeps nothing more.
   */
  static reopen(dir: string, gitDirs: readonly string[]): ProtectedCopy {
    const copy = new ProtectedCopy({ dir }, true);
    copy.gitDirs.push(...gitDirs);
    return copy;
  }

  private keep(
    entry: WalkEntry,
    stat: fs.Stats,
    /**
     * `checkout`: an index, which git checks out to the paths it names: one the run changed that
     * was not copied cannot be left as the run left it (it is removed; `git reset` makes it again).
     */
    flags: { objectStore: boolean; gitAllowed: boolean; maxBytes: number; checkout: boolean },
  ): string | undefined {
    const owner = this.options.ownerOf?.(stat) ?? { uid: stat.uid, gid: stat.gid };
    const row: KeptEntry = {
      path: entry.path,
      kind: entry.kind,
      mode: stat.mode,
      uid: owner.uid,
      gid: owner.gid,
      size: stat.size,
      mtimeMs: stat.mtimeMs,
      atimeMs: stat.atimeMs,
      ctimeMs: stat.ctimeMs,
      dev: stat.dev,
      ino: stat.ino,
    };
    if (flags.objectStore) row.objectStore = true;
    if (entry.kind === "symlink") row.hash = fs.readlinkSync(entry.at, "utf8");
    else if (entry.kind === "file") this.copyContent(entry, stat, row, flags.maxBytes);
    if (flags.gitAllowed && !(flags.checkout && row.blob === undefined)) row.gitAllowed = true;
    fs.writeSync(this.index, `${JSON.stringify(row)}\n`);
    this.entries++;
    return row.hash;
  }

  private copyContent(entry: WalkEntry, stat: fs.Stats, row: KeptEntry, fileMax: number): void {
    let why: string | undefined;
    if (stat.size > fileMax) why = `larger than ${fileMax / 1048576} MiB`;
    else if (this.bytes + stat.size > KEEP_TOTAL_MAX_BYTES)
      why = `the kept copy reached ${KEEP_TOTAL_MAX_BYTES / 1048576} MiB`;
    const content = why ? undefined : readFileAt(entry.at, stat, fileMax);
    if (!content) {
      row.notCopied = why ?? "unreadable";
      if (this.notCopied.length < 100) this.notCopied.push({ path: entry.path, why: row.notCopied });
      if (why && stat.size <= HASH_ONLY_FILE_MAX_BYTES && this.hashedOnly + stat.size <= HASH_ONLY_TOTAL_MAX_BYTES) {
        this.hashedOnly += stat.size;
        row.hash = hashFileAt(entry.at, stat, stat.size);
      }
      return;
    }
    row.hash = crypto.createHash("sha256").update(content).digest("hex");
    row.blob = this.blobs++;
    fs.writeFileSync(this.blobPath(row.blob), content, { mode: 0o600, flag: "wx" });
    this.bytes += content.length;
  }

  blobPath(blob: number): string {
    return path.join(this.options.dir, `${blob}`);
  }

  /**
   * The outermost scopes the copy holds (every git directory, every built-in protected scope, every
   * other kept path): what a restore with no judgement behind it puts back as a whole.
   */
  keptScopes(): string[] {
    // A tree that is itself a git directory (a bare repository lent as a writable root) goes back whole.
    if (this.gitDirs.includes("")) return [""];
    const gitDirs = new Set(this.gitDirs);
    const scopes = new Set<string>();
    for (const row of this.load([""]).values()) {
      if (row.path === "") continue;
      let scope = builtinProtectionOf(row.path, this.disabled)?.scope ?? row.path;
      for (let i = row.path.indexOf("/"); i > 0; i = row.path.indexOf("/", i + 1))
        if (gitDirs.has(row.path.slice(0, i))) {
          scope = row.path.slice(0, i);
          break;
        }
      if (gitDirs.has(row.path)) scope = row.path;
      scopes.add(scope);
    }
    // Outermost only: a scope inside another goes back with it.
    const outermost = new Set<string>();
    for (const scope of [...scopes].sort((a, b) => a.length - b.length))
      if (!inScopes(outermost, scope)) outermost.add(scope);
    return [...outermost];
  }

  /** The kept entries at or below the given scopes, by path (read back from the index). */
  load(scopes: readonly string[]): Map<string, KeptEntry> {
    const out = new Map<string, KeptEntry>();
    if (scopes.length === 0) return out;
    const wanted = new Set(scopes);
    this.scan((row) => {
      if (inScopes(wanted, row.path)) out.set(row.path, row);
    });
    return out;
  }

  /**
   * The content hash of every kept file `wanted` picks, by path, with the facts that tie it to the
   * file the walk before the run recorded (a kept copy is read after that walk: the hash holds for
   * the recorded file only if these match). A file kept in the second pass (keepPaths: what the
   * configs name, a host command's name in a PATH folder) has no hash in the snapshot where the
   * snapshot hashes nothing (node_modules): without this, its judgement fell back to inode and
   * ctime, and a byte-identical reinstall, or the restore itself, counted as a change (review,
   * session 31). Only what `wanted` picks is held, one small record a file.
   */
  contentHashes(wanted: (row: KeptEntry) => boolean): Map<string, KeptHash> {
    const out = new Map<string, KeptHash>();
    this.scan((row) => {
      if (row.kind !== "file" || row.hash === undefined || !wanted(row)) return;
      const { hash, mode, size, mtimeMs, ctimeMs, ino } = row;
      out.set(row.path, { hash, mode, size, mtimeMs, ctimeMs, ino });
    });
    return out;
  }

  /** Every row of the index, in the order kept, read in bounded chunks. */
  private scan(visit: (row: KeptEntry) => void): void {
    const fd = fs.openSync(path.join(this.options.dir, "index.jsonl"), "r");
    try {
      const chunk = Buffer.allocUnsafe(1 << 20);
      const decoder = new StringDecoder("utf8");
      let rest = "";
      for (;;) {
        const n = fs.readSync(fd, chunk, 0, chunk.length, null);
        const text = rest + (n === 0 ? decoder.end() : decoder.write(chunk.subarray(0, n)));
        const lines = text.split("\n");
        rest = n === 0 ? "" : lines.pop()!;
        for (const line of lines) if (line !== "") visit(JSON.parse(line) as KeptEntry);
        if (n === 0) break;
      }
    } finally {
      fs.closeSync(fd);
    }
  }
}

function note(list: string[], p: string): void {
  if (list.length < MAX_NOTED) list.push(p);
}

function inScopes(scopes: ReadonlySet<string>, p: string): boolean {
  if (scopes.has(p) || scopes.has("")) return true;
  for (let i = p.indexOf("/"); i >= 0; i = p.indexOf("/", i + 1)) if (scopes.has(p.slice(0, i))) return true;
  return false;
}
