// The controller's memory and open files do not grow with what the sandbox sends its gateway: the
// run's controller is a process of its own, whose peak RSS and open files are measured. The
// gateway is reached through a bind-mounted socket in bind mode and through the relay in copy mode
// and warm calls, so this runs in every project.
import fs from "node:fs";
import { describe, expect, it } from "vitest";
import { gatewayFloodCommand } from "../support/gateway-flood.js";
import {
  bash,
  finish,
  hostilePolicy,
  hostileWorkspace,
  spawnController,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();

/** Issue 17: 64 unfinished posts took the controller to 1.9 GB. */
const GATEWAY_FLOOD_RSS_LIMIT_MB = 300;
/** The controller's open files during a flood: its own few dozen plus the gateway's bounded connections. */
const GATEWAY_FLOOD_FD_LIMIT = 400;

/** The most file descriptors `pid` had open while `until` was pending, sampled every 50 ms. */
async function peakFds(pid: number, until: Promise<unknown>): Promise<number> {
  let peak = 0;
  let done = false;
  void until.finally(() => (done = true));
  while (!done) {
    try {
      peak = Math.max(peak, fs.readdirSync(`/proc/${pid}/fd`).length);
    } catch {
      break; // the process is gone
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return peak;
}

describe("controller memory", () => {
  it(`64 unfinished 32 MiB posts, 3,000 connections and 200 liveness requests to the gateway: the controller stays under ${GATEWAY_FLOOD_RSS_LIMIT_MB} MB and ${GATEWAY_FLOOD_FD_LIMIT} open files, and the run completes`, async () => {
    const controller = spawnController(server, [bash(gatewayFloodCommand()), finish()], {
      cwd: hostileWorkspace(),
      policy: hostilePolicy({ limits: { maxOutputMb: 256 } }),
      timeoutMs: 110_000,
      // relay.stopped, limit.tripped, container.exited (oomKilled): when the run fails, the host's
      // side (a session that failed in a full run's copy mode ended with the sandbox's exit 91 alone).
      reportEvents: ["gateway.refused", "relay.stopped", "limit.tripped", "container.exited"],
    });
    const fds = peakFds(controller.child.pid!, controller.exited);
    // The flood reached the gateway, which turned it away (requests past its capacity: 503/429 "busy").
    const refused = await controller.event("gateway.refused");
    expect(refused.data.reason).toBe("busy");
    const done = await controller.done;
    const peak = await fds;
    const hostSide = controller.reported().filter((e) => e.type !== "gateway.refused");
    const details = `${JSON.stringify(done)}\nreported: ${JSON.stringify(hostSide)}\n${controller.stderr()}`;
    expect(done.ok, details).toBe(true);
    expect(done.result).toEqual({ done: true });
    expect(done.maxRssMb, `peaks in MB: ${JSON.stringify(done.memoryPeakMb)}`).toBeLessThan(GATEWAY_FLOOD_RSS_LIMIT_MB);
    expect(peak, details).toBeLessThan(GATEWAY_FLOOD_FD_LIMIT);
  });
});
