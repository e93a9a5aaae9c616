// Disk accounting on real trees: allocated bytes (sparse files count what they use, hard links
// once), and a watch that trips while a tree grows past its limit and stays quiet below it.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { DiskWatch, measureTreeBytes, type DiskTrip } from "../../src/workspace/disk-watch.js";

const dirs: string[] = [];
function tree(): string {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-disk-")));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

const MB = 1024 * 1024;

describe("measureTreeBytes", () => {
  it("counts allocated bytes: a sparse file by what it uses, a hard-linked file once, never through a symlink", async () => {
    const root = tree();
    fs.writeFileSync(path.join(root, "full.bin"), Buffer.alloc(2 * MB, 1));
    const sparse = fs.openSync(path.join(root, "sparse.bin"), "w");
    fs.ftruncateSync(sparse, 1024 * MB);
    fs.closeSync(sparse);
    fs.linkSync(path.join(root, "full.bin"), path.join(root, "link.bin"));
    const outside = tree();
    fs.writeFileSync(path.join(outside, "big.bin"), Buffer.alloc(4 * MB, 1));
    fs.symlinkSync(outside, path.join(root, "to-outside"));
    const bytes = await measureTreeBytes(root);
    expect(bytes).toBeGreaterThanOrEqual(2 * MB);
    expect(bytes).toBeLessThan(3 * MB);
  });
});

describe("DiskWatch", () => {
  it("trips once the trees grew past the limit while the run is live, with the bytes grown", async () => {
    const root = tree();
    let tripped: (trip: DiskTrip) => void = () => {};
    const trip = new Promise<DiskTrip>((resolve) => (tripped = resolve));
    const watch = await DiskWatch.start({ roots: [root], limitBytes: 4 * MB, intervalMs: 20, onExceeded: tripped });
    try {
      fs.writeFileSync(path.join(root, "small.bin"), Buffer.alloc(1 * MB, 1));
      expect(await watch.check()).toBeUndefined();
      fs.writeFileSync(path.join(root, "big.bin"), Buffer.alloc(6 * MB, 1));
      fs.fsyncSync(fs.openSync(path.join(root, "big.bin"), "r"));
      const seen = await trip;
      expect(seen.limitBytes).toBe(4 * MB);
      expect(seen.grownBytes).toBeGreaterThan(6 * MB);
      expect(await watch.check()).toMatchObject({ limitBytes: 4 * MB });
    } finally {
      watch.stop();
    }
  });

  it("check() after the run uses the after-walk's bytes when given", async () => {
    const root = tree();
    const watch = await DiskWatch.start({ roots: [root], limitBytes: MB, baselineBytes: 0, onExceeded: () => {} });
    watch.stop();
    expect(await watch.check(3 * MB)).toEqual({ grownBytes: 3 * MB, limitBytes: MB });
    expect(await watch.check(MB)).toBeUndefined();
  });
});
