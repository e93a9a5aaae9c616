// A run's returned trees (its workspace and writable directories) are applied all or none: a tree
// that cannot be applied undoes the ones applied before it, and the commit point, once it fails to
// be written, undoes like any other step (review, session 38: a writable directory whose disk filled
// left the workspace applied under "Nothing was changed"; a full disk at the commit record left the
// tree applied, its originals aside, and a bare ENOSPC).
import fs from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import { applyReturnedTreesYielding, applyReturnedTreeYielding } from "../../src/workspace-transfer/apply-tree.js";
import { finishDeadApply } from "../../src/workspace-transfer/dead-apply.js";
import { tempTrees } from "../support/temp-trees.js";
import { roundTrip } from "../support/transfer-round-trip.js";

const { dir: tempDir } = tempTrees("sandbox-run-apply-trees-");

/** Every entry below `dir`: kind, mode, content or target; inode numbers too (an undo puts the same inodes back). */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    const st = fs.lstatSync(path.join(dir, rel));
    const meta = `${st.ino}:${(st.mode & 0o7777).toString(8)}`;
    if (st.isSymbolicLink()) out[rel] = `link:${fs.readlinkSync(path.join(dir, rel))}`;
    else if (st.isDirectory()) {
      out[rel || "."] = `dir:${meta}`;
      for (const name of fs.readdirSync(path.join(dir, rel)).sort()) walk(rel ? `${rel}/${name}` : name);
    } else out[rel] = `file:${meta}:${fs.readFileSync(path.join(dir, rel), "utf8")}`;
  };
  walk("");
  return out;
}

async function failure(promise: Promise<unknown>): Promise<SandboxRunError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isSandboxRunError(error), String(error)).toBe(true);
  return error as SandboxRunError;
}

/**
 * A tree (`tree`) and its staging directory (`staging`) next to it, alone in a folder of their own
 * (an undo that keeps originals puts them there too), private as makeStagingDir makes it: where a
 * reaper looks for it.
 */
function treeWithStaging(files: Record<string, string>): { root: string; staging: string } {
  const home = tempDir();
  const root = path.join(home, "tree");
  for (const [name, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), content);
  }
  const staging = path.join(home, "staging");
  fs.mkdirSync(staging, { mode: 0o700 });
  return { root, staging };
}

/** The sandbox's edits of a workspace and a writable directory, round-tripped as copy mode does. */
async function twoTrees() {
  const { root: workspace, staging: wsStaging } = treeWithStaging({ "a.txt": "before\n", "src/b.ts": "b\n" });
  const { root: writable, staging: wrStaging } = treeWithStaging({ "keep.txt": "keep\n" });
  const ws = await roundTrip(
    workspace,
    (copy) => {
      fs.writeFileSync(path.join(copy, "a.txt"), "after\n");
      fs.writeFileSync(path.join(copy, "new.txt"), "new\n");
      fs.rmSync(path.join(copy, "src/b.ts"));
    },
    { copy: tempDir(), staging: wsStaging },
  );
  const wr = await roundTrip(
    writable,
    (copy) => {
      for (let i = 0; i < 5; i++) fs.mkdirSync(path.join(copy, `d${i}`));
    },
    { copy: tempDir(), staging: wrStaging },
  );
  return { workspace, writable, ws, wr };
}

describe("a run's returned trees, all or none", () => {
  it("a writable directory that cannot be applied undoes the workspace applied before it: nothing changed, as the error says", async () => {
    const { workspace, writable, ws, wr } = await twoTrees();
    const was = { workspace: snapshot(workspace), writable: snapshot(writable) };
    const error = await failure(
      applyReturnedTreesYielding([
        { before: ws.before, returned: ws.returned, what: "the workspace", options: { asideDir: ws.stagingDir } },
        {
          before: wr.before,
          returned: wr.returned,
          what: "the writable directory",
          options: {
            asideDir: wr.stagingDir,
            // The disk fills at its third new folder.
            beforeWrite: (rel) => {
              if (rel === "d2")
                throw Object.assign(new Error("ENOSPC: no space left on device, mkdir"), { code: "ENOSPC" });
            },
          },
        },
      ]),
    );
    expect(error.code).toBe("not-applied");
    expect(error.shortMessage).toMatch(/^The run's changes to the writable directory could not be applied \(.*ENOSPC/);
    expect(error.shortMessage).toMatch(/Nothing was changed\.$/);
    // ... and nothing was: the workspace's own inodes, contents and modes are back.
    expect(snapshot(workspace)).toEqual(was.workspace);
    expect(snapshot(writable)).toEqual(was.writable);
  });

  it("both trees applied when both go in; each tree's originals go only then", async () => {
    const { workspace, writable, ws, wr } = await twoTrees();
    const results = await applyReturnedTreesYielding([
      { before: ws.before, returned: ws.returned, what: "the workspace", options: { asideDir: ws.stagingDir } },
      {
        before: wr.before,
        returned: wr.returned,
        what: "the writable directory",
        options: { asideDir: wr.stagingDir },
      },
    ]);
    expect(results).toEqual([
      { keptDirectories: [], leftAside: [] },
      { keptDirectories: [], leftAside: [] },
    ]);
    expect(fs.readFileSync(path.join(workspace, "a.txt"), "utf8")).toBe("after\n");
    expect(fs.existsSync(path.join(workspace, "src/b.ts"))).toBe(false);
    expect(fs.readdirSync(writable).sort()).toEqual(["d0", "d1", "d2", "d3", "d4", "keep.txt"]);
  });

  it("a commit point that cannot be written (a full disk) undoes the apply and says so", async () => {
    const { workspace, ws } = await twoTrees();
    const was = snapshot(workspace);
    const error = await failure(
      applyReturnedTreeYielding(ws.before, ws.returned, "the workspace", {
        asideDir: ws.stagingDir,
        onStep: (_step, phase) => {
          if (phase === "committed")
            throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
        },
      }),
    );
    expect(error.code).toBe("not-applied");
    expect(error.shortMessage).toMatch(/Nothing was changed\.$/);
    expect(snapshot(workspace)).toEqual(was);
    // No original kept aside next to the staging directory.
    expect(fs.readdirSync(path.dirname(ws.stagingDir)).sort()).toEqual(["staging", "tree"]);
  });

  describe("a tree's commit point that cannot be written after another tree's was (review of session 38's fixes)", () => {
    afterEach(() => {
      vi.restoreAllMocks();
    });

    /** The disk fills at the second commit record written (the writable directory's): it is not written. */
    function secondCommitRecordFails(): { failed: () => boolean } {
      const write = fs.writeSync;
      let commits = 0;
      vi.spyOn(fs, "writeSync").mockImplementation(((fd: number, data: Buffer, ...rest: never[]) => {
        if (Buffer.isBuffer(data) && data.toString() === '["c"]\n' && ++commits === 2)
          throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
        return (write as (...args: unknown[]) => number)(fd, data, ...rest);
      }) as typeof fs.writeSync);
      return { failed: () => commits >= 2 };
    }

    it("the workspace's commit record is taken back before its undo: a controller killed during that undo leaves it to the reaper to undo, its originals back, nothing deleted", async () => {
      const { workspace, writable, ws, wr } = await twoTrees();
      const was = { workspace: snapshot(workspace), writable: snapshot(writable) };
      secondCommitRecordFails();
      const killed = new Error("killed during the workspace's undo");
      const rejected = await applyReturnedTreesYielding([
        {
          before: ws.before,
          returned: ws.returned,
          what: "the workspace",
          options: {
            asideDir: ws.stagingDir,
            // The controller dies at the undo's second step: new.txt and the run's a.txt are gone,
            // the original a.txt and src/b.ts still wait aside.
            onStep: (step, phase) => {
              if (phase === "undone" && step === 2) throw killed;
            },
          },
        },
        {
          before: wr.before,
          returned: wr.returned,
          what: "the writable directory",
          options: { asideDir: wr.stagingDir },
        },
      ]).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(rejected).toBe(killed);
      vi.restoreAllMocks();
      expect(fs.existsSync(path.join(workspace, "a.txt"))).toBe(false);
      expect(fs.readFileSync(path.join(ws.stagingDir, "journal"), "utf8")).not.toMatch(/\["c"\]/);
      // The reaper (gc, the next run's start-up) finds the dead controller's journal: an undo, not a commit.
      expect(finishDeadApply(ws.stagingDir, () => ({ release() {} }))).toEqual({
        tree: workspace,
        undone: true,
        unrestored: [],
      });
      expect(snapshot(workspace)).toEqual(was.workspace);
      expect(snapshot(writable)).toEqual(was.writable);
    });

    it("a commit record that cannot be taken back keeps its tree applied and committed, and the error says which tree is applied and which undone", async () => {
      const { workspace, writable, ws, wr } = await twoTrees();
      const was = snapshot(writable);
      const commit = secondCommitRecordFails();
      const truncate = fs.ftruncateSync;
      vi.spyOn(fs, "ftruncateSync").mockImplementation((fd, length) => {
        if (commit.failed()) throw Object.assign(new Error("EIO: i/o error, ftruncate"), { code: "EIO" });
        truncate(fd, length);
      });
      const error = await failure(
        applyReturnedTreesYielding([
          { before: ws.before, returned: ws.returned, what: "the workspace", options: { asideDir: ws.stagingDir } },
          {
            before: wr.before,
            returned: wr.returned,
            what: "the writable directory",
            options: { asideDir: wr.stagingDir },
          },
        ]),
      );
      vi.restoreAllMocks();
      expect(error.code).toBe("not-applied");
      expect(error.shortMessage).toMatch(
        /^The run's changes to the writable directory could not be applied \(ENOSPC.*\) and were undone; its changes to the workspace are applied all the same \(their commit point could not be taken back: EIO\)\.$/,
      );
      expect(error.shortMessage).not.toMatch(/Nothing was changed/);
      // The workspace is the run's, its originals gone (as a reaper reading its journal would have it).
      expect(fs.readFileSync(path.join(workspace, "a.txt"), "utf8")).toBe("after\n");
      expect(fs.readFileSync(path.join(workspace, "new.txt"), "utf8")).toBe("new\n");
      expect(fs.existsSync(path.join(workspace, "src/b.ts"))).toBe(false);
      expect(fs.existsSync(path.join(ws.stagingDir, "aside"))).toBe(false);
      expect(snapshot(writable)).toEqual(was);
    });
  });
});
