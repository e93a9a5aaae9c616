// Which runs of one process may hold host trees at once: none where either may write a tree the
// other holds (the same path, or one inside the other); read-only trees are shared; a waiting
// run starts when the runs before it are done, in the order the calls came; an abort while
// waiting leaves the queue as if the call never came.
import { describe, expect, it } from "vitest";
import { holdTrees, sharedTree, type TreeHold } from "../../src/run/tree-holds.js";

const run = (runId: string, writable: string[], readOnly: string[] = []) => ({ runId, writable, readOnly });

/** Whether a hold promise has settled after the queued callbacks ran. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe("tree holds", () => {
  it("finds a shared tree where either may write, by whole path components", () => {
    expect(sharedTree(run("a", ["/w/repo"]), run("b", ["/w/repo"]))).toBe("/w/repo");
    expect(sharedTree(run("a", ["/w/repo"]), run("b", ["/w/repo/sub"]))).toBe("/w/repo/sub");
    expect(sharedTree(run("a", ["/w/repo/sub"]), run("b", [], ["/w/repo"]))).toBe("/w/repo/sub");
    expect(sharedTree(run("a", [], ["/w/repo"]), run("b", ["/w/repo"]))).toBe("/w/repo");
    expect(sharedTree(run("a", ["/w/repo"]), run("b", ["/w/repo-2"]))).toBeUndefined();
    expect(sharedTree(run("a", [], ["/w/lib"]), run("b", [], ["/w/lib"]))).toBeUndefined();
  });

  it("a run over another's tree waits for it, says for whom, and starts once it is released", async () => {
    const first = await holdTrees(run("first", ["/w/repo"]));
    const waits: unknown[] = [];
    const second = holdTrees(run("second", ["/w/repo/src"]), { onWaiting: (w) => waits.push(w) });
    expect(waits).toEqual([{ heldBy: "first", tree: "/w/repo/src" }]);
    expect(await settled(second)).toBe(false);
    // Unrelated and read-only-shared runs start at once.
    const other = await holdTrees(run("other", ["/w/elsewhere"], ["/w/lib"]));
    const reader = await holdTrees(run("reader", [], ["/w/lib"]));
    first.release();
    first.release(); // once only
    expect(await settled(second)).toBe(true);
    (await second).release();
    other.release();
    reader.release();
  });

  it("waiting runs start in the order they came, and a later one never overtakes an earlier one it conflicts with", async () => {
    const holder = await holdTrees(run("holder", ["/w/a"]));
    const order: string[] = [];
    // "ab" waits for holder; "b" overlaps only "ab", which came first: it waits too.
    const noted = (name: string) => (h: TreeHold) => {
      order.push(name);
      return h;
    };
    const ab = holdTrees(run("ab", ["/w/a", "/w/b"])).then(noted("ab"));
    const waits: unknown[] = [];
    const b = holdTrees(run("b", ["/w/b"]), { onWaiting: (w) => waits.push(w) }).then(noted("b"));
    expect(waits).toEqual([{ heldBy: "ab", tree: "/w/b" }]);
    expect(await settled(b)).toBe(false);
    holder.release();
    const abHold: TreeHold = await ab;
    expect(await settled(b)).toBe(false);
    abHold.release();
    (await b).release();
    expect(order).toEqual(["ab", "b"]);
  });

  it("an abort while waiting rejects with the signal's reason and lets the runs behind it go", async () => {
    const holder = await holdTrees(run("holder", ["/w/x"]));
    const stop = new AbortController();
    const aborted = holdTrees(run("aborted", ["/w/x", "/w/y"]), { signal: stop.signal });
    const behind = holdTrees(run("behind", ["/w/y"]));
    expect(await settled(behind)).toBe(false);
    stop.abort(new Error("stopped by the caller"));
    await expect(aborted).rejects.toThrow("stopped by the caller");
    expect(await settled(behind)).toBe(true);
    (await behind).release();
    holder.release();
    // Nothing is left held: the same tree is free again.
    (await holdTrees(run("again", ["/w/x", "/w/y"]))).release();
    // An already aborted signal never queues.
    await expect(holdTrees(run("late", ["/w/x"]), { signal: AbortSignal.abort(new Error("late")) })).rejects.toThrow(
      "late",
    );
  });
});
