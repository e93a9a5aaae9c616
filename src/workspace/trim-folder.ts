// A folder the sandbox filled with more entries than the after-run walk can hold (fd-walk.ts:
// `overfull`; hard links make millions of names for free) is put back within bounds: what the run
// added there is removed, what the snapshot recorded stays (and is judged by the next walk). A
// folder the run created goes as a whole. The folder is read as a stream and its names are never
// held: only the recorded names are (the caller's own, as they were before the run). Everything
// goes through directory fds (no symlink is followed), and the event loop gets a turn every few
// hundred entries.
import fs from "node:fs";
import { errorCode, openDirAt, openRoot, YIELD_EVERY, yieldToEventLoop } from "./fd-walk.js";
import { removeAtYielding } from "./remove-tree.js";

interface TrimReport {
  /** Entries removed from the folder (a directory counts once, with all below it). */
  removed: number;
  /** Set when the folder could not be put back within bounds. */
  failed?: string;
}

const PASSES = 3;

/**
 * Removes from `relative` (a folder below `root`) every entry whose name `keep` does not hold; with
 * `keep` undefined the folder itself goes.
 */
export async function trimFolder(
  root: string,
  relative: string,
  keep: ReadonlySet<string> | undefined,
): Promise<TrimReport> {
  const report: TrimReport = { removed: 0 };
  const parts = relative === "" ? [] : relative.split("/");
  let fd: number;
  try {
    fd = openRoot(root);
    for (const part of parts) {
      const next = openDirAt(fd, part);
      fs.closeSync(fd);
      fd = next;
    }
  } catch (error) {
    return { removed: 0, failed: `cannot open it: ${errorCode(error)}` };
  }
  try {
    // Entries removed while the stream runs may make it skip others: list again until nothing is left to remove.
    for (let pass = 0; pass < PASSES; pass++) {
      const before = report.removed;
      await removeUnkept(fd, keep, report);
      if (report.removed === before) break;
    }
  } catch (error) {
    report.failed = errorCode(error);
  } finally {
    fs.closeSync(fd);
  }
  if (keep === undefined && report.failed === undefined && parts.length > 0) {
    // Now empty (or nearly): the folder itself, through its parent.
    try {
      let parent = openRoot(root);
      try {
        for (const part of parts.slice(0, -1)) {
          const next = openDirAt(parent, part);
          fs.closeSync(parent);
          parent = next;
        }
        await removeAtYielding(parent, parts[parts.length - 1]!);
      } finally {
        fs.closeSync(parent);
      }
    } catch (error) {
      report.failed = errorCode(error);
    }
  }
  return report;
}

async function removeUnkept(fd: number, keep: ReadonlySet<string> | undefined, report: TrimReport): Promise<void> {
  const dir = fs.opendirSync(`/proc/self/fd/${fd}`, { bufferSize: 256, encoding: "buffer" as BufferEncoding });
  try {
    let sinceYield = 0;
    for (let entry = dir.readSync(); entry !== null; entry = dir.readSync()) {
      const raw = entry.name as unknown as Buffer;
      const name = raw.toString("utf8");
      const exact = Buffer.from(name, "utf8").equals(raw);
      if (exact && keep?.has(name)) continue;
      // A directory may hold millions itself: its removal yields to the event loop too.
      if (await removeAtYielding(fd, exact ? name : raw)) report.removed++;
      if (++sinceYield >= YIELD_EVERY) {
        sinceYield = 0;
        await yieldToEventLoop();
      }
    }
  } finally {
    dir.closeSync();
  }
}
