// Before a run: a copy of what a violation could poison, so that after the run it can be put
// back exactly. Kept, for every writable tree:
// - every git directory's metadata: all of it except the object store (objects/** but the
//   alternates files, lfs/**), which is large, written once by content, and never executed;
// - every entry named .git that is not a directory (gitdir: pointers);
// - everything in a built-in protected scope (.envrc, .vscode/, ...) that is not turned off;
// - in the workspace, every file the caller's protectedPaths match.
// Contents go to files in the run's private folder, with an index (JSON lines) of path, kind,
// mode, owner, times, hash and link target. Caps: KEEP_FILE_MAX_BYTES per file and
// KEEP_TOTAL_MAX_BYTES in all. Past a cap a file is indexed (hash, size, times) but not copied;
// if a run then changes or deletes it, the restore cannot bring it back: a git file that
// ordinary git work writes (index, refs, logs) stays as the sandbox left it, anything else
// is removed (a trap must not stay), and the error names it.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { StringDecoder } from "node:string_decoder";
import { builtinProtectionOf, gitObjectStorePath, gitPathAllowed } from "./builtin-protections.js";
import type { WalkEntry } from "./fd-walk.js";
import { compileGlobs, type PathMatcher } from "./path-glob.js";
import { isGitDirectory, isInside, lastName, type RuleConfig } from "./workspace-rules.js";
import { readFileAt } from "./workspace-snapshot.js";

export const KEEP_FILE_MAX_BYTES = 1024 * 1024;
export const KEEP_TOTAL_MAX_BYTES = 64 * 1024 * 1024;

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

interface Frame {
  path: string;
  gitRoot?: string;
}

export interface ProtectedCopyOptions extends RuleConfig {
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
  private readonly index: number;
  private blobs = 0;
  bytes = 0;
  entries = 0;
  /** Files whose content was not copied, with why (at most 100 listed). */
  readonly notCopied: Array<{ path: string; why: string }> = [];

  constructor(private readonly options: ProtectedCopyOptions) {
    fs.mkdirSync(options.dir, { mode: 0o700 });
    this.index = fs.openSync(path.join(options.dir, "index.jsonl"), "wx", 0o600);
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

    const root = parent?.gitRoot;
    const relative = root === undefined ? undefined : root === "" ? p : p.slice(root.length + 1);
    let keep = isGit || (lower === ".git" && entry.kind !== "directory");
    let objectStore = false;
    if (relative !== undefined) {
      if (gitObjectStorePath(relative)) return undefined;
      keep = true;
      objectStore = entry.kind === "directory" && (relative === "objects" || relative === "lfs");
    }
    keep ||= builtinProtectionOf(p, this.disabled) !== undefined;
    keep ||= entry.kind !== "directory" && this.callerProtected?.(p) === true;
    if (!keep || p === "") return undefined;
    return this.keep(entry, stat, { objectStore, gitAllowed: relative !== undefined && gitPathAllowed(relative) });
  }

  close(): void {
    fs.closeSync(this.index);
  }

  private keep(
    entry: WalkEntry,
    stat: fs.Stats,
    flags: { objectStore: boolean; gitAllowed: boolean },
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
    if (flags.gitAllowed) row.gitAllowed = true;
    if (entry.kind === "symlink") row.hash = fs.readlinkSync(entry.at, "utf8");
    else if (entry.kind === "file") this.copyContent(entry, stat, row);
    fs.writeSync(this.index, `${JSON.stringify(row)}\n`);
    this.entries++;
    return row.hash;
  }

  private copyContent(entry: WalkEntry, stat: fs.Stats, row: KeptEntry): void {
    let why: string | undefined;
    if (stat.size > KEEP_FILE_MAX_BYTES) why = `larger than ${KEEP_FILE_MAX_BYTES / 1048576} MiB`;
    else if (this.bytes + stat.size > KEEP_TOTAL_MAX_BYTES)
      why = `the kept copy reached ${KEEP_TOTAL_MAX_BYTES / 1048576} MiB`;
    const content = why ? undefined : readFileAt(entry.at, stat, KEEP_FILE_MAX_BYTES);
    if (!content) {
      row.notCopied = why ?? "unreadable";
      if (this.notCopied.length < 100) this.notCopied.push({ path: entry.path, why: row.notCopied });
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

  /** The kept entries at or below the given scopes, by path (read back from the index). */
  load(scopes: readonly string[]): Map<string, KeptEntry> {
    const out = new Map<string, KeptEntry>();
    if (scopes.length === 0) return out;
    const wanted = new Set(scopes);
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
        for (const line of lines) {
          if (line === "") continue;
          const row = JSON.parse(line) as KeptEntry;
          if (inScopes(wanted, row.path)) out.set(row.path, row);
        }
        if (n === 0) break;
      }
    } finally {
      fs.closeSync(fd);
    }
    return out;
  }
}

function inScopes(scopes: ReadonlySet<string>, p: string): boolean {
  if (scopes.has(p) || scopes.has("")) return true;
  for (let i = p.indexOf("/"); i >= 0; i = p.indexOf("/", i + 1)) if (scopes.has(p.slice(0, i))) return true;
  return false;
}
