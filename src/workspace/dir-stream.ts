// A directory the fd walk reads as a stream (order "any": more names than it may hold), which can be
// paused to give back its fds and resumed where it was. Each stream keeps two fds open, so a walk
// keeps only so many; a chain of such folders deeper than that used to be left unwalked below
// (review, session 38: a root caller's files stayed the sandbox uid's, unreported).
//
// Resumed by reading the names again and skipping those already read: getdents lists an unchanged
// directory in the same order. Changed meanwhile (its mtime or ctime moved, or the last name read
// is not where it was), it cannot be resumed, and says so; a walk that removes what it reads resumes
// from the first name instead (what it read is gone).
import fs from "node:fs";
import { decodeName } from "../util/name-bytes.js";

/** Directory entries read per getdents call. */
const DIR_BUFFER = 256;

export class DirStream {
  private dir: fs.Dir | undefined;
  private read = 0;
  private last: Buffer | undefined;
  private pausedAt: { mtimeNs: bigint; ctimeNs: bigint } | undefined;

  /** Opens the stream of the directory `fd` holds (throws as opendir does). */
  constructor(fd: number) {
    this.dir = open(fd);
  }

  get paused(): boolean {
    return this.dir === undefined;
  }

  /** The next name, and its raw bytes when they are not UTF-8; undefined at the end. */
  next(): { name: string; raw?: Buffer } | undefined {
    const entry = this.dir!.readSync();
    if (entry === null) return undefined;
    const raw = entry.name as unknown as Buffer;
    this.read++;
    this.last = raw;
    const { name, exact } = decodeName(raw);
    return exact ? { name } : { name, raw };
  }

  /** Closes the stream, remembering where it was; `fd` (the directory's) may be closed after. */
  pause(fd: number): void {
    const stat = fs.fstatSync(fd, { bigint: true });
    this.pausedAt = { mtimeNs: stat.mtimeNs, ctimeNs: stat.ctimeNs };
    this.dir!.closeSync();
    this.dir = undefined;
  }

  /**
   * Opens the stream again through `fd` (the same directory, reopened) at the name after the last
   * one read, or at the first name with `fromStart`. Returns why it could not, or undefined.
   */
  resume(fd: number, fromStart: boolean): string | undefined {
    let dir: fs.Dir;
    try {
      dir = open(fd);
    } catch (error) {
      return `cannot read the rest of the directory: ${(error as NodeJS.ErrnoException).code ?? String(error)}`;
    }
    if (fromStart) this.read = 0;
    else if (!this.skipRead(fd, dir)) {
      dir.closeSync();
      return "it changed while the walk was paused in it: the rest of it was not walked";
    }
    this.dir = dir;
    this.pausedAt = undefined;
    return undefined;
  }

  close(): void {
    this.dir?.closeSync();
    this.dir = undefined;
  }

  /** Reads past the names read before the pause; false if the directory is not as it was. */
  private skipRead(fd: number, dir: fs.Dir): boolean {
    const stat = fs.fstatSync(fd, { bigint: true });
    if (stat.mtimeNs !== this.pausedAt!.mtimeNs || stat.ctimeNs !== this.pausedAt!.ctimeNs) return false;
    let last: Buffer | undefined;
    for (let i = 0; i < this.read; i++) {
      const entry = dir.readSync();
      if (entry === null) return false;
      last = entry.name as unknown as Buffer;
    }
    return this.read === 0 || (last !== undefined && this.last !== undefined && last.equals(this.last));
  }
}

function open(fd: number): fs.Dir {
  return fs.opendirSync(`/proc/self/fd/${fd}`, { bufferSize: DIR_BUFFER, encoding: "buffer" as BufferEncoding });
}
