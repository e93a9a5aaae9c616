// Resource exhaustion: every limit of the policy holds against a hostile tool or model, the
// run fails with a SandboxRunError that names the limit, and the controller's own memory stays
// bounded whatever the sandbox prints. Small custom limits keep these runs quick.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { containersOfRuns, workspaceMode } from "../support/harness.js";
import {
  bash,
  describeOutcome,
  finish,
  hostilePolicy,
  hostileWorkspace,
  runHostile,
  spawnController,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();

/** Forks children until the kernel refuses, without bash's fork retries; kills them after. */
const FORK_UNTIL_REFUSED = `perl -e 'my @k; while (@k < 1000) { my $p = fork; if (!defined $p) { print "refused-after=", scalar(@k), " $!\\n"; last } if ($p == 0) { sleep 60; exit 0 } push @k, $p } print "forked=", scalar(@k), "\\n"; kill "KILL", @k; waitpid($_, 0) for @k;'`;

/** The controller, in its own process, may not grow with what the sandbox prints. */
const CONTROLLER_RSS_LIMIT_MB = 200;

describe.concurrent("resource exhaustion", () => {
  it("fork bomb: the pids limit stops it, and the run still ends with its result", async () => {
    const outcome = await runHostile(server, [bash(FORK_UNTIL_REFUSED), bash(":(){ :|:& };:"), finish()], {
      policy: hostilePolicy({ limits: { pids: 64, cpus: 0.5 } }),
      timeoutMs: 60_000,
    });
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    const refused = /refused-after=(\d+) Resource temporarily unavailable/.exec(outcome.toolResults[0] ?? "");
    expect(refused, outcome.toolResults[0]).not.toBeNull();
    expect(Number(refused![1])).toBeLessThan(64);
    expect(await containersOfRuns([outcome.runId])).toEqual([]);
  });

  it('memory hog: the OOM kill is reported as code "limit", limit "memory"', async () => {
    const outcome = await runHostile(
      server,
      [bash(`node -e 'const a = []; for (;;) a.push(Buffer.alloc(1 << 20, 1))'`), finish()],
      {
        policy: hostilePolicy({ limits: { memoryMb: 256 } }),
      },
    );
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("limit");
    expect(outcome.error?.limit).toBe("memory");
    expect(outcome.error?.shortMessage).toMatch(/memory limit/);
    expect(outcome.error?.hint).toMatch(/memoryMb/);
    expect(await containersOfRuns([outcome.runId])).toEqual([]);
  });

  it("disk fill: /tmp, home and /dev/shm stop at their size", async () => {
    const outcome = await runHostile(
      server,
      [
        bash(
          [
            "for d in /tmp $HOME /dev/shm; do dd if=/dev/zero of=$d/fill bs=1M count=200 2>&1 | grep -o 'No space left on device' | head -1; echo \"$d=$(du -m $d/fill | cut -f1)\"; rm -f $d/fill; done",
          ].join("\n"),
        ),
        finish(),
      ],
      { policy: hostilePolicy({ limits: { tmpMb: 16, homeMb: 8 } }) },
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    const printed = outcome.toolResults[0] ?? "";
    expect(printed.match(/No space left on device/g)?.length).toBe(3);
    expect(Number(/^\/tmp=(\d+)/m.exec(printed)?.[1])).toBeLessThanOrEqual(16);
    expect(Number(/^\/home\/sandbox=(\d+)/m.exec(printed)?.[1])).toBeLessThanOrEqual(8);
    expect(Number(/^\/dev\/shm=(\d+)/m.exec(printed)?.[1])).toBeLessThanOrEqual(64);
  });

  it("a tool printing hundreds of MB: Pi truncates what the model and the event stream get", async () => {
    const outcome = await runHostile(
      server,
      [bash("yes 'hostile output line' | head -c 200M; echo; echo last-line"), finish()],
      {
        policy: hostilePolicy({ limits: { tmpMb: 256, memoryMb: 768 } }),
      },
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    const printed = outcome.toolResults[0] ?? "";
    expect(printed).toContain("last-line");
    expect(printed).toMatch(/\[Showing lines \d+-\d+ of \d+/);
    expect(printed.length).toBeLessThan(100 * 1024);
    expect(JSON.stringify(outcome.events).length).toBeLessThan(32 * 1024 * 1024);
  });

  it("a tool printing hundreds of MB into a small /tmp: the run fails naming the tmpfs limit", async () => {
    const outcome = await runHostile(server, [bash("yes 'hostile output line' | head -c 200M"), finish()], {
      policy: hostilePolicy({ limits: { tmpMb: 16 } }),
    });
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("limit");
    expect(outcome.error?.limit).toBe("tmpfs");
    expect(outcome.error?.shortMessage).toMatch(/tmpfs size limit/);
    expect(outcome.error?.hint).toMatch(/tmpMb/);
  });

  // Code in the sandbox can write to the container's stdout (Pi's event stream) and stderr
  // through /proc/1/fd/1 and /2; both count against one output budget.
  it.each([
    ["the event stream (stdout)", `yes '{"type":"noise"}' | head -c 64M > /proc/1/fd/1`],
    ["the container's stderr", "yes 'stderr noise' | head -c 64M > /proc/1/fd/2"],
  ])("output written straight to %s past maxOutputMb fails the run naming the output limit", async (_where, flood) => {
    const outcome = await runHostile(server, [bash(`${flood}; echo written`), finish()], {
      policy: hostilePolicy({ limits: { maxOutputMb: 8 } }),
    });
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("limit");
    expect(outcome.error?.limit).toBe("output");
    expect(outcome.error?.shortMessage).toMatch(/8 MiB output limit/);
    expect(await containersOfRuns([outcome.runId])).toEqual([]);
  });

  it("lines that are not Pi events, written into the stream, stop the run naming the records limit", async () => {
    const outcome = await runHostile(
      server,
      [bash("yes 'not a Pi event' | head -c 64M > /proc/1/fd/1; echo written"), finish()],
      {
        policy: hostilePolicy({ limits: { maxOutputMb: 256 } }),
      },
    );
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("limit");
    expect(outcome.error?.limit).toBe("records");
    expect(outcome.error?.shortMessage).toMatch(/more than 20 lines that are not Pi events/);
    expect(outcome.error?.hint).toMatch(/\/proc\/1\/fd\/1/);
    expect(outcome.events.filter((e) => e.type === "pi.invalid-record")).toHaveLength(20);
  });

  it("disk on the host: one file cannot pass the disk limit (EFBIG), and many files together cannot either (bind mode: limit disk; copy mode: its tmpfs is full)", async () => {
    const ws = hostileWorkspace();
    const policy = hostilePolicy({ limits: { diskMb: 64 } });
    // One file: fallocate of 4 GB is refused by RLIMIT_FSIZE at once; nothing of it reaches the host's disk.
    const one = await runHostile(
      server,
      [
        bash('fallocate -l 4G big.bin; echo "fallocate=$?"; head -c 100M /dev/zero > big2.bin; echo "head=$?"'),
        finish(),
      ],
      { cwd: ws, policy },
    );
    expect(one.details, describeOutcome(one)).toBeDefined();
    // SIGXFSZ ("File size limit exceeded") or EFBIG ("File too large"), never success.
    expect(one.toolResults[0]).not.toMatch(/fallocate=0/);
    expect(one.toolResults[0]).toMatch(/File size limit exceeded|File too large/);
    expect(fs.existsSync(path.join(ws, "big.bin")) ? fs.statSync(path.join(ws, "big.bin")).size : 0).toBe(0);
    expect(fs.statSync(path.join(ws, "big2.bin")).size).toBeLessThanOrEqual(64 * 1024 * 1024);
    fs.rmSync(path.join(ws, "big2.bin"), { force: true });
    // Many files, each under the limit: bind mode's watch of the tree trips the disk limit (given
    // time to notice); copy mode's tree is a tmpfs of the limit's size, which simply fills.
    const fill = "for i in $(seq 1 100); do head -c 1M /dev/urandom > f$i.bin; done";
    const many = await runHostile(server, [bash(workspaceMode() === "bind" ? `${fill}; sleep 30` : fill), finish()], {
      cwd: ws,
      policy,
    });
    if (workspaceMode() === "bind") {
      expect(many.error?.code, describeOutcome(many)).toBe("limit");
      expect(many.error?.limit).toBe("disk");
      expect(many.error?.shortMessage).toMatch(/over the 64 MiB disk limit/);
      expect(many.error?.hint).toMatch(/limits\.diskMb/);
    } else {
      expect(many.details, describeOutcome(many)).toBeDefined();
      expect(many.toolResults[0]).toMatch(/No space left on device/);
      const bytes = fs.readdirSync(ws).reduce((sum, name) => sum + fs.statSync(path.join(ws, name)).size, 0);
      expect(bytes).toBeGreaterThan(0);
      expect(bytes).toBeLessThanOrEqual(64 * 1024 * 1024);
    }
  });

  it("a model that streams forever: the run times out and says so", async () => {
    const outcome = await runHostile(server, [{ endless: true }], { timeoutMs: 3_000 });
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("timeout");
    expect(outcome.error?.timedOut).toBe(true);
    expect(outcome.error?.shortMessage).toMatch(/did not finish within 3 s/);
    expect(outcome.error?.hint).toMatch(/timeout/i);
    expect(await containersOfRuns([outcome.runId])).toEqual([]);
  });

  it("a run that never ends: the timeout stops it and removes the container", async () => {
    const outcome = await runHostile(server, [bash("sleep 3600"), finish()], { timeoutMs: 3_000 });
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("timeout");
    expect(outcome.error?.shortMessage).toMatch(/did not finish within 3 s/);
    expect(await containersOfRuns([outcome.runId])).toEqual([]);
  });
});

// These two measure the controller's peak RSS, so each runs alone in a child process.
describe("controller memory", () => {
  it(`a JSONL line of 300 MB fails the run naming the line limit before the line ends, and the controller stays under ${CONTROLLER_RSS_LIMIT_MB} MB`, async () => {
    // No LF ever follows, and the sandbox then sleeps past the 60 s timeout: only a line limit
    // that trips while the line is still arriving ends this run with code "limit".
    const controller = spawnController(
      server,
      [bash("head -c 300M /dev/zero | tr '\\0' x > /proc/1/fd/1; sleep 120"), finish()],
      {
        cwd: hostileWorkspace(),
        policy: hostilePolicy({ limits: { maxOutputMb: 2048, maxLineMb: 1 } }),
      },
    );
    const done = await controller.done;
    expect(done.error?.code, controller.stderr()).toBe("limit");
    expect(done.error?.limit).toBe("line");
    expect(done.error?.message).toMatch(/over the 1 MiB line limit/);
    expect(done.maxRssMb, `peaks in MB: ${JSON.stringify(done.memoryPeakMb)}`).toBeLessThan(CONTROLLER_RSS_LIMIT_MB);
  });

  it(`a sandbox printing ~1 GB of well-formed events into the stream: the run completes and the controller stays under ${CONTROLLER_RSS_LIMIT_MB} MB`, async () => {
    // 64 KiB records, parsed and delivered as events one by one; none of it may accumulate.
    const record = `'{"type":"noise","pad":"'"$(head -c 65500 /dev/zero | tr '\\0' x)"'"}'`;
    const controller = spawnController(
      server,
      [bash(`yes ${record} | head -c 1G > /proc/1/fd/1; echo printed`), finish()],
      {
        cwd: hostileWorkspace(),
        policy: hostilePolicy({ limits: { maxOutputMb: 2048, maxLineMb: 1 } }),
        timeoutMs: 110_000,
      },
    );
    const done = await controller.done;
    expect(done.ok, `${JSON.stringify(done)}\n${controller.stderr()}`).toBe(true);
    expect(done.result).toEqual({ done: true });
    expect(done.maxRssMb, `peaks in MB: ${JSON.stringify(done.memoryPeakMb)}`).toBeLessThan(CONTROLLER_RSS_LIMIT_MB);
  });
});
