// Everything a test run creates under os.tmpdir() (workspaces, run folders, records) lands in one
// folder of that run, removed at its end: nothing is left in /tmp, even by a test that forgets to
// clean up or a worker that dies. Workers inherit TMPDIR from the global set-up that calls this.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

/** Points TMPDIR at a fresh folder; the returned function removes it. */
export function useTestTmp(): () => void {
  const hostTmp = os.tmpdir();
  const testTmp = fs.mkdtempSync(path.join(hostTmp, "sandbox-run-tests-"));
  process.env.TMPDIR = testTmp;
  // The adversarial tests need sibling folders directly in the host's temp dir (see hostile-model.ts).
  process.env.SANDBOX_RUN_TESTS_HOST_TMP = hostTmp;
  return () => fs.rmSync(testTmp, { recursive: true, force: true });
}
