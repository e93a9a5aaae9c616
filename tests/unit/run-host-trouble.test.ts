// A host resource a run did not get (a full disk, a quota, a read-only filesystem, too many open
// files, its folder removed from under it) is a usage error naming it and what to do, not "a bug in
// sandbox-run" (review, session 32). On a real full tmpfs too: what the host started to write for a
// run (its folder's marker, its hold file) is not left behind, so nothing waits on it for good.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { SandboxRunError } from "../../src/errors.js";
import { hostTroubleError } from "../../src/run/host-trouble.js";
import { createRunDir, runDirsParent } from "../../src/run/run-dirs.js";
import { holdTreesOnHost } from "../../src/run/tree-hold-files.js";

const errno = (code: string, syscall: string, where?: string) =>
  Object.assign(new Error(`${code}: failed, ${syscall}${where ? ` '${where}'` : ""}`), {
    code,
    syscall,
    ...(where ? { path: where } : {}),
  });

describe("hostTroubleError", () => {
  it("a full disk: names the call and the path, and says where to free space", () => {
    const error = hostTroubleError(errno("ENOSPC", "write", "/tmp/sandbox-run-0/run-x/lease.json"))!;
    expect(error.code).toBe("usage");
    expect(error.shortMessage).toBe("The host ran out of disk space (write /tmp/sandbox-run-0/run-x/lease.json).");
    expect(error.hint).toBe(
      "Free space on the filesystem holding /tmp/sandbox-run-0/run-x (or point TMPDIR at one with room), then run again.",
    );
  });

  it("too many open files, a quota, a read-only filesystem: each says what to do", () => {
    expect(hostTroubleError(errno("EMFILE", "open", "/x/y"))!.hint).toBe(
      "Raise the limit of open files (`ulimit -n 4096`), then run again.",
    );
    expect(hostTroubleError(errno("EDQUOT", "write"))!.shortMessage).toBe(
      "The host ran out of its disk quota (write).",
    );
    expect(hostTroubleError(errno("EROFS", "mkdir", "/ro/sandbox-run-0"))!.hint).toBe(
      "/ro is on a read-only filesystem: point TMPDIR at a writable folder, then run again.",
    );
  });

  it("ENOENT inside the run folders' parent once that parent is gone: the run's folder was removed during the run", () => {
    const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-trouble-"));
    fs.rmSync(tmpDir, { recursive: true });
    const inside = path.join(runDirsParent(tmpDir), "run-x", "staging");
    const error = hostTroubleError(errno("ENOENT", "open", inside), tmpDir)!;
    expect(error.shortMessage).toBe(
      `The run's folder in ${tmpDir} was removed while the run went on (open ${inside}).`,
    );
    expect(error.hint).toMatch(/^Keep .* while runs go on/);
  });

  it("leaves everything else alone: a missing file elsewhere, an error without a system call, one that already says what it is", () => {
    expect(hostTroubleError(errno("ENOENT", "open", "/etc/nope"))).toBeUndefined();
    expect(hostTroubleError(Object.assign(new Error("x"), { code: "ENOSPC" }))).toBeUndefined();
    expect(hostTroubleError(new SandboxRunError("limit", "The disk limit tripped."))).toBeUndefined();
    expect(hostTroubleError("ENOSPC")).toBeUndefined();
  });
});

describe("on a full TMPDIR (a real tmpfs)", () => {
  const mounts: string[] = [];
  afterEach(() => {
    for (const m of mounts.splice(0)) {
      spawnSync("umount", [m]);
      fs.rmSync(m, { recursive: true, force: true });
    }
  });
  function fullTmpDir(): string {
    expect(process.geteuid?.(), "mount needs root (the unit tests run as root here and on CI)").toBe(0);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-full-"));
    expect(spawnSync("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", dir]).status).toBe(0);
    mounts.push(dir);
    fs.mkdirSync(runDirsParent(dir), { mode: 0o700 });
    const fill = fs.openSync(path.join(dir, "fill"), "w");
    try {
      for (;;) fs.writeSync(fill, Buffer.alloc(4096));
    } catch (error) {
      expect((error as NodeJS.ErrnoException).code).toBe("ENOSPC");
    } finally {
      fs.closeSync(fill);
    }
    return dir;
  }

  it("a run folder whose marker cannot be written is not left (gc could never read its owner)", () => {
    const tmpDir = fullTmpDir();
    const failure = (() => {
      try {
        createRunDir("full1", tmpDir);
      } catch (error) {
        return error;
      }
    })();
    expect(hostTroubleError(failure, tmpDir)?.shortMessage).toMatch(/^The host ran out of disk space \(write/);
    expect(fs.readdirSync(runDirsParent(tmpDir))).toEqual([]);
  });

  it("a hold file that cannot be written is not left, and the trees are free again", async () => {
    const tmpDir = fullTmpDir();
    const tree = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-held-"));
    try {
      const held = holdTreesOnHost({ runId: "full2", writable: [tree], readOnly: [] }, { tmpDir });
      await expect(held).rejects.toMatchObject({ code: "ENOSPC" });
      expect(fs.readdirSync(runDirsParent(tmpDir))).toEqual([]);
      // Held in this process no more: another run over the same tree (with room now) goes at once.
      fs.rmSync(path.join(tmpDir, "fill"));
      const again = await holdTreesOnHost({ runId: "full3", writable: [tree], readOnly: [] }, { tmpDir });
      again.release();
    } finally {
      fs.rmSync(tree, { recursive: true, force: true });
    }
  });
});
