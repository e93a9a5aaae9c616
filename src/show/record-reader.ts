// Reads a run record for `sandbox-run show`. A record is input from elsewhere (a CI artifact, a
// folder a colleague sent): every byte may be hostile. Unlike replay, which refuses a record that
// does not check out, a viewer must still show a damaged or tampered one, with what is wrong named:
// so the checksum check here reports instead of throwing. Each file is opened once relative to the
// folder's descriptor, without following a link and without blocking on a FIFO, hashed and parsed
// from the same bytes, and kept only up to a cap. The two files that grow with the run (events,
// exchanges) are handed over line by line while they are hashed, so a record of gigabytes costs
// one line at a time. What is read is bounded too: at most RECORD_MAX_ENTRIES names of the folder,
// and RECORD_MAX_HASHED_BYTES of its files in all (a file cut there is shown up to the cut and
// named as not checked).
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { usageError } from "../errors.js";
import { RECORD_FILES, RECORD_MAX_ENTRIES, RECORD_MAX_HASHED_BYTES, RECORD_PAGE } from "../record/record-format.js";
import { jsonShape } from "../util/json-shape.js";
import { openRegularFile } from "../util/read-fd.js";

const { O_RDONLY, O_DIRECTORY } = fs.constants;
const CHUNK = 1024 * 1024;
/** The largest whole file kept in memory (policy, plan, result, patch, ...); larger ones are cut. */
const MAX_KEPT_FILE_BYTES = 16 * 1024 * 1024;
/** The longest line of events.jsonl or exchanges.jsonl that is parsed; longer ones are skipped. */
export const MAX_LINE_BYTES = 96 * 1024 * 1024;
/** JSON values one line may hold to be parsed (Pi's largest events hold some tens of thousands; depth is the view's to judge). */
const LINE_SHAPE = { maxValues: 2_000_000, maxDepth: Number.MAX_SAFE_INTEGER };
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

/** What a reader reads of one folder at most. */
interface ReadLimits {
  /** Names of the folder looked at. */
  maxEntries: number;
  /** Bytes read (and hashed) of all its files together. */
  maxReadBytes: number;
}

const DEFAULT_LIMITS: ReadLimits = { maxEntries: RECORD_MAX_ENTRIES, maxReadBytes: RECORD_MAX_HASHED_BYTES };

type ReadOutcome = "read" | "cut" | "unreadable";

interface LineHandler {
  /** One line (without its newline); `tooLong` when it was over MAX_LINE_BYTES and is not given. */
  line(text: string, lineNumber: number): void;
  tooLong(lineNumber: number, bytes: number): void;
}

export class RecordReader {
  readonly dir: string;
  private readonly dirFd: number;
  private readonly entries: Set<string>;
  private readonly sums: Map<string, string> | undefined;
  private readonly problems: string[] = [];
  private matched = 0;
  private readonly seen = new Set<string>();
  private bytesRead = 0;

  private constructor(
    dir: string,
    dirFd: number,
    private readonly limits: ReadLimits,
  ) {
    this.dir = dir;
    this.dirFd = dirFd;
    this.entries = this.listEntries();
    this.sums = this.readSums();
  }

  /** Opens the folder (a link the caller names is followed: it is theirs). A usage error when it is not one. */
  static open(dir: string, limits: ReadLimits = DEFAULT_LIMITS): RecordReader {
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
    const reader = new RecordReader(absolute, fd, limits);
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
      const bytes = skipping ? undefined : Buffer.concat(pending);
      // A line of tiny values costs far more to parse than its bytes (93 MB of `{}` took 3.2 GB):
      // one past the value cap is left out like one past the byte cap.
      if (!bytes || jsonShape(bytes, LINE_SHAPE).problem) handler.tooLong(lineNumber, pendingBytes);
      else {
        let text = bytes.toString("utf8");
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
    for (const name of [...this.entries].sort()) {
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

  /**
   * The folder's names, at most maxEntries of them: past that the folder is not a record as a run
   * writes one, and only the names a record has are looked up.
   */
  private listEntries(): Set<string> {
    const names = new Set<string>();
    const dir = fs.opendirSync(this.at("."));
    try {
      for (let entry = dir.readSync(); entry; entry = dir.readSync()) {
        if (names.size === this.limits.maxEntries) {
          this.problem(
            `the folder holds more than ${this.limits.maxEntries} entries (a record has about a dozen): only the files a record has are read`,
          );
          return this.knownEntries();
        }
        names.add(entry.name);
      }
    } finally {
      dir.closeSync();
    }
    return names;
  }

  private knownEntries(): Set<string> {
    const names = new Set<string>();
    for (const name of [...Object.values(RECORD_FILES), RECORD_PAGE]) {
      try {
        fs.lstatSync(this.at(name));
        names.add(name);
      } catch {
        // absent (or unreachable: reading it reports that)
      }
    }
    return names;
  }

  private readSums(): Map<string, string> | undefined {
    if (!this.entries.has(RECORD_FILES.sums)) {
      this.problems.push(`the record has no ${RECORD_FILES.sums}: nothing in it can be checked`);
      return undefined;
    }
    const parts: Buffer[] = [];
    const outcome = this.readRaw(RECORD_FILES.sums, (chunk) => parts.push(Buffer.from(chunk)), MAX_SUMS_BYTES);
    if (outcome !== "read") {
      this.problems.push(`${RECORD_FILES.sums} cannot be read${outcome === "cut" ? " (too large)" : ""}`);
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
    const before = this.bytesRead;
    const outcome = this.readRaw(name, (chunk) => {
      hash.update(chunk);
      onChunk(chunk);
    });
    if (outcome === "cut") {
      const shown = this.bytesRead - before;
      this.problem(
        `${name} ${shown > 0 ? `was cut after ${bytesText(shown)}` : "was not read"}: show reads at most ${bytesText(this.limits.maxReadBytes)} of a record, so it is not checked against ${RECORD_FILES.sums}`,
      );
      return true;
    }
    const ok = outcome === "read";
    if (!this.sums) return ok;
    const expected = this.sums.get(name);
    if (expected === undefined) this.problem(`${name} is not listed in ${RECORD_FILES.sums}`);
    else if (ok && hash.digest("hex") !== expected)
      this.problem(`${name} does not match its sha256 in ${RECORD_FILES.sums}`);
    else if (ok) this.matched++;
    return ok;
  }

  /**
   * Reads `name` from its start, at most `limit` bytes and what is left of the folder's read
   * budget: "cut" when there was more.
   */
  private readRaw(name: string, onChunk: (chunk: Buffer) => void, limit = Number.POSITIVE_INFINITY): ReadOutcome {
    let fd: number;
    try {
      // Its kind is known before it is opened: a FIFO must not hang the open, and a device in a
      // record extracted as root must not be opened at all.
      fd = openRegularFile(this.at(name)).fd;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      this.problem(
        code === "ELOOP"
          ? `${name} is a symbolic link (not followed)`
          : code === "not a regular file"
            ? `${name} is not a regular file (not read)`
            : `${name} cannot be read (${code})`,
      );
      return "unreadable";
    }
    try {
      const buffer = Buffer.alloc(CHUNK);
      let left = Math.max(0, Math.min(limit, this.limits.maxReadBytes - this.bytesRead));
      for (;;) {
        // With nothing left, one byte more tells a file that ends there from one that goes on.
        const n = fs.readSync(fd, buffer, 0, Math.max(1, Math.min(buffer.length, left)), null);
        if (n === 0) return "read";
        if (left === 0) return "cut";
        this.bytesRead += n;
        left -= n;
        onChunk(buffer.subarray(0, n));
      }
    } catch (error) {
      this.problem(`${name} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
      return "unreadable";
    } finally {
      fs.closeSync(fd);
    }
  }
}

function bytesText(bytes: number): string {
  if (bytes >= 1024 * 1024 * 1024) return `${+(bytes / 1024 / 1024 / 1024).toFixed(1)} GiB`;
  if (bytes >= 1024 * 1024) return `${+(bytes / 1024 / 1024).toFixed(1)} MiB`;
  if (bytes >= 1024) return `${+(bytes / 1024).toFixed(1)} KiB`;
  return `${bytes} bytes`;
}
