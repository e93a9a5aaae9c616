// Whether this process runs inside a container (Docker-outside-of-Docker: a CI job, a devcontainer
// with the host's docker socket mounted). An engine reached through that socket resolves bind-mount
// sources on its own host, not in this container: the sandbox got another host folder than the one
// the controller checked and handed back, and the run said it succeeded (review, session 34). So
// such a controller's runs default to copy mode (run/plan/prepare-plan.ts).
//
// Told from what the kernel shows, not from /.dockerenv (some hosts' images carry one: this
// machine's does): the cgroup paths of pid 1 (cgroup v1, or v2 without its own namespace) name a
// container manager, or the root filesystem is an overlay in a container engine's storage.
import fs from "node:fs";

const CONTAINER_CGROUP = /\/(docker|kubepods|containerd|libpod|lxc|actions_job|buildkit)[/.-]/;
const CONTAINER_STORAGE = /(\/var\/lib\/(docker|containers|containerd)\/|io\.containerd\.snapshotter)/;

/** What shows this process runs in a container, or undefined (from the files given, for tests). */
export function controllerContainerEvidence(
  read: (file: string) => string | undefined = readSmall,
): string | undefined {
  const cgroup = read("/proc/1/cgroup");
  const line = cgroup?.split("\n").find((l) => CONTAINER_CGROUP.test(l.slice(l.indexOf(":", l.indexOf(":") + 1) + 1)));
  if (line) return `its init's cgroup is ${line.slice(line.indexOf(":", line.indexOf(":") + 1) + 1)}`;
  const root = read("/proc/self/mountinfo")
    ?.split("\n")
    .find((l) => l.split(" ")[4] === "/");
  if (root && / - overlay /.test(root) && CONTAINER_STORAGE.test(root))
    return "its root filesystem is a container engine's overlay";
  return undefined;
}

let cached: { evidence: string | undefined } | undefined;

/** controllerContainerEvidence for this process, read once. */
export function controllerContainer(): string | undefined {
  cached ??= { evidence: controllerContainerEvidence() };
  return cached.evidence;
}

function readSmall(file: string): string | undefined {
  try {
    return fs.readFileSync(file, "utf8").slice(0, 1 << 20);
  } catch {
    return undefined;
  }
}
