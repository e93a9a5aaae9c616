// Checks that an object file says what its name says, reading it through an fd the caller opened
// without following a link (bind mode: through directory fds in the tree the sandbox left; copy
// mode: the private staged copy). Git never does this when it reads: a loose object is inflated
// and used under its name, a pack's .idx is believed. So:
// - a loose object must be one zlib stream, nothing after it, holding "<type> <size>\0" (one of
//   git's four types, the size in canonical decimal) and exactly <size> bytes, whose sha1 (or
//   sha256, for a 64-hex name) is its name; inflated as a stream, never past the size its header
//   declares, which must fit the caller's budget (a small file can inflate to gigabytes);
// - a pack and its .idx are checked by the host's git: `index-pack --verify` reads every object
//   of the pack, hashes it, builds the .idx git would write and compares it byte for byte with
//   the given one (outside any repository, in a private folder, with git's environment scrubbed:
//   util/host-git.ts); the files reach it as /dev/fd/N, so no path in the tree is resolved;
// - a pack only "freshened" (git touches an existing pack's times instead of writing an object
//   it already has) is hashed and compared with the pack checksum its unchanged .idx recorded;
// - a git-lfs object's sha256 must be its name.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { hostGit } from "../util/host-git.js";
import { readAll } from "../util/read-fd.js";
import { hashOfOid } from "./git-object-store.js";

const HEADER = /^(blob|tree|commit|tag) (0|[1-9][0-9]{0,18})$/;
/** The longest header git writes: "commit " and a 64-bit size. */
const MAX_HEADER_BYTES = 32;
/** Files up to this size are read and inflated in one call (most loose objects). */
const SMALL_FILE_BYTES = 64 * 1024;
const SMALL_INFLATED_BYTES = 1024 * 1024;
const CHUNK_BYTES = 1024 * 1024;

interface LooseCheck {
  /** Why the object is not what its name says; undefined when it is. */
  problem?: string;
  /** Bytes inflated (what the check cost). */
  inflated: number;
}

/** Checks a loose object; `maxBytes`: the most its header may declare (the rest of the budget). */
export async function checkLooseObject(fd: number, oid: string, maxBytes: number): Promise<LooseCheck> {
  const size = fs.fstatSync(fd).size;
  if (size <= SMALL_FILE_BYTES) {
    const small = checkSmallLoose(readAll(fd, size), oid, maxBytes);
    if (small) return small;
  }
  return checkLooseStream(fd, size, oid, maxBytes);
}

/** One read, one inflate; undefined when the content inflates past the small limit (then streamed). */
function checkSmallLoose(data: Buffer, oid: string, maxBytes: number): LooseCheck | undefined {
  let result: { buffer: Buffer; engine: zlib.Inflate };
  try {
    result = zlib.inflateSync(data, {
      maxOutputLength: Math.min(SMALL_INFLATED_BYTES, maxBytes + MAX_HEADER_BYTES),
      info: true,
    }) as unknown as { buffer: Buffer; engine: zlib.Inflate };
  } catch (error) {
    if (error instanceof RangeError) return undefined;
    return { problem: "it is not a zlib stream git can inflate", inflated: 0 };
  }
  const { buffer, engine } = result;
  if (engine.bytesWritten !== data.length) return { problem: "bytes follow its zlib stream", inflated: buffer.length };
  const nul = buffer.indexOf(0);
  const header = parseHeader(nul < 0 ? undefined : buffer.subarray(0, nul));
  if (typeof header === "string") return { problem: header, inflated: buffer.length };
  if (header.size > maxBytes) return { problem: tooLarge(header.size), inflated: 0 };
  if (buffer.length - nul - 1 !== header.size)
    return {
      problem: `its header says ${header.size} bytes, it holds ${buffer.length - nul - 1}`,
      inflated: buffer.length,
    };
  const digest = crypto.createHash(hashOfOid(oid)).update(buffer).digest("hex");
  return { problem: digest === oid ? undefined : nameProblem(digest), inflated: buffer.length };
}

async function checkLooseStream(fd: number, size: number, oid: string, maxBytes: number): Promise<LooseCheck> {
  const hash = crypto.createHash(hashOfOid(oid));
  const inflate = zlib.createInflate();
  let head = Buffer.alloc(0);
  let declared: number | undefined;
  let content = 0;
  let inflated = 0;
  let failed: string | undefined;
  const fail = (why: string) => {
    failed ??= why;
    inflate.destroy();
  };
  const done = new Promise<void>((resolve) => {
    inflate.on("data", (chunk: Buffer) => {
      if (failed) return;
      inflated += chunk.length;
      hash.update(chunk);
      if (declared === undefined) {
        head = Buffer.concat([head, chunk]);
        const nul = head.indexOf(0);
        if (nul < 0) {
          if (head.length > MAX_HEADER_BYTES) fail("no object header");
          return;
        }
        const header = parseHeader(head.subarray(0, nul));
        if (typeof header === "string") return fail(header);
        if (header.size > maxBytes) return fail(tooLarge(header.size));
        declared = header.size;
        content = head.length - nul - 1;
      } else content += chunk.length;
      if (content > declared) fail(`it holds more than the ${declared} bytes its header says`);
    });
    inflate.on("error", () => fail("it is not a zlib stream git can inflate"));
    inflate.on("close", resolve);
    inflate.on("end", resolve);
  });
  const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
  let at = 0;
  while (at < size && !failed) {
    const n = fs.readSync(fd, buffer, 0, Math.min(buffer.length, size - at), at);
    if (n === 0) break;
    at += n;
    // Copied: the buffer is reused for the next read while zlib still holds this chunk.
    if (!inflate.write(Buffer.from(buffer.subarray(0, n))))
      await new Promise<void>((resolve) => {
        inflate.once("drain", resolve);
        inflate.once("close", resolve);
      });
  }
  if (!failed) inflate.end();
  await done;
  if (failed) return { problem: failed, inflated };
  if (declared === undefined) return { problem: "no object header", inflated };
  if (inflate.bytesWritten !== size) return { problem: "bytes follow its zlib stream", inflated };
  if (content !== declared) return { problem: `its header says ${declared} bytes, it holds ${content}`, inflated };
  const digest = hash.digest("hex");
  return { problem: digest === oid ? undefined : nameProblem(digest), inflated };
}

function parseHeader(raw: Buffer | undefined): { type: string; size: number } | string {
  if (!raw || raw.length > MAX_HEADER_BYTES) return "no object header";
  const match = HEADER.exec(raw.toString("latin1"));
  if (!match)
    return `a header git does not write ("${raw
      .toString("latin1")
      .slice(0, 32)
      .replace(/[^ -~]/g, "?")}")`;
  const size = Number(match[2]);
  if (!Number.isSafeInteger(size)) return "a size too large to read";
  return { type: match[1]!, size };
}

const nameProblem = (digest: string) =>
  `its content hashes to ${digest.slice(0, 12)}, not to its name: git would read it as that object`;
const tooLarge = (size: number) => `it declares ${size} bytes, more than is left to check in this run`;

/** A git-lfs object: its sha256 is its name. */
export async function checkLfsObject(fd: number, oid: string): Promise<string | undefined> {
  const digest = await hashRange(fd, "sha256", fs.fstatSync(fd).size);
  return digest === oid ? undefined : `its content hashes to ${digest.slice(0, 12)}, not to its name`;
}

interface PackFiles {
  /** The pack, open for reading. */
  pack: number;
  /** Its .idx, open for reading. */
  idx: number;
}

interface PackCheckOptions {
  /** The repository's hash. */
  format: "sha1" | "sha256";
  /** A private, empty folder of the run (removed by the caller). */
  scratch: string;
  timeoutMs: number;
  /** The run's stop: git is killed and the pack is not checked. */
  signal?: AbortSignal;
}

/**
 * A pack this host could not check, for a reason of the host's own (its git could not be started:
 * not installed, too many processes, no memory, no file descriptors; or the scratch folder could not
 * be written): not a refusal, since nothing says the pack is wrong. The caller neither accepts it in
 * place (git would read it unchecked) nor deletes it (an honest `git gc` packed history into it):
 * it is set aside for the user to verify and put back.
 */
export interface PackNotCheckedHere {
  /** Why the host could not check it ("spawn git EAGAIN", "the host's git is not installed"). */
  hostReason: string;
}

/** The spawn and file errors that are the host's, not the pack's. */
const HOST_ERROR_CODES = new Set([
  "ENOENT",
  "EACCES",
  "EAGAIN",
  "ENOMEM",
  "EMFILE",
  "ENFILE",
  "ENOSPC",
  "EDQUOT",
  "EROFS",
]);

export function isPackNotCheckedHere(verdict: unknown): verdict is PackNotCheckedHere {
  return (
    typeof verdict === "object" && verdict !== null && typeof (verdict as PackNotCheckedHere).hostReason === "string"
  );
}

/**
 * Whether the .idx is exactly what git makes of the pack, every object hashed (the host's `git
 * index-pack --verify`). Undefined when it is; why not otherwise (git's own last words); a
 * PackNotCheckedHere when this host could not run the check at all.
 */
export async function checkPack(
  files: PackFiles,
  options: PackCheckOptions,
): Promise<string | PackNotCheckedHere | undefined> {
  let dir: string | undefined;
  try {
    dir = fs.mkdtempSync(path.join(options.scratch, "pack-"));
    fs.symlinkSync("/dev/fd/3", path.join(dir, "p.pack"));
    fs.symlinkSync("/dev/fd/4", path.join(dir, "p.idx"));
    fs.mkdirSync(path.join(dir, "home"), { mode: 0o700 });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    // A full or read-only scratch folder is the host's (review, session 34: it refused an honest gc's pack).
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
    return { hostReason: `its scratch folder ${options.scratch} could not be written (${code})` };
  }
  try {
    // Options old gits know (a sha1 pack needs no --object-format); no reverse index is made or compared.
    const format = options.format === "sha256" ? ["--object-format=sha256"] : [];
    const result = await hostGit(["index-pack", "--verify", ...format, "p.pack"], {
      config: ["pack.writeReverseIndex=false"],
      cwd: dir,
      home: path.join(dir, "home"),
      // No repository is looked for above the private folder.
      env: { GIT_CEILING_DIRECTORIES: path.dirname(dir) },
      fds: [files.pack, files.idx],
      timeoutMs: options.timeoutMs,
      maxOutputBytes: 1024 * 1024,
      ...(options.signal ? { signal: options.signal } : {}),
    }).catch((error: NodeJS.ErrnoException): PackNotCheckedHere | { status: number; stderr: string } => {
      // Not started (a spawn error carries its code): the host's git is missing or the host is out of something.
      if (typeof error.code === "string" && HOST_ERROR_CODES.has(error.code))
        return {
          hostReason:
            error.code === "ENOENT"
              ? "the host's git is not installed: not found on PATH"
              : `the host's git could not be started (${error.code})`,
        };
      // Timed out, stopped or too talkative: the run's budget, judged as a refusal.
      return { status: -1, stderr: error.message };
    });
    if (isPackNotCheckedHere(result)) return result;
    if (result.status === 0) return undefined;
    if (result.status === -1) return `not checked: ${result.stderr}`;
    const last =
      result.stderr
        .trim()
        .split("\n")
        .pop()
        ?.replace(/^fatal: /, "") ?? "";
    // What git prints once it has read the pack is the pack's doing too: a commit header claiming
    // 2^60 bytes makes it say "Out of memory" (review of this session's change, fix34b). Only a git
    // that could not start is the host's.
    return `the host's git index-pack --verify refused it (${(last || `exit ${result.status}`).slice(0, 200)}): its .idx is not what git makes of the pack`;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * A pack whose times changed (git's freshen) next to an .idx the run did not touch: the pack's
 * bytes hash to the checksum its last bytes say, and that is the checksum the .idx recorded.
 */
export async function checkFreshenedPack(files: PackFiles, format: "sha1" | "sha256"): Promise<string | undefined> {
  const bytes = format === "sha256" ? 32 : 20;
  const packSize = fs.fstatSync(files.pack).size;
  const idxSize = fs.fstatSync(files.idx).size;
  if (packSize < 12 + bytes || idxSize < 2 * bytes) return "too short to be a pack and its index";
  const trailer = Buffer.alloc(bytes);
  fs.readSync(files.pack, trailer, 0, bytes, packSize - bytes);
  const recorded = Buffer.alloc(bytes);
  fs.readSync(files.idx, recorded, 0, bytes, idxSize - 2 * bytes);
  if (!trailer.equals(recorded)) return "its checksum is not the one its .idx recorded: the pack was rewritten";
  const digest = await hashRange(files.pack, format, packSize - bytes);
  return digest === trailer.toString("hex")
    ? undefined
    : "its content does not hash to its checksum: the pack was rewritten";
}

/**
 * An existing pack written anew, or whose .idx was: git names a pack `pack-<checksum>` after its
 * content, so a pack whose trailing checksum is its name's, and whose content hashes to that
 * checksum (checked next: checkFreshenedPack, or index-pack --verify with a new .idx), is the pack
 * that name always had. Only the trailer is read here.
 */
export function packNameProblem(pack: number, stem: string, format: "sha1" | "sha256"): string | undefined {
  const bytes = format === "sha256" ? 32 : 20;
  const size = fs.fstatSync(pack).size;
  if (size < 12 + bytes) return "too short to be a pack";
  const trailer = Buffer.alloc(bytes);
  fs.readSync(pack, trailer, 0, bytes, size - bytes);
  return stem === `pack-${trailer.toString("hex")}`
    ? undefined
    : "an existing pack written anew with other content: git names a pack after its checksum, and this one's is not its name's";
}

/** The hash of the first `length` bytes of an fd, read in chunks, yielding between them. */
async function hashRange(fd: number, algorithm: string, length: number): Promise<string> {
  const hash = crypto.createHash(algorithm);
  const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
  for (let at = 0; at < length; ) {
    const n = await new Promise<number>((resolve, reject) =>
      fs.read(fd, buffer, 0, Math.min(buffer.length, length - at), at, (error, read) =>
        error ? reject(error) : resolve(read),
      ),
    );
    if (n === 0) break;
    hash.update(buffer.subarray(0, n));
    at += n;
  }
  return hash.digest("hex");
}
