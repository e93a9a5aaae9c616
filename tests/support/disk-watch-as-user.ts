// The live disk watch as an unprivileged uid, for tests of a non-root caller (its sandbox runs as
// its uid and may make its folders unreadable; root reads any folder, so only another uid sees it).
//
// Protocol: argv[2] is JSON { roots, limitBytes, limitEntries?, holders? } (holders: the pids the
// watch asks for held files, as a run's container's); it prints {"kind":"ready"} once the
// watch has its baseline (the test then makes the run's changes), and {"kind":"trip","trip":...} when
// it trips.
import { DiskWatch } from "../../src/workspace/disk-watch.js";

const { holders, ...spec } = JSON.parse(process.argv[2] ?? "{}") as {
  roots: string[];
  limitBytes: number;
  limitEntries?: number;
  holders?: number[];
};
const print = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);
const watch = await DiskWatch.start({
  ...spec,
  intervalMs: 20,
  onExceeded: (trip) => {
    print({ kind: "trip", trip });
    process.exit(0);
  },
});
if (holders) watch.watchHolders(() => Promise.resolve(holders));
print({ kind: "ready" });
// Kept alive by this timer (the watch's own is unref'd) until the test ends this process.
setInterval(() => {}, 60_000);
