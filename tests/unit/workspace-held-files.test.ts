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
    const held = heldNamelessFiles([child.pid!], new Set([fs.statSync(root).dev]));
    expect(held.files).toBe(2);
    expect(held.bytes).toBeGreaterThanOrEqual(5 * MB);
    expect(held.bytes).toBeLessThan(6 * MB);
    expect(held.capped).toBe(false);
  });

  it("counts nothing on a device it was not asked about, nor of a pid that is gone", async () => {
    const root = tree();
    const child = await holder(HOLD, root);
    const otherDevice = fs.statSync(root).dev + 1;
    expect(heldNamelessFiles([child.pid!], new Set([otherDevice])).bytes).toBe(0);
    child.kill("SIGKILL");
    await new Promise((resolve) => child.once("exit", resolve));
    expect(heldNamelessFiles([child.pid!], new Set([fs.statSync(root).dev])).files).toBe(0);
  });

  it("stops at the entry cap and says so", async () => {
    const root = tree();
    const child = await holder(HOLD, root);
    const held = heldNamelessFiles([child.pid!], new Set([fs.statSync(root).dev]), { maxEntries: 3 });
    expect(held).toMatchObject({ read: 3, capped: true });
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
    const held = heldNamelessFiles([child.pid!], new Set([fs.statSync(root).dev]));
    expect(held).toMatchObject({ files: 1, bytes: blocks * 512, unreadable: 0 });
    expect(held.bytes).toBeGreaterThan(0);
  });
});
