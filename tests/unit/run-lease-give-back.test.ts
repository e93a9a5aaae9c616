// After a root caller's run: the lease record goes only once every entry is back; what the hand-back
// could not reach keeps it for `gc`, with a warning naming the entries (review, session 38).
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { giveBackLease } from "../../src/run/lease-give-back.js";
import { writeLeaseRecord } from "../../src/run/lease-record.js";
import { createRunDir, LEASE_RECORD } from "../../src/run/run-dirs.js";
import { OwnershipLease } from "../../src/workspace/ownership-lease.js";
import { owner, tempTrees } from "../support/temp-trees.js";

const SANDBOX = { uid: 65532, gid: 65532 };
const CALLER = { uid: 0, gid: 0 };
const { dir, tree } = tempTrees("sandbox-run-give-back-");

describe.runIf(process.getuid?.() === 0)("giveBackLease (as root)", () => {
  /** A lent tree where the sandbox made `sub/stuck/x`, and the run folder holding its lease record. */
  const lentRun = async (runId: string) => {
    const ws = tree({ "a.txt": "a" });
    const runDir = createRunDir(runId, dir());
    writeLeaseRecord(runDir, { roots: [ws], handBackTo: CALLER, engine: "unix:///nonexistent.sock" });
    const lease = await OwnershipLease.lend([ws], SANDBOX);
    fs.mkdirSync(path.join(ws, "sub/stuck"), { recursive: true });
    fs.writeFileSync(path.join(ws, "sub/stuck/x"), "x");
    for (const p of ["sub", "sub/stuck", "sub/stuck/x"]) fs.lchownSync(path.join(ws, p), SANDBOX.uid, SANDBOX.gid);
    const events: Array<{ type: string; data: Record<string, unknown> }> = [];
    const timeline = {
      sandbox: (type: string, data: Record<string, unknown> = {}) => void events.push({ type, data }),
    };
    const giveBack = () =>
      giveBackLease({ lease, handBackTo: CALLER, runDir, timeline, removeSandbox: async () => true });
    return { ws, runDir, events, giveBack };
  };

  it("a folder the hand-back cannot open: the lease record stays for gc, and a still-lent warning names it", async () => {
    const { ws, runDir, events, giveBack } = await lentRun("stuck");
    const open = fs.openSync;
    const failing = vi.spyOn(fs, "openSync").mockImplementation(((...args: Parameters<typeof open>) => {
      if (String(args[0]).endsWith("/stuck")) throw Object.assign(new Error("EMFILE"), { code: "EMFILE" });
      return open(...args);
    }) as typeof open);
    try {
      await giveBack();
    } finally {
      failing.mockRestore();
    }
    expect(fs.existsSync(path.join(runDir, LEASE_RECORD))).toBe(true);
    expect(owner(path.join(ws, "sub/stuck/x"))).toBe("65532:65532");
    expect(events).toEqual([
      {
        type: "workspace.still-lent",
        data: expect.objectContaining({
          count: 1,
          entries: [`${path.join(ws, "sub/stuck")}: cannot open the directory: EMFILE`],
          warning: expect.stringMatching(
            /at or below this path .* uid 65532: .*sub\/stuck: cannot open.*Run `sandbox-run gc`/,
          ),
        }),
      },
    ]);
  });

  it("everything handed back: the record goes, and nothing is said", async () => {
    const { ws, runDir, events, giveBack } = await lentRun("whole");
    await giveBack();
    expect(fs.existsSync(path.join(runDir, LEASE_RECORD))).toBe(false);
    expect(owner(path.join(ws, "sub/stuck/x"))).toBe("0:0");
    expect(events).toEqual([]);
  });
});
