// The live disk watch of a non-root caller's run: its sandbox runs as the caller's uid, owns the
// folders it makes and may make them unreadable (`chmod 000`), the workspace root included. A walk
// that skipped such a folder let 1200 MiB reach the host's disk under a 64 MiB limit while the run
// was live (review, session 38, round 3). The watch runs as uid 1500 in a process of its own
// (tests/support/disk-watch-as-user.ts): root reads any folder.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { DiskTrip } from "../../src/workspace/disk-watch.js";
import { AS_CALLER, asCallersSandbox, CALLER_UID, giveToCaller } from "../support/caller-uid.js";
import { tempTrees } from "../support/temp-trees.js";

const REPO = fileURLToPath(new URL("../..", import.meta.url));
const SCRIPT = fileURLToPath(new URL("../support/disk-watch-as-user.ts", import.meta.url));
const MB = 1024 * 1024;
// Generous: a trip comes within a poll and a walk; without one the test fails here, not by its timeout.
const WAIT_MS = 15_000;
const { dir, tree } = tempTrees("sandbox-run-disk-user-", () => process.env.SANDBOX_RUN_TESTS_HOST_TMP ?? os.tmpdir());

/** A tree the caller owns. */
const callersTree = (files: Record<string, string>) => giveToCaller(tree(files));
const sandbox = asCallersSandbox;

/** The caller's live watch of `root`; `run` (the run's writes) once it has its baseline; its trip, or "none". */
async function watchedByCaller(root: string, limitBytes: number, run: () => void): Promise<DiskTrip | "none"> {
  const home = dir();
  fs.chownSync(home, CALLER_UID, CALLER_UID);
  const child = spawn(
    "setpriv",
    [
      ...AS_CALLER,
      process.execPath,
      "--import",
      "tsx",
      SCRIPT,
      JSON.stringify({ roots: [root], limitBytes, limitEntries: 10_000 }),
    ],
    { cwd: REPO, env: { ...process.env, TMPDIR: home, HOME: home } },
  );
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const deadline = setTimeout(() => child.kill(), WAIT_MS);
  try {
    for await (const line of readline.createInterface({ input: child.stdout })) {
      const message = JSON.parse(line) as { kind: string; trip?: DiskTrip };
      if (message.kind === "ready") run();
      else if (message.kind === "trip") return message.trip!;
    }
  } finally {
    clearTimeout(deadline);
    child.kill();
  }
  if (stderr) throw new Error(`the watch failed: ${stderr}`);
  return "none";
}

/** 8 MiB past a 4 MiB limit, written through a file opened before `chmod` made its folder unreadable. */
const hiddenWrite = (chmod: string) =>
  `mkdir h && exec 3>h/big && ${chmod} && dd if=/dev/zero bs=1M count=8 conv=fsync status=none >&3`;

describe("the live disk watch of a non-root caller's run that made folders unreadable (review, session 38, round 3)", () => {
  it("what a folder made 000 holds is counted: the owner's read and search are given back, and the disk limit trips", async () => {
    const root = callersTree({ "README.md": "hi\n" });
    const seen = await watchedByCaller(root, 4 * MB, () => sandbox(root, hiddenWrite("chmod 000 h")));
    expect(seen).toMatchObject({ limit: "disk", limitBytes: 4 * MB });
    expect(seen !== "none" && "grownBytes" in seen && seen.grownBytes).toBeGreaterThan(6 * MB);
  }, 30_000);

  it("a root made 000 hides nothing: its owner's read and search are given back, and the disk limit trips", async () => {
    const root = callersTree({ "README.md": "hi\n" });
    const seen = await watchedByCaller(root, 4 * MB, () => sandbox(root, hiddenWrite("chmod 000 .")));
    expect(seen).toMatchObject({ limit: "disk", limitBytes: 4 * MB });
    expect(seen !== "none" && "grownBytes" in seen && seen.grownBytes).toBeGreaterThan(6 * MB);
  }, 30_000);

  it("a folder the caller cannot make readable trips the watch, named: its writes cannot be counted", async () => {
    const root = callersTree({ "README.md": "hi\n" });
    const locked = path.join(root, "locked");
    const seen = await watchedByCaller(root, 4 * MB, () => {
      // Not the caller's (root made it): no chmod of the caller's can open it.
      fs.mkdirSync(locked, { mode: 0o700 });
      fs.writeFileSync(path.join(locked, "big"), Buffer.alloc(8 * MB, 1));
    });
    expect(seen).toEqual({
      limit: "disk",
      hidden: `${locked}: cannot open the directory: EACCES`,
      limitBytes: 4 * MB,
    });
  }, 30_000);
});
