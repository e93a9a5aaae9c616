// Tree holds across processes (Lamport's bakery over files in the private run-folder parent): a
// run waits for an overlapping run of another live process that published a lower ticket or is
// still choosing one; a file whose process is gone is ignored and removed; release removes the
// run's own file. The other processes here are real (a child `sleep`), their files written as a
// controller writes them.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { reapRunDirs } from "../../src/run/reap-run-dirs.js";
import { runDirsParent } from "../../src/run/run-dirs.js";
import { holdTreesOnHost } from "../../src/run/tree-hold-files.js";

const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-holds-"));
const parent = runDirsParent(tmpDir);
const other = spawn("sleep", ["60"], { stdio: "ignore" });
afterAll(() => {
  other.kill();
  fs.rmSync(tmpDir, { recursive: true, force: true });
});

function otherHold(runId: string, writable: string[], ticket?: number, pid = other.pid!) {
  fs.mkdirSync(parent, { recursive: true, mode: 0o700 });
  const file = path.join(parent, `hold-${runId}`);
  fs.writeFileSync(file, JSON.stringify({ runId, writable, readOnly: [], pid, host: os.hostname(), ticket }));
  return file;
}

/** The pid of a process that has ended. */
async function goneProcess(): Promise<number> {
  const child = spawn("true");
  await new Promise((resolve) => child.on("exit", resolve));
  return child.pid!;
}

/** Whether the promise settled once pending callbacks and a few polls have run. */
async function settledWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setTimeout(resolve, ms));
  return done;
}

const mine = (runId: string, writable: string[]) => ({ runId, writable, readOnly: [] });

describe("tree holds across processes", () => {
  it("waits for another process's overlapping run with a lower ticket, says for which, and goes once it is over", async () => {
    const file = otherHold("aaaaaaaaaaaa", ["/w/repo"], 1);
    const waits: unknown[] = [];
    const hold = holdTreesOnHost(mine("bbbbbbbbbbbb", ["/w/repo/src"]), { tmpDir, onWaiting: (w) => waits.push(w) });
    expect(await settledWithin(hold, 600)).toBe(false);
    expect(waits).toEqual([{ heldBy: "aaaaaaaaaaaa", tree: "/w/repo/src" }]);
    // While it waits, its own file says it holds a higher ticket.
    const own = JSON.parse(fs.readFileSync(path.join(parent, "hold-bbbbbbbbbbbb"), "utf8"));
    expect(own).toMatchObject({ runId: "bbbbbbbbbbbb", pid: process.pid, ticket: 2, writable: ["/w/repo/src"] });
    fs.rmSync(file);
    expect(await settledWithin(hold, 600)).toBe(true);
    (await hold).release();
    expect(fs.readdirSync(parent).filter((n) => n.startsWith("hold-"))).toEqual([]);
  });

  it("waits while an overlapping run is choosing its ticket, and goes first when it then takes a higher one", async () => {
    const file = otherHold("cccccccccccc", ["/w/x"]);
    const hold = holdTreesOnHost(mine("dddddddddddd", ["/w/x"]), { tmpDir });
    expect(await settledWithin(hold, 600)).toBe(false);
    otherHold("cccccccccccc", ["/w/x"], 99);
    expect(await settledWithin(hold, 600)).toBe(true);
    (await hold).release();
    fs.rmSync(file);
  });

  it("ignores (and removes) the file of a process that is gone, and runs over other trees at once", async () => {
    const dead = await goneProcess();
    const stale = otherHold("eeeeeeeeeeee", ["/w/y"], 1, dead);
    const elsewhere = otherHold("ffffffffffff", ["/w/elsewhere"], 1);
    const hold = await holdTreesOnHost(mine("111111111111", ["/w/y"]), { tmpDir });
    expect(fs.existsSync(stale)).toBe(false);
    expect(fs.existsSync(elsewhere)).toBe(true);
    hold.release();
    hold.release();
    fs.rmSync(elsewhere);
  });

  it("gc's reaping removes the hold file of a controller that is gone, and keeps a live one's", async () => {
    const dead = await goneProcess();
    const stale = otherHold("555555555555", ["/w/v"], 3, dead);
    const live = otherHold("666666666666", ["/w/v"], 4);
    expect(reapRunDirs(tmpDir)).toEqual([stale]);
    expect(fs.existsSync(live)).toBe(true);
    fs.rmSync(live);
  });

  it("an abort while waiting rejects with the signal's reason and removes its own file", async () => {
    const file = otherHold("222222222222", ["/w/z"], 1);
    const stop = new AbortController();
    const hold = holdTreesOnHost(mine("333333333333", ["/w/z"]), { tmpDir, signal: stop.signal });
    expect(await settledWithin(hold, 400)).toBe(false);
    stop.abort(new Error("given up"));
    await expect(hold).rejects.toThrow("given up");
    expect(fs.existsSync(path.join(parent, "hold-333333333333"))).toBe(false);
    fs.rmSync(file);
    // Nothing of it is held in this process either.
    (await holdTreesOnHost(mine("444444444444", ["/w/z"]), { tmpDir })).release();
  });
});
