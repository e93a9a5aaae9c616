// The live disk watch of a non-root caller's run: its sandbox runs as the caller's uid, owns the
// folders it makes and may make them unreadable (`chmod 000`), the workspace root included. A walk
// that skipped such a folder let 1200 MiB reach the host's disk under a 64 MiB limit while the run
// was live (review, round 3, session 38). The watch changes no mode: a walk that could not see
// everything judges the filesystem's growth instead. It runs as uid 1500 in a process of its own
// (tests/support/disk-watch-as-user.ts): root reads any folder.
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { BlindTrip, DiskTrip } from "../../src/workspace/disk-watch.js";
import { tempTrees } from "../support/temp-trees.js";

const USER = 1500;
const AS_USER = [`--reuid=${USER}`, `--regid=${USER}`, "--clear-groups"];
const REPO = fileURLToPath(new URL("../..", import.meta.url));
const SCRIPT = fileURLToPath(new URL("../support/disk-watch-as-user.ts", import.meta.url));
const MB = 1024 * 1024;
// Generous: a trip comes within a poll and a walk; without one the test fails here, not by its timeout.
const WAIT_MS = 15_000;
const { dir, tree } = tempTrees("sandbox-run-disk-user-", () => process.env.SANDBOX_RUN_TESTS_HOST_TMP ?? os.tmpdir());

/** A tree the caller owns. */
function callersTree(files: Record<string, string>): string {
  const root = tree(files);
  execFileSync("chown", ["-R", `${USER}:${USER}`, root]);
  return root;
}

/** What the sandbox does: a shell command in the tree as the caller's uid. */
function sandbox(root: string, command: string): void {
  execFileSync("setpriv", [...AS_USER, "sh", "-c", command], { cwd: root, stdio: "pipe" });
}

/** Modes of the folders below `root` (and its own), as the test's root sees them. */
function modes(root: string): Record<string, number> {
  const out: Record<string, number> = { ".": fs.statSync(root).mode & 0o7777 };
  for (const name of fs.readdirSync(root)) {
    const stat = fs.lstatSync(path.join(root, name));
    if (stat.isDirectory()) out[name] = stat.mode & 0o7777;
  }
  return out;
}

/**
 * The caller's live watch of `root`; `run` (the run's writes) once it has its baseline; its trip,
 * or "none" after `waitMs`.
 */
async function watchedByCaller(
  root: string,
  limits: { limitBytes: number; limitEntries?: number; holders?: number[] },
  run: () => void,
  waitMs = WAIT_MS,
): Promise<DiskTrip | BlindTrip | "none"> {
  const home = dir();
  fs.chownSync(home, USER, USER);
  const child = spawn(
    "setpriv",
    [...AS_USER, process.execPath, "--import", "tsx", SCRIPT, JSON.stringify({ roots: [root], ...limits })],
    { cwd: REPO, env: { ...process.env, TMPDIR: home, HOME: home } },
  );
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const deadline = setTimeout(() => child.kill(), waitMs);
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

describe("the live disk watch of a non-root caller's run that made folders unreadable (review, round 3, session 38)", () => {
  it("a folder made 000 hides nothing: the filesystem's growth counts, the disk limit trips, and no mode is changed", async () => {
    const root = callersTree({ "README.md": "hi\n" });
    const seen = await watchedByCaller(root, { limitBytes: 4 * MB }, () => sandbox(root, hiddenWrite("chmod 000 h")));
    expect(seen).toMatchObject({ limit: "disk", limitBytes: 4 * MB, unseen: `${root}/h`, blindTo: "a folder" });
    expect(seen !== "none" && "grownBytes" in seen && seen.grownBytes).toBeGreaterThan(4 * MB);
    expect(modes(root)).toMatchObject({ h: 0o000 });
  }, 30_000);

  it("a root made 000 hides nothing: the disk limit trips, named by the root", async () => {
    const root = callersTree({ "README.md": "hi\n" });
    const before = fs.statSync(root).mode & 0o7777;
    try {
      const seen = await watchedByCaller(root, { limitBytes: 4 * MB }, () => sandbox(root, hiddenWrite("chmod 000 .")));
      expect(seen).toMatchObject({ limit: "disk", limitBytes: 4 * MB, unseen: root });
      expect(fs.statSync(root).mode & 0o7777).toBe(0);
    } finally {
      fs.chmodSync(root, before);
    }
  }, 30_000);

  it("entries made below a folder made 000 trip the entry limit by the filesystem's inode count", async () => {
    const root = callersTree({ "README.md": "hi\n" });
    const seen = await watchedByCaller(root, { limitBytes: 64 * MB, limitEntries: 2_000 }, () =>
      // cwd inside the folder below the one made unreadable: path lookups start there.
      sandbox(root, "mkdir -p h/many && cd h/many && chmod 000 .. && seq 1 3000 | xargs touch"),
    );
    expect(seen).toMatchObject({ limit: "entries", limitEntries: 2_000, unseen: `${root}/h` });
    expect(seen !== "none" && "grownEntries" in seen && seen.grownEntries).toBeGreaterThan(2_000);
  }, 30_000);

  it("a folder the caller cannot open at all trips the watch the same way, named", async () => {
    const root = callersTree({ "README.md": "hi\n" });
    const locked = path.join(root, "locked");
    const seen = await watchedByCaller(root, { limitBytes: 4 * MB }, () => {
      // Not the caller's (root made it): nothing of the caller's opens it.
      fs.mkdirSync(locked, { mode: 0o700 });
      fs.writeFileSync(path.join(locked, "big"), Buffer.alloc(8 * MB, 1));
      execFileSync("sync");
    });
    expect(seen).toMatchObject({ limit: "disk", limitBytes: 4 * MB, unseen: locked });
  }, 30_000);

  it("files held by processes the caller may not read (gVisor's, or a non-dumpable one's) count blind: the filesystem's growth trips (review, round 3, session 39)", async () => {
    const root = callersTree({ "README.md": "hi\n" });
    // A root process stands for gVisor's sentry: it holds a nameless file of the tree, and writes
    // 8 MiB into it once told to (after the watch has its baseline).
    const script = `const fs = require("node:fs"); const fd = fs.openSync("held.bin", "w"); fs.unlinkSync("held.bin");
      console.log("open"); process.stdin.once("data", () => { for (let i = 0; i < 8; i++) fs.writeSync(fd, Buffer.alloc(${MB}, 1)); fs.fsyncSync(fd); });
      setInterval(() => fd, 60_000);`;
    const holder = spawn(process.execPath, ["-e", script], { cwd: root, stdio: ["pipe", "pipe", "inherit"] });
    try {
      await new Promise<void>((resolve) => holder.stdout!.once("data", () => resolve()));
      const seen = await watchedByCaller(root, { limitBytes: 4 * MB, holders: [holder.pid!] }, () =>
        holder.stdin!.write("go\n"),
      );
      expect(seen).toMatchObject({ limit: "disk", limitBytes: 4 * MB });
      expect(seen !== "none" && "unseen" in seen && seen.unseen).toMatch(
        /^what the container's processes hold \(\d+ of their open files, mappings or threads could not be read\)$/,
      );
    } finally {
      holder.kill("SIGKILL");
    }
  }, 30_000);

  it("the caller's own process that maps a removed file counts blind (a mapping is readable only with CAP_SYS_ADMIN); one that maps none does not, whatever others write", async () => {
    const root = callersTree({ "README.md": "hi\n" });
    // Its name removed first, sized (sparse: nothing allocated), mapped, and its fd closed; only then
    // 8 MiB written through the mapping: the file never grows while an fd (readable by the caller)
    // holds it, which let a scan count it as held, not blind (a flake under load, CI, session 45).
    const mapper = (map: boolean) =>
      [
        "import ctypes, os, sys, time",
        "libc = ctypes.CDLL(None, use_errno=True)",
        "libc.mmap.restype = ctypes.c_void_p",
        "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]",
        "print('ready', flush=True); sys.stdin.readline()",
        "fd = os.open('m', os.O_RDWR | os.O_CREAT, 0o600); os.unlink('m'); os.ftruncate(fd, 8 << 20)",
        map
          ? "addr = libc.mmap(None, 8 << 20, 3, 1, fd, 0); assert addr not in (None, ctypes.c_void_p(-1).value); os.close(fd); ctypes.memset(addr, 1, 8 << 20); libc.msync(ctypes.c_void_p(addr), ctypes.c_size_t(8 << 20), 4)"
          : "os.close(fd)",
        "time.sleep(60)",
      ].join("\n");
    const run = async (map: boolean, othersWrite: boolean) => {
      const holder = spawn("setpriv", [...AS_USER, "/usr/bin/python3", "-c", mapper(map)], {
        cwd: root,
        stdio: ["pipe", "pipe", "inherit"],
      });
      try {
        await new Promise<void>((resolve) => holder.stdout!.once("data", () => resolve()));
        // Another program's 16 MiB on the same filesystem, outside the tree: not the run's.
        const elsewhere = path.join(dir(), "others.bin");
        return await watchedByCaller(
          root,
          { limitBytes: 4 * MB, holders: [holder.pid!] },
          () => {
            holder.stdin!.write("go\n");
            if (othersWrite) {
              fs.writeFileSync(elsewhere, Buffer.alloc(16 * MB, 1));
              execFileSync("sync");
            }
          },
          map ? WAIT_MS : 4_000,
        );
      } finally {
        holder.kill("SIGKILL");
      }
    };
    const mapped = await run(true, false);
    expect(mapped).toMatchObject({ limit: "disk", limitBytes: 4 * MB, blindTo: "held files" });
    expect(mapped !== "none" && "unseen" in mapped && mapped.unseen).toMatch(/^what the container's processes hold/);
    expect(await run(false, true)).toBe("none");
  }, 45_000);

  it("an unreadable folder alone trips nothing while the filesystem stays within the limit", async () => {
    const root = callersTree({ "README.md": "hi\n" });
    // Entries are counted every 2 s whatever statfs says, so several blind walks happen in this time.
    const seen = await watchedByCaller(
      root,
      { limitBytes: 512 * MB, limitEntries: 10_000 },
      () => sandbox(root, "mkdir h && echo x > h/f && chmod 000 h"),
      5_000,
    );
    expect(seen).toBe("none");
  }, 30_000);
});
