// Prints the fd walk of a tree as JSON, for tests that must walk as an unprivileged uid
// (root reads every directory, so unreadable ones only show up for other users).
import { walkTree } from "../../src/workspace/fd-walk.js";

const root = process.argv[2] ?? ".";
const out = [...walkTree(root)].map((e) => `${e.kind}:${e.path}${e.problem ? ` !${e.problem}` : ""}`);
process.stdout.write(JSON.stringify(out));
