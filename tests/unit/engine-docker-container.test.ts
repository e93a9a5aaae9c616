// DockerContainer over a fake dockerode container: what it does to the hijacked streams.
import { PassThrough } from "node:stream";
import type Docker from "dockerode";
import { describe, expect, it } from "vitest";
import { DockerContainer } from "../../src/engine/docker-container.js";

/** A hijacked stream as dockerode returns it over TCP: a duplex with socket options. */
function hijacked() {
  const stream = new PassThrough() as PassThrough & { noDelay: boolean[]; setNoDelay: (on?: boolean) => void };
  stream.noDelay = [];
  stream.setNoDelay = (on = true) => void stream.noDelay.push(on);
  return stream;
}

describe("DockerContainer", () => {
  it("turns Nagle's algorithm off on attach and exec streams (small writes of the relay and of Pi's events go out at once on TCP engines)", async () => {
    const attached = hijacked();
    const execed = hijacked();
    const fake = {
      id: "c1",
      attach: async () => attached,
      exec: async () => ({ start: async () => execed, inspect: async () => ({ ExitCode: 0 }) }),
    } as unknown as Docker.Container;
    const container = new DockerContainer(fake);
    await container.attach();
    const session = await container.exec({ cmd: ["true"], user: "65532" });
    expect(attached.noDelay).toEqual([true]);
    expect(execed.noDelay).toEqual([true]);
    execed.end();
    await expect(session.exit).resolves.toBe(0);
  });
});
