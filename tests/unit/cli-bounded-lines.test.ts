// --events to a reader that stops reading (review, session 34: the CLI grew to 450 MB, then waited
// 30 s for the reader after the sandbox was gone): past a bound lines are left out, said once, and
// the close waits for the reader a bounded time.
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { BoundedLines } from "../../src/cli/bounded-lines.js";

/** A stream whose reader never takes anything: every write stays buffered. */
const stalled = () => new Writable({ write: () => {} });

describe("BoundedLines", () => {
  it("leaves lines out once the waiting bytes pass the bound, says so once, and gives up on the close after its wait", async () => {
    const stream = stalled();
    let said = 0;
    const lines = new BoundedLines(stream, () => said++, 1000);
    for (let i = 0; i < 100; i++) lines.write(`${"x".repeat(99)}\n`);
    expect(stream.writableLength).toBeLessThanOrEqual(1100);
    expect(lines.dropped).toBe(89);
    expect(said).toBe(1);
    // A stream that never drains: the close gives up after its wait (a hang is the test's timeout).
    expect(await lines.close(50)).toBe(false);
    expect(stream.destroyed).toBe(true);
  });

  it("waits for a reader that keeps reading, however slowly, past the wait (review of this session's change, fix34b)", async () => {
    let release: (() => void) | undefined;
    const got: string[] = [];
    // Takes one chunk every 30 ms: 20 chunks take ~600 ms, ten times the 60 ms wait.
    const stream = new Writable({
      highWaterMark: 1,
      write: (chunk, _encoding, done) => {
        got.push(String(chunk));
        release = done;
        setTimeout(() => release?.(), 30);
      },
    });
    const lines = new BoundedLines(stream, () => {}, 1_000_000);
    for (let i = 0; i < 20; i++) lines.write(`${i}\n`);
    expect(await lines.close(60)).toBe(true);
    expect(got).toHaveLength(20);
  });

  it("writes everything to a reader that keeps up, and closes once it has it", async () => {
    const got: string[] = [];
    const stream = new Writable({
      write: (chunk, _encoding, done) => {
        got.push(String(chunk));
        done();
      },
    });
    const lines = new BoundedLines(
      stream,
      () => {
        throw new Error("nothing is left out");
      },
      1000,
    );
    for (let i = 0; i < 100; i++) lines.write(`${i}\n`);
    expect(await lines.close(1000)).toBe(true);
    expect(got.join("").split("\n").filter(Boolean)).toHaveLength(100);
    expect(lines.dropped).toBe(0);
  });
});
