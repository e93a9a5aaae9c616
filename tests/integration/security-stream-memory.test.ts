// The controller's memory does not grow with what the sandbox prints into Pi's event stream: a
// 300 MB line, 512 MB of well-formed events (two and a half times the RSS bound: held, they fail it). Each run's controller is a process of its own, whose
// peak RSS is measured, one run at a time. The stream reader is the same code whichever way the
// workspace travels, so this file runs in the bind-mode project and over the remote engine's TLS
// link (integration-remote), not again in copy mode or with warm calls (vitest.config.ts).
import { describe, expect, it } from "vitest";
import {
  bash,
  finish,
  hostilePolicy,
  hostileWorkspace,
  spawnController,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();

/** The controller, in its own process, may not grow with what the sandbox prints. */
const CONTROLLER_RSS_LIMIT_MB = 200;

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

  it(`a sandbox printing 512 MB of well-formed events into the stream: the run completes and the controller stays under ${CONTROLLER_RSS_LIMIT_MB} MB`, async () => {
    // 64 KiB records, parsed and delivered as events one by one; none of it may accumulate.
    const record = `'{"type":"noise","pad":"'"$(head -c 65500 /dev/zero | tr '\\0' x)"'"}'`;
    const controller = spawnController(
      server,
      [bash(`yes ${record} | head -c 512M > /proc/1/fd/1; echo printed`), finish()],
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
