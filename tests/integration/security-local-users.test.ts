// Other local users are attackers too (issue 10, item 1): a root controller reaps run folders, so a
// folder someone else planted, or a directory swapped for a symlink while a delete runs, must never
// make it delete anything outside its own run folders. Needs root (CI runs as root) and setpriv.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { isSandboxRunError } from "../../src/errors.js";
import { reapRunDirs } from "../../src/run/reap-run-dirs.js";
import { createRunDir, RUN_DIR_MARKER, runDirsParent } from "../../src/run/run-dirs.js";
import { runBuiltCli } from "../support/harness.js";

const ATTACKER = 1500;
const hostTmp = process.env.SANDBOX_RUN_TESTS_HOST_TMP ?? os.tmpdir();
const scratch: string[] = [];
afterEach(() => {
  for (const dir of scratch.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** A shared temp folder like /tmp: world-writable and sticky. */
function sharedTmp(): string {
  const dir = fs.mkdtempSync(path.join(hostTmp, "sandbox-run-local-users-"));
  fs.chmodSync(dir, 0o1777);
  scratch.push(dir);
  return dir;
}

/** A root-only folder elsewhere on the host with a file in it: what the attacker wants deleted. */
function victim(): { dir: string; file: string } {
  const dir = fs.mkdtempSync(path.join(hostTmp, "sandbox-run-victim-"));
  fs.chmodSync(dir, 0o700);
  scratch.push(dir);
  const file = path.join(dir, "precious.txt");
  fs.writeFileSync(file, "root's data\n");
  return { dir, file };
}

function asAttacker(script: string) {
  const child = spawn(
    "setpriv",
    ["--reuid", String(ATTACKER), "--regid", String(ATTACKER), "--clear-groups", "sh", "-c", script],
    {
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  const stop = async () => {
    child.kill("SIGKILL");
    await exited;
  };
  return { stop, exited };
}

/** The pid of a process that has exited. */
function deadPid(): number {
  let pid = 999_999;
  while (fs.existsSync(`/proc/${pid}`)) pid--;
  return pid;
}

describe("another local user", () => {
  it("cannot make the root reaper delete a file elsewhere: a planted run folder whose directory races with a symlink is never touched", async () => {
    const base = sharedTmp();
    const { dir: victimDir, file } = victim();
    // Planted as the old layout looked (a sandbox-run-* folder with a dead owner), and inside the
    // place the per-user parent would be if the attacker could write there (they cannot: 0700).
    const planted = path.join(base, "sandbox-run-planted");
    const attacker = asAttacker(
      [
        `mkdir -p ${planted}/sub && printf '${deadPid()}\\n${os.hostname()}\\n' > ${planted}/${RUN_DIR_MARKER}`,
        `touch ${planted}/sub/a ${planted}/sub/b`,
        "touch ready.flag 2>/dev/null",
        `while true; do rm -rf ${planted}/sub; ln -s ${victimDir} ${planted}/sub; rm -f ${planted}/sub; mkdir ${planted}/sub; touch ${planted}/sub/x; done`,
      ].join("\n"),
    );
    try {
      // The reaper as every root run and `gc` call it, many times while the swap races.
      createRunDir("ours01", base);
      for (let i = 0; i < 300; i++) reapRunDirs(base);
      const gc = await runBuiltCli(["gc"], { env: { ...process.env, TMPDIR: base } });
      expect(gc.status, gc.stderr).toBe(0);
    } finally {
      await attacker.stop();
    }
    expect(fs.readFileSync(file, "utf8")).toBe("root's data\n");
    expect(fs.existsSync(planted)).toBe(true);
    // Our own live run folder was not reaped either.
    expect(fs.readdirSync(runDirsParent(base))).toEqual(["run-ours01"]);
  });

  it("a run-folder parent someone else created first is refused with a message that says so, and theirs is left alone", async () => {
    const base = sharedTmp();
    const parent = runDirsParent(base);
    const attacker = asAttacker(`mkdir -m 0700 ${parent} && touch ${parent}/theirs`);
    await attacker.exited;
    expect(fs.statSync(parent).uid).toBe(ATTACKER);
    const error = (() => {
      try {
        createRunDir("ours02", base);
      } catch (e) {
        return e;
      }
    })();
    expect(isSandboxRunError(error) && error.code).toBe("usage");
    expect((error as Error).message).toContain(`it is owned by uid ${ATTACKER}, not by this user (uid 0)`);
    const gc = await runBuiltCli(["gc"], { env: { ...process.env, TMPDIR: base } });
    expect(gc.status, gc.stderr).toBe(0);
    expect(fs.existsSync(path.join(parent, "theirs"))).toBe(true);
  });
});
