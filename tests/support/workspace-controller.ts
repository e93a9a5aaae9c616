// The host side of a bind-mode run without the container, in a process of its own so that its
// peak RSS is its own: lend the tree (as root), snapshot it, watch its disk and entries while
// "the sandbox" (the test, as uid 65532) writes, then judge it, trim, check the limits and hand it
// back, exactly as run/run-workspace.ts does. Used by security-workspace-walk's scale tests to
// measure the walk on trees far larger than a real run creates before its live watch stops it.
//
// Protocol: argv[2] is JSON { root, stateDir, maxEntries, diskMb }; it prints {"kind":"ready"}
// once the sandbox may write, {"kind":"tripped"} when the live watch trips, waits for a line on
// stdin, then prints {"kind":"done", ...}.
import readline from "node:readline";
import { SANDBOX_UID } from "../../src/sandbox-contract.js";
import { type DiskTrip, DiskWatch } from "../../src/workspace/disk-watch.js";
import { OwnershipLease } from "../../src/workspace/ownership-lease.js";
import { WorkspaceWatch } from "../../src/workspace/workspace-watch.js";

const spec = JSON.parse(process.argv[2] ?? "{}") as {
  root: string;
  stateDir: string;
  maxEntries: number;
  diskMb: number;
};
const print = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);
const peaks: Record<string, number> = {};
setInterval(() => {
  for (const [key, bytes] of Object.entries(process.memoryUsage()))
    peaks[key] = Math.max(peaks[key] ?? 0, Math.round(bytes / 1048576));
}, 20).unref();

const lease = await OwnershipLease.lend([spec.root], { uid: SANDBOX_UID, gid: SANDBOX_UID });
const watch = await WorkspaceWatch.start({
  workspace: spec.root,
  workspaceWritable: true,
  writableRoots: [],
  protectedPaths: [],
  stateDir: spec.stateDir,
  ownerOf: (stat) => lease.originalOwner(stat),
  maxEntries: spec.maxEntries,
});
let liveTrip: DiskTrip | undefined;
const started = performance.now();
let trippedAfterMs: number | undefined;
const disk = await DiskWatch.start({
  roots: [spec.root],
  limitBytes: spec.diskMb * 1024 * 1024,
  limitEntries: spec.maxEntries,
  baselineBytes: watch.allocatedBytesBefore,
  baselineEntries: watch.entriesBefore,
  onExceeded: (trip) => {
    liveTrip = trip;
    trippedAfterMs = Math.round(performance.now() - started);
    print({ kind: "tripped" });
  },
});
print({ kind: "ready" });
await new Promise<void>((resolve) => readline.createInterface({ input: process.stdin }).once("line", () => resolve()));
disk.stop();
const judged = performance.now();
const report = await watch.finish();
const afterTrip = await disk.check({ bytes: report.allocatedBytes.after, entries: report.entries.after });
const handedBack = await lease.restore({ uid: 0, gid: 0 });
print({
  kind: "done",
  liveTrip,
  trippedAfterMs,
  afterTrip,
  overfull: report.overfull,
  entries: report.entries,
  violations: report.violations.length,
  created: report.changedFiles.truncated?.created ?? report.changedFiles.created.length,
  handedBack,
  finishMs: Math.round(performance.now() - judged),
  maxRssMb: process.resourceUsage().maxRSS / 1024,
  peaks,
});
process.exit(0);
