// Copy mode's part of the run plan: the bind mounts a local run would have become copies into
// tmpfs mounts at the same paths, and no host path is mounted at all. The gateway and proxy
// sockets come through the relay instead (on a tmpfs of their own), protected paths are enforced on
// the returned tree instead of by read-only mounts, and the CA bundle is copied like a tree.
import path from "node:path";
import { type CopyRoot, IMAGE_PATHS, type Mount, READ_ONLY_OWNER_UID, SANDBOX_UID } from "../../sandbox-contract.js";

interface CopyModePlan {
  copies: CopyRoot[];
  tmpfs: Record<string, string>;
}

export function copyModePlan(mounts: readonly Mount[], diskMb: number): CopyModePlan {
  const copies: CopyRoot[] = [];
  const tmpfs: Record<string, string> = {
    // The relay's sockets (and the CA bundle); the sandbox's uid creates them.
    [IMAGE_PATHS.socketDir]: `rw,nosuid,nodev,noexec,size=8m,uid=${SANDBOX_UID},gid=${SANDBOX_UID},mode=0700`,
  };
  for (const mount of mounts) {
    if (mount.kind === "socket" || mount.kind === "protected") continue;
    const writable = (mount.kind === "workspace" || mount.kind === "writable-root") && !mount.readOnly;
    const kind =
      mount.kind === "workspace" || mount.kind === "writable-root" || mount.kind === "ca-bundle"
        ? mount.kind
        : "read-only";
    copies.push({ hostPath: mount.hostPath, containerPath: mount.containerPath, kind, writable });
    if (kind === "ca-bundle") {
      // A bundle outside the relay's folder (a run with secrets replaces the system bundle,
      // /etc/ssl/certs/ca-certificates.crt) needs a folder it can be copied into on the read-only
      // root: a small tmpfs over its folder, which then holds that bundle only (the complete trust
      // a run with secrets gets: the host's or Node's roots plus the run's CA).
      const folder = path.posix.dirname(mount.containerPath);
      if (folder !== IMAGE_PATHS.socketDir) {
        tmpfs[folder] = `rw,nosuid,nodev,noexec,size=8m,uid=${SANDBOX_UID},gid=${SANDBOX_UID},mode=0755`;
      }
      continue;
    }
    // exec: the workspace's scripts run as they would from a bind mount. A read-only tree belongs
    // to another uid than the sandbox's, so permissions alone keep the sandbox from changing it.
    const owner = writable ? SANDBOX_UID : READ_ONLY_OWNER_UID;
    tmpfs[mount.containerPath] = `rw,exec,nosuid,nodev,size=${diskMb}m,uid=${owner},gid=${owner},mode=0755`;
  }
  return { copies, tmpfs };
}
