// Reads a run record for `sandbox-run show`. A record is input from elsewhere (a CI artifact, a
// folder a colleague sent): every byte may be hostile. Unlike replay, which refuses a record that
// does not check out, a viewer must still show a damaged or tampered one, with what is wrong named:
// so the checksum check here reports instead of throwing. Each file is opened once relative to the
// folder's descriptor, without following a link and without blocking on a FIFO, hashed and parsed
// from the same bytes, and kept only up to a cap. The two files that grow with the run (events,
// exchanges) are handed over line by line while they are hashed, so a record of gigabytes costs
// one line at a time.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { usageError } from "../errors.js";
import { RECORD_FILES, RECORD_PAGE } from "../record/record-format.js";

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
const CHUNK = 1024 * 1024;
/** The largest whole file kept in memory (policy, plan, result, patch, ...); larger ones are cut. */
const MAX_KEPT_FILE_BYTES = 16 * 1024 * 1024;
/** The longest line of events.jsonl or exchanges.jsonl that is parsed; longer ones are skipped. */
export const MAX_LINE_BYTES = 96 * 1024 * 1024;
const MAX_SUMS_BYTES = 1024 * 1024;
const MAX_PROBLEMS = 50;

interface Integrity {
  /** ok: every file listed with the right hash and nothing else; mismatch: something is not; unchecked: no SHA256SUMS. */
  state: "ok" | "mismatch" | "unchecked";
  /** Files whose hash matched. */
  matched: number;
  problems: string[];
}

/** A kept file: its bytes up to the cap, and how many were left out. */
export interface KeptFile {
  text: string;
  omittedBytes: number;
}

interface LineHandler {
  /** One line (without its newline); `tooLong` when it was over MAX_LINE_BYTES and is not given. */
  line(text: string, lineNumber: number): void;
  tooLong(lineNumber: number, bytes: number): void;
}

export class RecordReader {
  readonly dir: string;
  private readonly dirFd: number;
  private readonly entries: Map<string, fs.Dirent>;
  private readonly sums: Map<string, string> | undefined;
  private readonly problems: string[] = [];
  private matched = 0;
  private readonly seen = new Set<string>();

  private constructor(dir: string, dirFd: number) {
    this.dir = dir;
    this.dirFd = dirFd;
    this.entries = new Map(fs.readdirSync(this.at("."), { withFileTypes: true }).map((e) => [e.name, e]));
    this.sums = this.readSums();
  }

  /** Opens the folder (a link the caller names is followed: it is theirs). A usage error when it is not one. */
  static open(dir: string): RecordReader {
    const absolute = path.resolve(dir);
    let fd: number;
    try {
      fd = fs.openSync(absolute, O_RDONLY | O_DIRECTORY);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      throw usageError(
        code === "ENOTDIR"
          ? `${absolute} is a file, not a run record folder.`
          : `Cannot read the run record ${absolute}: ${code ?? (error as Error).message}.`,
        "Pass the folder a run wrote with --record.",
      );
    }
    const reader = new RecordReader(absolute, fd);
    if (![RECORD_FILES.meta, RECORD_FILES.events, RECORD_FILES.sums].some((name) => reader.entries.has(name))) {
      reader.close();
      throw usageError(
        `${absolute} does not look like a run record (no ${RECORD_FILES.meta}, ${RECORD_FILES.events} or ${RECORD_FILES.sums}).`,
        "Pass the folder a run wrote with --record.",
      );
    }
    return reader;
  }

  has(name: string): boolean {
    return this.entries.has(name);
  }

  /** A whole file, up to MAX_KEPT_FILE_BYTES (or `cap`), hashed in full. Undefined when absent or unreadable. */
  file(name: string, cap = MAX_KEPT_FILE_BYTES): KeptFile | undefined {
    const parts: Buffer[] = [];
    let kept = 0;
    let omittedBytes = 0;
    const ok = this.read(name, (chunk) => {
      const room = Math.max(0, cap - kept);
      if (room > 0) {
        const part = chunk.subarray(0, room);
        parts.push(Buffer.from(part));
        kept += part.length;
      }
      omittedBytes += chunk.length - Math.min(room, chunk.length);
    });
    if (!ok) return undefined;
    // A character the cap split in two shows as U+FFFD.
    return { text: Buffer.concat(parts).toString("utf8"), omittedBytes };
  }

  /** A JSONL file line by line (LF only; one CR stripped). False when absent or unreadable. */
  lines(name: string, handler: LineHandler): boolean {
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    let skipping = false;
    let lineNumber = 0;
    const finish = () => {
      lineNumber++;
      if (skipping) handler.tooLong(lineNumber, pendingBytes);
      else {
        let text = Buffer.concat(pending).toString("utf8");
        if (text.endsWith("\r")) text = text.slice(0, -1);
        handler.line(text, lineNumber);
      }
      pending = [];
      pendingBytes = 0;
      skipping = false;
    };
    const ok = this.read(name, (chunk) => {
      let start = 0;
      for (;;) {
        const newline = chunk.indexOf(0x0a, start);
        const end = newline === -1 ? chunk.length : newline;
        const piece = chunk.subarray(start, end);
        pendingBytes += piece.length;
        if (pendingBytes > MAX_LINE_BYTES) {
          skipping = true;
          pending = [];
        } else if (!skipping && piece.length > 0) pending.push(Buffer.from(piece));
        if (newline === -1) return;
        finish();
        start = newline + 1;
      }
    });
    if (ok && (pendingBytes > 0 || skipping)) finish();
    return ok;
  }

  /**
   * The checksum verdict, once every file was read: files never read (kinds a record does not
   * have) are hashed here, so the verdict covers the whole folder.
   */
  integrity(): Integrity {
    if (!this.sums) return { state: "unchecked", matched: 0, problems: [...this.problems] };
    for (const name of [...this.entries.keys()].sort()) {
      if (!this.seen.has(name) && name !== RECORD_FILES.sums && !this.isPage(name)) this.read(name, () => {});
    }
    for (const name of this.sums.keys()) {
      if (!this.entries.has(name)) this.problem(`${name} is listed in ${RECORD_FILES.sums} but missing`);
    }
    const problems = [...this.problems];
    return { state: problems.length === 0 ? "ok" : "mismatch", matched: this.matched, problems };
  }

  close(): void {
    fs.closeSync(this.dirFd);
  }

  /** The page show itself leaves in the folder: made from the record, not part of it (unless listed). */
  private isPage(name: string): boolean {
    return name === RECORD_PAGE && !this.sums?.has(RECORD_PAGE);
  }

  private at(name: string): string {
    return `/proc/self/fd/${this.dirFd}/${name}`;
  }

  private problem(text: string): void {
    if (this.problems.length < MAX_PROBLEMS) this.problems.push(text);
    else if (this.problems.length === MAX_PROBLEMS) this.problems.push("... and more");
  }

  private readSums(): Map<string, string> | undefined {
    if (!this.entries.has(RECORD_FILES.sums)) {
      this.problems.push(`the record has no ${RECORD_FILES.sums}: nothing in it can be checked`);
      return undefined;
    }
    const parts: Buffer[] = [];
    let size = 0;
    const ok = this.readRaw(RECORD_FILES.sums, (chunk) => {
      size += chunk.length;
      if (size <= MAX_SUMS_BYTES) parts.push(Buffer.from(chunk));
    });
    if (!ok || size > MAX_SUMS_BYTES) {
      this.problems.push(`${RECORD_FILES.sums} cannot be read${ok ? " (too large)" : ""}`);
      return new Map();
    }
    const sums = new Map<string, string>();
    for (const line of Buffer.concat(parts).toString("utf8").split("\n")) {
      if (line === "") continue;
      const match = /^([0-9a-f]{64}) [ *]([^/\\\0]+)$/.exec(line);
      if (!match || match[2] === "." || match[2] === ".." || sums.has(match[2]!)) {
        this.problem(`${RECORD_FILES.sums} has a malformed line: ${JSON.stringify(line.slice(0, 120))}`);
        continue;
      }
      sums.set(match[2]!, match[1]!);
    }
    return sums;
  }

  /** Reads `name` once, hashing it against SHA256SUMS; every problem is noted. False when it could not be read. */
  private read(name: string, onChunk: (chunk: Buffer) => void): boolean {
    if (!this.entries.has(name)) return false;
    if (this.seen.has(name)) throw new Error(`${name} read twice`);
    this.seen.add(name);
    const hash = crypto.createHash("sha256");
    const ok = this.readRaw(name, (chunk) => {
      hash.update(chunk);
      onChunk(chunk);
    });
    if (!this.sums) return ok;
    const expected = this.sums.get(name);
    if (expected === undefined) this.problem(`${name} is not listed in ${RECORD_FILES.sums}`);
    else if (ok && hash.digest("hex") !== expected)
      this.problem(`${name} does not match its sha256 in ${RECORD_FILES.sums}`);
    else if (ok) this.matched++;
    return ok;
  }

  private readRaw(name: string, onChunk: (chunk: Buffer) => void): boolean {
    let fd: number;
    try {
      // O_NONBLOCK: a FIFO planted in the folder must not hang the open.
      fd = fs.openSync(this.at(name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      this.problem(code === "ELOOP" ? `${name} is a symbolic link (not followed)` : `${name} cannot be read (${code})`);
      return false;
    }
    try {
      if (!fs.fstatSync(fd).isFile()) {
        this.problem(`${name} is not a regular file (not read)`);
        return false;
      }
      const buffer = Buffer.alloc(CHUNK);
      for (;;) {
        const n = fs.readSync(fd, buffer, 0, buffer.length, null);
        if (n === 0) return true;
        onChunk(buffer.subarray(0, n));
      }
    } catch (error) {
      this.problem(`${name} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
      return false;
    } finally {
      fs.closeSync(fd);
    }
  }
}
