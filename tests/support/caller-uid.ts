// A non-root caller in unit tests: uid 1500 owns the tree, and "the sandbox" (a shell as that uid,
// as a non-root caller's bind-mode sandbox runs) changes it; the host side runs as that uid too.
import { execFileSync } from "node:child_process";

export const CALLER_UID = 1500;
/** setpriv's arguments to run as the caller, with no supplementary group. */
export const AS_CALLER = [`--reuid=${CALLER_UID}`, `--regid=${CALLER_UID}`, "--clear-groups"];

/** Gives `root` and everything in it to the caller. */
export function giveToCaller(root: string): string {
  execFileSync("chown", ["-R", `${CALLER_UID}:${CALLER_UID}`, root]);
  return root;
}

/** What the sandbox does: a shell command in `root` as the caller's uid. */
export function asCallersSandbox(root: string, command: string): void {
  execFileSync("setpriv", [...AS_CALLER, "sh", "-c", command], { cwd: root, stdio: "pipe" });
}
