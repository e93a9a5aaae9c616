// Filesystem escape: a hostile model drives Pi's bash, write and edit tools at host paths
// outside the mounted roots, through symlinks and hard links planted in the workspace, with `..`
// traversal and /proc tricks. Each test checks the HOST afterwards: nothing outside the roots
// changed, whatever the sandbox believes it wrote.
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { WARM_PATHS } from "../../src/sandbox-contract.js";
import { warmCalls, workspaceMode } from "../support/harness.js";
import {
  bash,
  describeOutcome,
  editFile,
  finish,
  hostileWorkspace,
  hostTmp,
  runHostile,
  treeSnapshot,
  useHostileModelServer,
  writeFile,
} from "../support/hostile-model.js";

const server = useHostileModelServer();

/** perl (in the image) setting a default ACL u::rwx,g::r-x,o::rwx on its argument: setxattr by number, no setfacl needed. */
const SET_DEFAULT_ACL = [
  'my $nr = (qx(uname -m) =~ /aarch64/) ? 5 : 188; sub e { pack("S<S<L<", @_) } my $U = 0xFFFFFFFF;',
  'my $acl = pack("L<", 2) . e(1, 7, $U) . e(4, 5, $U) . e(0x20, 7, $U);',
  'syscall($nr, my $p = $ARGV[0], my $n = "system.posix_acl_default", $acl, length($acl), 0) == 0 or die "setxattr: $!\\n";',
].join(" ");

const tag = () => crypto.randomBytes(4).toString("hex");

/**
 * A host directory outside the roots that anyone may write: if the boundary broke, the
 * sandbox's writes would land here (not fail on permissions) and the tamper check would see them.
 */
function outsideDir(files: Record<string, string>): string {
  const dir = hostileWorkspace(files, "sandbox-run-outside-");
  const open = (p: string) => {
    const st = fs.lstatSync(p);
    fs.chmodSync(p, st.isDirectory() ? 0o777 : 0o666);
    if (st.isDirectory()) for (const name of fs.readdirSync(p)) open(path.join(p, name));
  };
  open(dir);
  return dir;
}

describe.concurrent("filesystem escape", () => {
  it("writes to absolute host paths, to / and outside the roots never reach the host", async () => {
    const id = tag();
    const outside = outsideDir({ "canary.txt": "original\n" });
    const before = treeSnapshot(outside);
    const hostTargets = [
      `/sandbox-run-escape-${id}`,
      `/etc/sandbox-run-escape-${id}`,
      path.join(os.homedir(), `sandbox-run-escape-${id}`),
    ];
    const outcome = await runHostile(server, [
      bash(
        [
          `echo pwned > ${outside}/canary.txt; echo "canary rc=$?"`,
          `mkdir -p ${outside} && echo pwned > ${outside}/new.txt; echo "new rc=$?"`,
          ...hostTargets.map((t) => `echo pwned > ${t}; echo "${t} rc=$?"`),
          // /var/tmp is world-writable in the image: only the read-only root filesystem stops it.
          `echo pwned > /var/tmp/escape-${id}; echo "var-tmp rc=$?"`,
        ].join("\n"),
      ),
      writeFile(`${outside}/from-write-tool.txt`, "pwned"),
      writeFile(`/sandbox-run-escape-write-${id}`, "pwned"),
      editFile(`${outside}/canary.txt`, "original", "pwned"),
      finish(),
    ]);
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    // The attempts really ran: the root filesystem refused, and what "worked" went to the sandbox's own tmpfs.
    expect(outcome.toolResults[0]).toMatch(/var\/tmp\/escape-\w+: Read-only file system/);
    expect(outcome.toolResults[0]).toContain("new rc=0");
    expect(treeSnapshot(outside)).toEqual(before);
    for (const target of [...hostTargets, `/sandbox-run-escape-write-${id}`])
      expect(fs.existsSync(target), target).toBe(false);
  });

  it("symlinks planted in the workspace resolve inside the sandbox, so writes through them miss the host", async () => {
    const outside = outsideDir({ "canary.txt": "original\n", "dir/keep.txt": "keep\n" });
    const before = treeSnapshot(outside);
    const ws = hostileWorkspace({ "README.md": "repo\n" });
    fs.symlinkSync(path.join(outside, "canary.txt"), path.join(ws, "link-file"));
    fs.symlinkSync(path.join(outside, "dir"), path.join(ws, "link-dir"));
    fs.symlinkSync("/", path.join(ws, "link-root"));
    const outcome = await runHostile(
      server,
      [
        bash(
          [
            'echo pwned > link-file; echo "link-file rc=$?"',
            // Make the link targets exist inside the sandbox, then write through the links.
            `mkdir -p ${outside}/dir && echo pwned > link-dir/new.txt; echo "link-dir rc=$?"`,
            'echo pwned > link-file; echo "link-file-again rc=$?"',
            'echo pwned > link-root/escape-via-root-link; echo "link-root rc=$?"',
          ].join("\n"),
        ),
        writeFile("link-dir/from-write-tool.txt", "pwned"),
        editFile("link-file", "pwned", "edited"),
        finish(),
      ],
      { cwd: ws },
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    expect(outcome.toolResults[0]).toContain("link-dir rc=0");
    expect(outcome.toolResults[0]).toContain("link-root rc=1");
    expect(treeSnapshot(outside)).toEqual(before);
    expect(fs.existsSync("/escape-via-root-link")).toBe(false);
  });

  it("`..` traversal and /proc/1/root, /proc/self/cwd paths stay inside the sandbox", async () => {
    const id = tag();
    const outside = outsideDir({ "canary.txt": "original\n" });
    const before = treeSnapshot(outside);
    const ws = hostileWorkspace({ "a.txt": "a\n" });
    const up = "../".repeat(ws.split("/").length);
    const hostEscapes = [
      path.join(hostTmp(), `sandbox-run-escape-proc-root-${id}`),
      path.join(hostTmp(), `sandbox-run-escape-proc-cwd-${id}`),
    ];
    const outcome = await runHostile(
      server,
      [
        bash(
          [
            `mkdir -p ${outside}; echo original > ${outside}/canary.txt`,
            `echo pwned > /proc/1/root${hostEscapes[0]}; echo "proc-root rc=$?"`,
            `echo pwned > /proc/self/cwd/../${path.basename(hostEscapes[1]!)}; echo "proc-cwd rc=$?"`,
            "ls /proc/1/root/ | tr '\\n' ' '",
          ].join("\n"),
        ),
        writeFile(`${up}${outside.slice(1)}/traversal-write.txt`, "pwned"),
        // `..` out of the workspace to the outside tree's copy (a warm sandbox's workspace is /workspace).
        editFile(
          path.relative(warmCalls() ? WARM_PATHS.workspace : ws, path.join(outside, "canary.txt")),
          "original",
          "pwned",
        ),
        writeFile(`/proc/1/root${outside}/proc-root-write.txt`, "pwned"),
        bash(`cat ${outside}/canary.txt; ls ${outside}`),
        finish(),
      ],
      { cwd: ws },
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    expect(outcome.toolResults[0]).toContain("proc-root rc=0");
    // A warm sandbox's workspace is /workspace, whose parent is the read-only root: refused there.
    expect(outcome.toolResults[0]).toContain(warmCalls() ? "proc-cwd rc=1" : "proc-cwd rc=0");
    // Inside, the edit and writes "succeeded" on the sandbox's copy ...
    expect(outcome.toolResults[4]).toContain("pwned");
    expect(outcome.toolResults[4]).toContain("traversal-write.txt");
    // ... and the host is untouched.
    expect(treeSnapshot(outside)).toEqual(before);
    for (const target of hostEscapes) expect(fs.existsSync(target), target).toBe(false);
  });

  it("hard links: no new link to a file outside the mounts, and a planted one is not handed to the sandbox", async () => {
    const outside = hostileWorkspace({ "linked.txt": "original\n" }, "sandbox-run-outside-");
    fs.chmodSync(path.join(outside, "linked.txt"), 0o644);
    const ws = hostileWorkspace({ "own.txt": "own\n" });
    // The same inode inside the workspace and outside it (as `git clone --local` does with objects).
    fs.linkSync(path.join(outside, "linked.txt"), path.join(ws, "linked.txt"));
    const before = treeSnapshot(outside);
    const outcome = await runHostile(
      server,
      [
        bash(
          [
            'ln /etc/passwd passwd-link; echo "ln-passwd rc=$?"',
            'chmod 666 linked.txt; echo "chmod rc=$?"',
            'echo pwned >> linked.txt; echo "append rc=$?"',
          ].join("\n"),
        ),
        editFile("linked.txt", "original", "pwned"),
        finish(),
      ],
      { cwd: ws },
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    expect(outcome.toolResults[0]).toMatch(/ln-passwd rc=1/);
    expect(fs.existsSync(path.join(ws, "passwd-link"))).toBe(false);
    expect(treeSnapshot(outside)).toEqual(before);
    if (workspaceMode() === "bind") {
      // The linked file stayed the caller's: the sandbox could not even append to it.
      expect(outcome.toolResults[0]).toContain("append rc=1");
    } else {
      // Copy mode: the sandbox changed its own copy; the host got a new file, never a write
      // through the link.
      expect(outcome.toolResults[0]).toContain("append rc=0");
      expect(fs.readFileSync(path.join(ws, "linked.txt"), "utf8")).toBe("pwned\npwned\n");
      expect(fs.statSync(path.join(ws, "linked.txt")).ino).not.toBe(fs.statSync(path.join(outside, "linked.txt")).ino);
    }
  });

  it("a setuid/setgid binary: a bind-mode sandbox cannot make one (another local user would run it as the sandbox's uid), and none is handed back", async () => {
    const ws = hostileWorkspace();
    const outcome = await runHostile(
      server,
      [
        bash(
          "cp /bin/sh suid-sh && chmod 6755 suid-sh; stat -c '%a %U' suid-sh; " +
            "node -e \"require('fs').writeFileSync('made-suid', '#!/bin/sh', { mode: 0o4755 })\" 2>&1 | grep -o EPERM; " +
            "chmod 755 suid-sh && echo plain-chmod-ok; " +
            // A default POSIX ACL granting others write (an extended attribute, set through perl's syscall).
            `perl -e '${SET_DEFAULT_ACL}' . && echo acl-set`,
        ),
        finish(),
      ],
      { cwd: ws },
    );
    expect(outcome.error, describeOutcome(outcome)).toBeUndefined();
    if (workspaceMode() === "bind") {
      // The workspace is the host's own folder: the no-setuid filter refused every way to set the
      // bits (chmod, and open with the mode), and left ordinary modes alone.
      expect(outcome.toolResults[0]).toMatch(/Operation not permitted/);
      expect(outcome.toolResults[0]).toMatch(/^755 sandbox$/m);
      expect(outcome.toolResults[0]).toMatch(/^EPERM$/m);
      expect(outcome.toolResults[0]).toContain("plain-chmod-ok");
      expect(fs.existsSync(path.join(ws, "made-suid"))).toBe(false);
      // An ACL outlived the run unseen by the mode rules: setxattr answers as a file system without them.
      expect(outcome.toolResults[0]).toMatch(/setxattr: Operation not supported/);
      expect(outcome.toolResults[0]).not.toContain("acl-set");
    } else {
      // Copy mode: the tree lives in the sandbox, where the bits do nothing for anyone outside.
      expect(outcome.toolResults[0]).toMatch(/^6755 sandbox/);
    }
    // No ACL on the host's folder, whatever the mode (copy mode's tar carries none).
    const xattrs = spawnSync("python3", ["-c", "import os,sys; print(os.listxattr(sys.argv[1]))", ws], {
      encoding: "utf8",
    });
    expect(xattrs.stdout.trim()).toBe("[]");
    // The host got it back owned by the caller without the bits.
    const st = fs.statSync(path.join(ws, "suid-sh"));
    expect(st.uid).toBe(0);
    expect(st.mode & 0o6000).toBe(0);
  });

  it("a setgid, group-writable directory is a violation of its own (directory-modes), where one can be made", async () => {
    const ws = hostileWorkspace();
    const outcome = await runHostile(
      server,
      [bash("mkdir sgid-dir && chmod 2775 sgid-dir; stat -c '%a' sgid-dir"), finish()],
      { cwd: ws },
    );
    if (workspaceMode() === "bind") {
      // The no-setuid filter refuses the setgid bit in bind mode: nothing to judge.
      expect(outcome.toolResults[0], describeOutcome(outcome)).toMatch(/Operation not permitted/);
      expect(outcome.error, describeOutcome(outcome)).toBeUndefined();
      expect(fs.statSync(path.join(ws, "sgid-dir")).mode & 0o7000).toBe(0);
    } else {
      expect(outcome.toolResults[0], describeOutcome(outcome)).toMatch(/^2775/);
      expect(outcome.error?.code, describeOutcome(outcome)).toBe("policy-violation");
      expect(outcome.error?.message).toContain("sgid-dir (mode, directory-modes)");
      // Copy mode: the returned tree was refused whole; nothing of it reached the host.
      expect(fs.existsSync(path.join(ws, "sgid-dir"))).toBe(false);
    }
  });

  it("after the run, handing files back never follows a symlink the sandbox planted", async () => {
    // The controller runs as root here: it lends the workspace to the sandbox uid and chowns
    // everything back afterwards. A link the sandbox left must not redirect that chown.
    const outside = hostileWorkspace({ "victim.txt": "victim\n" }, "sandbox-run-outside-");
    fs.chownSync(outside, 4242, 4242);
    fs.chownSync(path.join(outside, "victim.txt"), 4242, 4242);
    const before = treeSnapshot(outside);
    const ws = hostileWorkspace();
    const outcome = await runHostile(
      server,
      [
        bash(
          `ln -s ${outside} dir-link && ln -s ${outside}/victim.txt file-link && mkdir sub && ln -s /etc sub/etc-link; echo rc=$?`,
        ),
        finish(),
      ],
      { cwd: ws },
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    expect(outcome.toolResults[0]).toContain("rc=0");
    expect(fs.lstatSync(path.join(ws, "dir-link")).isSymbolicLink()).toBe(true);
    expect(treeSnapshot(outside)).toEqual(before);
    expect(fs.statSync("/etc").uid).toBe(0);
  });
});
