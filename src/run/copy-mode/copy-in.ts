// Copy in: fills a tmpfs in the running container from a tar the controller streams, with an exec
// of `tar -x --no-same-owner` as the uid the tree should belong to in there (the sandbox's for a
// writable tree, another one for a read-only tree). The Engine API's putArchive cannot be used:
// it refuses paths on a tmpfs when the root filesystem is read-only. Nothing of the sandbox runs
// yet (the launcher waits for the copy to finish), and the archive is our own.
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { EngineContainer } from "../../engine/engine.js";
import { SandboxRunError } from "../../errors.js";
import { IMAGE_PATHS } from "../../sandbox-contract.js";

interface CopyInTarget {
  /** Directory inside the container (a tmpfs at the tree's own path). */
  containerPath: string;
  /** "uid:gid" the files are created as. */
  user: string;
  /** What the message calls it: "the workspace /path", "the CA bundle" ... */
  what: string;
  /** The tmpfs's size, for the message when the tree does not fit. */
  sizeMb: number;
}

const STDERR_TAIL_CHARS = 2000;

export async function copyIn(
  container: EngineContainer,
  archive: Readable,
  target: CopyInTarget,
  signal?: AbortSignal,
): Promise<void> {
  const pending = await startCopyIn(container, target, signal);
  await pending.fill(archive);
}

/** A `tar -x` started in the container and waiting for its archive on stdin. */
export interface PendingCopyIn {
  /** Streams `archive` in; resolves once tar is done, rejects with a copy-in error. Once. */
  fill(archive: Readable): Promise<void>;
  /** Ends the exec without an archive (the sandbox is going away). */
  cancel(): void;
  /** Whether its link keeps this process alive (a warm sandbox's waiting copy must not). */
  holdProcess(hold: boolean): void;
}

/**
 * Starts the exec of `tar -x` now and streams the archive later: a warm sandbox's read-only trees
 * (owned by another uid than the relay's) get their exec when the sandbox is made, so the claim
 * only streams the tree. The exec reads nothing until then.
 */
export async function startCopyIn(
  container: EngineContainer,
  target: CopyInTarget,
  signal?: AbortSignal,
): Promise<PendingCopyIn> {
  const exec = await container.exec(
    {
      cmd: [IMAGE_PATHS.tar, "-x", "-f", "-", "-C", target.containerPath, "--no-same-owner", "-p"],
      user: target.user,
    },
    signal,
  );
  let stderr = "";
  exec.stderr.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString("utf8")).slice(-STDERR_TAIL_CHARS);
  });
  exec.stdout.resume();
  return {
    async fill(archive) {
      const sent = pipeline(archive, exec.stdin).then(
        () => undefined,
        (error: unknown) => error as Error,
      );
      const [failure, code] = await Promise.all([sent, exec.exit]);
      if (code !== 0 || failure) throw copyInFailure(target, code, stderr, failure);
    },
    cancel() {
      exec.stdin.destroy();
    },
    holdProcess(hold) {
      const socket = exec.stdin as unknown as { ref?: () => void; unref?: () => void };
      if (hold) socket.ref?.();
      else socket.unref?.();
    },
  };
}

/**
 * The same through the relay (images/pi/relay.mjs runs `tar -x` as the sandbox's uid): no exec
 * of its own, so a writable tree's copy costs no more than the data once the relay is up.
 */
export async function copyInThroughRelay(
  relay: { extract(root: string, archive: Readable): Promise<{ code: number | null; stderr: string }> },
  archive: Readable,
  target: Omit<CopyInTarget, "user">,
): Promise<void> {
  const status = await relay.extract(target.containerPath, archive);
  checkCopyInStatus(target, status);
}

/** Throws the copy-in error a tar status (as the relay reports it) means, if any. */
export function checkCopyInStatus(
  target: Omit<CopyInTarget, "user">,
  status: { code: number | null; stderr: string },
): void {
  if (status.code !== 0) throw copyInFailure(target, status.code, status.stderr);
}

function copyInFailure(
  target: Omit<CopyInTarget, "user">,
  code: number | null,
  stderr: string,
  failure?: Error,
): SandboxRunError {
  // The archive itself failed with an error of ours (the workspace changed while it was packed): that one.
  if (failure instanceof SandboxRunError) return failure;
  if (/No space left on device/i.test(stderr)) {
    return new SandboxRunError(
      "limit",
      `${capitalised(target.what)} does not fit the sandbox's copy of it (${target.sizeMb} MiB).`,
      {
        limit: "disk",
        hint: "Raise limits.diskMb in a policy file, or copy less (bind mode on a local engine copies nothing).",
        stderrTail: stderr,
      },
    );
  }
  const reason = code === 0 ? failure!.message : `tar exited with ${code}${failure ? ` (${failure.message})` : ""}`;
  return new SandboxRunError("agent-crashed", `Copying ${target.what} into the sandbox failed: ${reason}.`, {
    hint: "The stderr tail on this error says what tar reported.",
    stderrTail: stderr.trim() || undefined,
  });
}

function capitalised(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
