// A bind-mode run's judgement and restore as an unprivileged uid, for tests of a non-root caller
// (its sandbox runs as its uid, so it owns the folders the run makes and may `chmod 555` them; root
// writes in any folder, so only another uid sees what that does).
//
// Protocol: argv[2] is JSON { root, stateDir }; it prints {"kind":"ready"} once the watch has its
// snapshot (the test then makes the run's changes), waits for a line on stdin, then judges the tree
// and prints {"kind":"done","report":...}.
import readline from "node:readline";
import { WorkspaceWatch } from "../../src/workspace/workspace-watch.js";

const spec = JSON.parse(process.argv[2] ?? "{}") as { root: string; stateDir: string };
const print = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);
const watch = await WorkspaceWatch.start({
  workspace: spec.root,
  workspaceWritable: true,
  writableRoots: [],
  protectedPaths: [],
  stateDir: spec.stateDir,
});
print({ kind: "ready" });
await new Promise<void>((resolve) => readline.createInterface({ input: process.stdin }).once("line", () => resolve()));
print({ kind: "done", report: await watch.finish() });
process.exit(0);
