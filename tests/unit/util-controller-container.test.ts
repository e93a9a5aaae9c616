// Whether the controller runs in a container (Docker-outside-of-Docker), from what the kernel shows
// (review, session 34). Not from /.dockerenv: this machine's own image carries one.
import { describe, expect, it } from "vitest";
import { containerFailure } from "../../src/run/container-failure.js";
import type { RunPlan } from "../../src/sandbox-contract.js";
import { controllerContainerEvidence } from "../../src/util/controller-container.js";

const files = (given: Record<string, string>) => (file: string) => given[file];
const HOST_ROOT = "26 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n";

describe("controllerContainerEvidence", () => {
  it("sees a container manager in pid 1's cgroups, or a container engine's overlay as the root", () => {
    expect(
      controllerContainerEvidence(files({ "/proc/1/cgroup": "9:name=systemd:/docker/76eb\n8:pids:/docker/76eb\n" })),
    ).toBe("its init's cgroup is /docker/76eb");
    expect(
      controllerContainerEvidence(files({ "/proc/1/cgroup": "0::/kubepods.slice/kubepods-besteffort.slice/x\n" })),
    ).toContain("kubepods");
    expect(
      controllerContainerEvidence(
        files({
          "/proc/1/cgroup": "0::/\n",
          "/proc/self/mountinfo":
            "86 59 0:40 / / rw,relatime master:3 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/Q,upperdir=/var/lib/docker/overlay2/d/diff\n",
        }),
      ),
    ).toBe("its root filesystem is a container engine's overlay");
  });

  it("sees none on a host (pid 1 at the cgroup root, the root a disk) or where nothing can be read", () => {
    expect(
      controllerContainerEvidence(
        files({ "/proc/1/cgroup": "9:name=systemd:/\n8:pids:/\n", "/proc/self/mountinfo": HOST_ROOT }),
      ),
    ).toBeUndefined();
    expect(
      controllerContainerEvidence(files({ "/proc/1/cgroup": "0::/init.scope\n", "/proc/self/mountinfo": HOST_ROOT })),
    ).toBeUndefined();
    expect(controllerContainerEvidence(files({}))).toBeUndefined();
  });
});

describe("a mount source the engine does not see", () => {
  it("is a usage error naming the path and the two ways out, not the engine's raw refusal", () => {
    const error = containerFailure(
      new Error(
        '(HTTP code 400) unexpected - invalid mount config for type "bind": bind source path does not exist: /srv/ws',
      ),
      { runtime: "runc", image: "i" } as RunPlan,
    );
    expect(error.code).toBe("usage");
    expect(error.shortMessage).toBe(
      "The engine does not see /srv/ws, which this controller sees: it mounts folders of its own host (sandbox-run in a container, on the host's docker socket?).",
    );
    expect(error.hint).toContain("--workspace copy");
  });
});
