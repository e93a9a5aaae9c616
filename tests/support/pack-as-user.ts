// Walks and packs a host tree as copy mode's copy-in does, printing what was left out and the
// archive's size as JSON, for tests that must run as an unprivileged uid (root reads every file).
import { walkHostTree } from "../../src/workspace-transfer/host-tree.js";
import { packTree } from "../../src/workspace-transfer/pack-tree.js";

const tree = await walkHostTree(process.argv[2] ?? ".");
let bytes = 0;
for await (const chunk of packTree(tree)) bytes += (chunk as Buffer).length;
process.stdout.write(JSON.stringify({ skipped: tree.skipped, sent: tree.entries.map((e) => e.path), bytes }));
