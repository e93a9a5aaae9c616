// Node built-ins that modules on every CLI call's path use only now and then, loaded at their first
// use: `child_process` (which loads `dgram` and more, ~3-8 ms of CPU) was loaded by every call that
// only plans, `--dry-run` among them (docs/performance.md §9), though a plan runs no command.
import { createRequire } from "node:module";

const load = createRequire(import.meta.url);

export const childProcess = (): typeof import("node:child_process") => load("node:child_process");
