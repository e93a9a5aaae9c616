// Everything a test run creates under os.tmpdir() (workspaces, run folders, records) lands in one
// folder of that run, removed at its end: nothing is left in /tmp, even by a test that forgets to
// clean up or a worker that dies. Workers inherit TMPDIR from the global set-up that calls this.
// One vitest invocation may run several projects, each calling it from its global set-up in the
// same process: they share one folder, made by the first and removed after the last.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

interface SharedTestTmp {
  dir: string;
  hostTmp: string;
  users: number;
}

const SHARED = Symbol.for("sandbox-run.test-tmp");
const holder = globalThis as { [SHARED]?: SharedTestTmp };

/** Points TMPDIR at this run's folder (made by the first caller); the returned function lets go of it. */
export function useTestTmp(): () => void {
  let shared = holder[SHARED];
  if (!shared) {
    const hostTmp = os.tmpdir();
    shared = { dir: fs.mkdtempSync(path.join(hostTmp, "sandbox-run-tests-")), hostTmp, users: 0 };
    holder[SHARED] = shared;
    process.env.TMPDIR = shared.dir;
    // The adversarial tests need sibling folders directly in the host's temp dir (see hostile-model.ts).
    process.env.SANDBOX_RUN_TESTS_HOST_TMP = hostTmp;
  }
  shared.users++;
  let released = false;
  return () => {
    if (released || !shared) return;
    released = true;
    shared.users--;
    if (shared.users > 0) return;
    fs.rmSync(shared.dir, { recursive: true, force: true });
    process.env.TMPDIR = shared.hostTmp;
    delete holder[SHARED];
  };
}
