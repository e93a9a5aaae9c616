// What the controller itself needs from the machine it runs on. Its host-side file handling never
// follows a path the sandbox could have shaped: every walk and write goes through directory file
// descriptors, reached as /proc/self/fd/<fd>/<name> because Node has no openat(2) (host-dir.ts,
// workspace/fd-walk.ts). That is Linux's /proc: on macOS or Windows there is none, so the
// controller runs on Linux (WSL 2, a Linux VM or container) and the engine may be anywhere.
import fs from "node:fs";
import { SandboxRunError } from "../errors.js";
import { nodeTooOld } from "./node-version.js";

export function controllerHostProblem(
  hostOs: string = process.platform,
  hasProcFd: () => boolean = () => fs.existsSync("/proc/self/fd"),
): SandboxRunError | undefined {
  if (hostOs === "linux" && hasProcFd()) return undefined;
  return new SandboxRunError(
    "docker-unavailable",
    `sandbox-run's controller needs Linux: its no-follow file handling works through /proc/self/fd, which ${hostOs === "linux" ? "is not mounted here" : `${hostOs} does not have`}.`,
    {
      hint:
        hostOs === "linux"
          ? "Mount /proc (mount -t proc proc /proc)."
          : "Run sandbox-run inside WSL 2 (Windows) or a Linux VM or container (macOS) that reaches the engine; docs/platforms.md shows how.",
    },
  );
}

/**
 * A Node older than package.json's engines (node-version.ts): "docker-unavailable" as the other
 * problems of the controller's host are (the CLI's exit 3), with the install lines as its hint.
 */
export function nodeVersionProblem(version: string = process.versions.node): SandboxRunError | undefined {
  const old = nodeTooOld(version);
  if (!old) return undefined;
  return new SandboxRunError("docker-unavailable", `${old.message}.`, {
    hint: `${old.install.map((line) => line.replace(/^\((.*)\)$/, "$1")).join("; ")}.`,
  });
}
