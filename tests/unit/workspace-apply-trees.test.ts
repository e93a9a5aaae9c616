// A run's returned trees (its workspace and writable directories) are applied all or none: a tree
// that cannot be applied undoes the ones applied before it, and the commit point, once it fails to
// be written, undoes like any other step (review, session 38: a writable directory whose disk filled
// left the workspace applied under "Nothing was changed"; a full disk at the commit record left the
// tree applied, its originals aside, and a bare ENOSPC).
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import { applyReturnedTreesYielding, applyReturnedTreeYielding } from "../../src/workspace-transfer/apply-tree.js";
import { tempTrees } from "../support/temp-trees.js";
import { roundTrip } from "../support/transfer-round-trip.js";

const { dir: tempDir, tree } = tempTrees("sandbox-run-apply-trees-");

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

/** A staging directory alone in a folder of its own (an undo that keeps originals puts them next to it). */
function stagingDir(): string {
  const staging = path.join(tempDir(), "staging");
  fs.mkdirSync(staging);
  return staging;
}

/** The sandbox's edits of a workspace and a writable directory, round-tripped as copy mode does. */
async function twoTrees() {
  const workspace = tree({ "a.txt": "before\n", "src/b.ts": "b\n" });
  const writable = tree({ "keep.txt": "keep\n" });
  const ws = await roundTrip(
    workspace,
    (copy) => {
      fs.writeFileSync(path.join(copy, "a.txt"), "after\n");
      fs.writeFileSync(path.join(copy, "new.txt"), "new\n");
      fs.rmSync(path.join(copy, "src/b.ts"));
    },
    { copy: tempDir(), staging: stagingDir() },
  );
  const wr = await roundTrip(
    writable,
    (copy) => {
      for (let i = 0; i < 5; i++) fs.mkdirSync(path.join(copy, `d${i}`));
    },
    { copy: tempDir(), staging: stagingDir() },
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
    expect(fs.readdirSync(path.dirname(ws.stagingDir))).toEqual(["staging"]);
  });
});
