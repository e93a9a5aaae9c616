// Nameless files a real process holds (unlinked while open, O_TMPFILE, unlinked while mapped) are
// found through its /proc entries, with their allocated bytes; named ones and other devices are not.
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { heldNamelessFiles } from "../../src/workspace/held-files.js";

const MB = 1024 * 1024;
const dirs: string[] = [];
const children: ChildProcess[] = [];
function tree(): string {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-held-")));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const c of children.splice(0)) c.kill("SIGKILL");
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

/** Starts `node -e script` in `cwd` and resolves once it printed "ready". */
function holder(script: string, cwd: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["-e", script], { cwd, stdio: ["ignore", "pipe", "inherit"] });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => d.toString().includes("ready") && resolve(child));
    child.on("exit", (code) => reject(new Error(`holder exited ${code}`)));
  });
}

const HOLD = `
const fs = require("node:fs");
const unlinked = fs.openSync("gone.bin", "w");
fs.writeSync(unlinked, Buffer.alloc(${3 * MB}, 1));
fs.unlinkSync("gone.bin");
const again = fs.openSync("/proc/self/fd/" + unlinked, "r"); // the same inode twice
const tmpfile = fs.openSync(".", 0o20000000 | fs.constants.O_DIRECTORY | fs.constants.O_RDWR, 0o600);
fs.writeSync(tmpfile, Buffer.alloc(${2 * MB}, 1));
const named = fs.openSync("named.bin", "w");
fs.writeSync(named, Buffer.alloc(${4 * MB}, 1));
fs.fsyncSync(unlinked); fs.fsyncSync(tmpfile); fs.fsyncSync(named);
console.log("ready");
setInterval(() => [again, named], 60_000);
`;

describe("heldNamelessFiles", () => {
  it("counts a held unlinked file and an O_TMPFILE by allocated bytes, each inode once, but not a named file", async () => {
    const root = tree();
    const child = await holder(HOLD, root);
    const held = await heldNamelessFiles([child.pid!], new Set([fs.statSync(root).dev]));
    expect(held.files).toBe(2);
    expect(held.bytes).toBeGreaterThanOrEqual(5 * MB);
    expect(held.bytes).toBeLessThan(6 * MB);
    expect(held.capped).toBe(false);
  });

  it("counts nothing on a device it was not asked about, nor of a pid that is gone", async () => {
    const root = tree();
    const child = await holder(HOLD, root);
    const otherDevice = fs.statSync(root).dev + 1;
    expect((await heldNamelessFiles([child.pid!], new Set([otherDevice]))).bytes).toBe(0);
    child.kill("SIGKILL");
    await new Promise((resolve) => child.once("exit", resolve));
    expect((await heldNamelessFiles([child.pid!], new Set([fs.statSync(root).dev]))).files).toBe(0);
  });

  it("stops at the entry cap and says so", async () => {
    const root = tree();
    const child = await holder(HOLD, root);
    const held = await heldNamelessFiles([child.pid!], new Set([fs.statSync(root).dev]), { maxEntries: 3 });
    expect(held).toMatchObject({ read: 3, capped: true });
  });
});

describe("heldNamelessFiles: every thread (review, round 3, session 39)", () => {
  it("finds a file held by a thread whose leader exited (its own /proc/<pid>/fd is empty then), and counts the mappings it cannot see as unreadable", async () => {
    const root = tree();
    // The main thread leaves with SYS_exit (only itself); a second thread keeps the fd table alive.
    const script = [
      "import ctypes, os, sys, threading, time",
      "fd = os.open('held.bin', os.O_WRONLY | os.O_CREAT, 0o600)",
      "os.unlink('held.bin')",
      `os.write(fd, b'x' * ${3 * MB}); os.fsync(fd)`,
      "threading.Thread(target=lambda: time.sleep(60)).start()",
      "print('ready', flush=True)",
      "ctypes.CDLL(None).syscall(60, 0)",
    ].join("\n");
    const child = spawn("python3", ["-c", script], { cwd: root, stdio: ["ignore", "pipe", "inherit"] });
    children.push(child);
    await new Promise<void>((resolve) =>
      child.stdout!.on("data", (d: Buffer) => d.toString().includes("ready") && resolve()),
    );
    // Until the leader is a zombie, its own folder still lists the fd.
    while (!/^State:\s+Z/m.test(fs.readFileSync(`/proc/${child.pid}/status`, "utf8")))
      await new Promise((resolve) => setTimeout(resolve, 10));
    expect(fs.readdirSync(`/proc/${child.pid}/fd`)).toEqual([]);
    const held = await heldNamelessFiles([child.pid!], new Set([fs.statSync(root).dev]));
    // Its fd through the thread that holds it; its mappings cannot be seen through the exited leader.
    expect(held).toMatchObject({ files: 1, unreadable: 1 });
    expect(held.bytes).toBeGreaterThanOrEqual(3 * MB);
  });
});

// /proc/<pid>/map_files needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE.
describe.runIf(process.getuid?.() === 0)("heldNamelessFiles (as root)", () => {
  it("counts a file held only by a mapping: a program whose file was deleted while it runs", async () => {
    const root = tree();
    const program = path.join(root, "sleeper");
    fs.copyFileSync("/bin/sleep", program);
    fs.chmodSync(program, 0o755);
    const child = spawn(program, ["60"], { stdio: "ignore" });
    children.push(child);
    await new Promise((resolve) => child.once("spawn", resolve));
    // once the loader mapped it: no fd, only mappings
    while (!fs.readFileSync(`/proc/${child.pid}/maps`, "utf8").includes(program))
      await new Promise((resolve) => setTimeout(resolve, 10));
    const { blocks } = fs.statSync(program);
    fs.unlinkSync(program);
    const held = await heldNamelessFiles([child.pid!], new Set([fs.statSync(root).dev]));
    expect(held).toMatchObject({ files: 1, bytes: blocks * 512, unreadable: 0 });
    expect(held.bytes).toBeGreaterThan(0);
  });
});
