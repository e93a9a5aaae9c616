// A host resource a run needed and did not get: a full disk or quota, a read-only filesystem, too
// many open files, the run's own folder removed from under it. The host's environment, not a bug of
// sandbox-run's: said as such, with what to do (review, session 32: each was "unexpected error ...
// This is a bug in sandbox-run", exit 1, no hint). A usage error, exit 2, as a TMPDIR that cannot be
// used already is; an error that is already a SandboxRunError keeps its own code.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { isSandboxRunError, SandboxRunError } from "../errors.js";
import { runDirsParent } from "./run-dirs.js";

const RESOURCE_CODES = new Set(["ENOSPC", "EDQUOT", "EROFS", "EMFILE", "ENFILE"]);

/** The SandboxRunError a host resource failure is, or undefined when `error` is anything else. */
export function hostTroubleError(error: unknown, tmpDir = os.tmpdir()): SandboxRunError | undefined {
  if (isSandboxRunError(error)) return undefined;
  const failure = error as NodeJS.ErrnoException;
  if (typeof failure?.code !== "string" || typeof failure.syscall !== "string") return undefined;
  const where = typeof failure.path === "string" ? failure.path : undefined;
  if (RESOURCE_CODES.has(failure.code)) {
    const at = where ? ` (${failure.syscall} ${where})` : ` (${failure.syscall})`;
    return new SandboxRunError("usage", `The host ${describe(failure.code)}${at}.`, {
      hint: hintFor(failure.code, where, tmpDir),
      cause: error,
    });
  }
  // The run's folders went away while it ran (a cleaner of TMPDIR, a removed TMPDIR).
  const parent = runDirsParent(tmpDir);
  if (failure.code === "ENOENT" && where && isInside(parent, where) && !fs.existsSync(parent)) {
    return new SandboxRunError(
      "usage",
      `The run's folder in ${tmpDir} was removed while the run went on (${failure.syscall} ${where}).`,
      {
        hint: `Keep ${parent} while runs go on (a TMPDIR cleaner must skip it), or point TMPDIR at a folder nothing else cleans; then run again.`,
        cause: error,
      },
    );
  }
  return undefined;
}

function describe(code: string): string {
  switch (code) {
    case "ENOSPC":
      return "ran out of disk space";
    case "EDQUOT":
      return "ran out of its disk quota";
    case "EROFS":
      return "could not write to a read-only filesystem";
    default:
      return "ran out of open files";
  }
}

function hintFor(code: string, where: string | undefined, tmpDir: string): string {
  const folder = where ? path.dirname(where) : `TMPDIR (${tmpDir}) or the workspace`;
  switch (code) {
    case "ENOSPC":
    case "EDQUOT":
      return where
        ? `Free space on the filesystem holding ${folder} (or point TMPDIR at one with room), then run again.`
        : `Free space where the run writes: TMPDIR (${tmpDir}) or the workspace's filesystem; then run again.`;
    case "EROFS":
      return `${folder} is on a read-only filesystem: point TMPDIR at a writable folder, then run again.`;
    default:
      return "Raise the limit of open files (`ulimit -n 4096`), then run again.";
  }
}

function isInside(parent: string, candidate: string): boolean {
  const relative = path.relative(parent, candidate);
  return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative));
}

/** A pack file (or .idx) set aside because this host could not check it (workspace/restore-tree.ts). */
export interface SetAsidePack {
  /** As reported: relative to the workspace, absolute in an extra root. */
  path: string;
  /** Where it is now; absent when it could not be moved (`why`). */
  keptAt?: string;
  why?: string;
}

/**
 * Packs the run's git wrote that this host could not check (its git could not be started, or failed
 * for want of a resource; review, session 34: an honest `git gc` then lost the repository's history,
 * its pack removed as "not what its name says"). Not a refusal: they were moved out of the object
 * store into the run's folder, and are put back by the user once the host's git has verified them.
 * `reasons`: why the check could not run; `others`: the words of the run's other violations, if any
 * (then the run fails as a policy violation, this said first).
 */
export function uncheckedPacksError(input: {
  workspace: string;
  setAside: readonly SetAsidePack[];
  reasons: readonly string[];
  folder: string;
  others?: { message: string; hint: string };
}): SandboxRunError {
  const packs = new Map<string, { pack?: SetAsidePack; idx?: SetAsidePack }>();
  for (const entry of input.setAside) {
    const match = /^(.*)\.(pack|idx)$/.exec(entry.path);
    const stem = match ? match[1]! : entry.path;
    const pair = packs.get(stem) ?? {};
    pair[match?.[2] === "idx" ? "idx" : "pack"] = entry;
    packs.set(stem, pair);
  }
  const where: string[] = [];
  const commands: string[] = [];
  for (const [stem, { pack, idx }] of packs) {
    const storeDir = path.resolve(input.workspace, path.dirname(stem));
    const name = path.basename(stem);
    // A pack is named after its checksum: 64 hex digits in a sha256 repository.
    const format = /^pack-[0-9a-f]{64}$/.test(name) ? " --object-format=sha256" : "";
    const packNow = pack?.keptAt ?? path.join(storeDir, `${name}.pack`);
    const kept = [pack, idx].filter((e) => e?.keptAt).map((e) => e!.keptAt!);
    where.push(
      `${stem}.pack ${pack?.keptAt ? `-> ${pack.keptAt}` : `(${pack?.why ?? "left in place"})`}${idx?.keptAt ? `, its .idx -> ${idx.keptAt}` : idx?.why ? `, its .idx ${idx.why}` : ""}`,
    );
    if (pack?.keptAt && idx?.keptAt)
      commands.push(
        `git index-pack --verify${format} ${shellQuoted(pack.keptAt)} && mv ${shellQuoted(pack.keptAt)} ${shellQuoted(idx.keptAt)} ${shellQuoted(`${storeDir}/`)}`,
      );
    else {
      // Its .idx is gone: index-pack makes it again from the pack (hashing every object), beside it.
      const madeIdx = packNow.replace(/\.pack$/, ".idx");
      const move = pack?.keptAt
        ? ` && mv ${shellQuoted(pack.keptAt)} ${shellQuoted(madeIdx)} ${shellQuoted(`${storeDir}/`)}`
        : "";
      commands.push(`git index-pack${format} ${shellQuoted(packNow)}${move}`);
      if (kept.length > 0 && !pack?.keptAt) commands.push(`rm ${kept.map(shellQuoted).join(" ")}`);
    }
  }
  const count = packs.size;
  const message =
    `This host could not check ${count === 1 ? "a git pack" : `${count} git packs`} the run wrote (${input.reasons.join("; ")}), so ${count === 1 ? "it was" : "they were"} neither accepted nor deleted: moved out of the repository's object store into ${input.folder}: ${where.join("; ")}. ` +
    `Nothing says ${count === 1 ? "it is" : "they are"} wrong; until ${count === 1 ? "it is" : "they are"} put back, git may report objects missing (an ordinary \`git gc\` in the sandbox packs the history into a new pack and prunes the loose objects), and the repository's refs were put back as before the run. The result was withheld.` +
    (input.others ? ` ${input.others.message}` : "");
  const hint =
    "Make this host able to run git (installed on PATH, enough processes, memory, open files, and free space in TMPDIR), " +
    `then verify each pack with it and put it back, from outside the workspace: ${commands.join("; ")}. ` +
    `A pack git refuses there is not what its name says: delete it instead. ${input.folder} stays until you remove it (\`sandbox-run gc\` leaves it).` +
    (input.others ? ` ${input.others.hint}` : "");
  return new SandboxRunError(input.others ? "policy-violation" : "usage", message, { hint });
}

/** A path as one shell word. */
function shellQuoted(value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}
