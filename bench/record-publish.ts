// What putting a finished run record in place costs (issue 17 part 4: records are staged in the
// run's private folder and moved after the run): one rename when the target is on the staging
// folder's filesystem, a copy file by file (exclusive, no link followed) when it is not. No Docker.
//
//   node --import tsx bench/record-publish.ts [MiB of exchanges.jsonl, default 64] [other-fs dir, default /dev/shm]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { RecordTarget } from "../src/record/record-target.js";
import { HostDir } from "../src/util/host-dir.js";

const sizeMb = Number(process.argv[2] ?? 64);
const otherFs = process.argv[3] ?? "/dev/shm";
const ROUNDS = 7;
const SMALL = ["prompt.txt", "policy.json", "plan.json", "replay.json", "events.jsonl", "result.json", "meta.json"];

/** A staged record: the model traffic of `sizeMb` and the small files. */
function stage(root: string): HostDir {
  const parent = HostDir.open(fs.mkdtempSync(path.join(root, "stage-")));
  const record = parent.mkdir("record");
  record.writeNew("exchanges.jsonl", Buffer.alloc(sizeMb * 1024 * 1024, 97));
  for (const name of SMALL) record.writeNew(name, Buffer.alloc(20_000, 98));
  record.close();
  return parent;
}

const scratch = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-bench-publish-")));
try {
  for (const [label, root] of [
    ["same filesystem", scratch],
    [`another filesystem (${otherFs})`, otherFs],
  ] as const) {
    const times: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const parent = stage(scratch);
      const target = path.join(root, `sandbox-run-bench-target-${process.pid}-${i}`);
      const placed = RecordTarget.prepare(target, []);
      const start = performance.now();
      placed.publish(parent, "record");
      times.push(performance.now() - start);
      fs.rmSync(target, { recursive: true });
      parent.close();
    }
    times.sort((a, b) => a - b);
    const median = times[Math.floor(ROUNDS / 2)]!;
    console.log(`${label}: ${sizeMb} MiB record, median ${median.toFixed(1)} ms, max ${times.at(-1)!.toFixed(1)} ms`);
  }
} finally {
  fs.rmSync(scratch, { recursive: true, force: true });
}
