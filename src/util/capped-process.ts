// A child process waited for without blocking the event loop: its stdout kept up to a cap and its
// run bounded in time, its stderr kept in part. The host's git (util/host-git.ts) and the record's
// diff of two folders (record/workspace-patch.ts) run through it.
import { spawn } from "node:child_process";

export interface CappedProcessOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  input?: string | Buffer;
  /** Open fds the child gets as fd 3, 4, ... */
  fds?: readonly number[];
  /** The command is killed past it (and the call rejects); no bound without it. */
  timeoutMs?: number;
  /** The command is killed past it (and the call rejects with OutputCapError). */
  maxOutputBytes: number;
  /** The command is killed once it aborts (and the call rejects). */
  signal?: AbortSignal;
}

export interface CappedProcessResult {
  status: number | null;
  stdout: Buffer;
  stderr: string;
}

/** The command wrote more than its cap (it was killed). */
export class OutputCapError extends Error {}

/**
 * Runs `command args`; rejects when it cannot start, runs too long or writes too much (`what`
 * names it in those messages), never for a non-zero exit (the caller judges it).
 */
export function runCappedProcess(
  command: string,
  args: readonly string[],
  options: CappedProcessOptions,
  what = command,
): Promise<CappedProcessResult> {
  return new Promise((resolve, reject) => {
    if (options.signal?.aborted) return reject(new Error(`${what} was stopped before it started`));
    const started = performance.now();
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env,
      stdio: ["pipe", "pipe", "pipe", ...(options.fds ?? [])],
    });
    const out: Buffer[] = [];
    let outBytes = 0;
    let stderr = "";
    let failure: Error | undefined;
    const { timeoutMs } = options;
    const tooLong = () => new Error(`${what} took longer than ${Math.round((timeoutMs ?? 0) / 1000)} s`);
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            failure ??= tooLong();
            child.kill("SIGKILL");
          }, timeoutMs);
    child.stdout!.on("data", (chunk: Buffer) => {
      outBytes += chunk.length;
      if (outBytes > options.maxOutputBytes) {
        failure ??= new OutputCapError(`${what} wrote more than ${options.maxOutputBytes / 1048576} MiB`);
        child.kill("SIGKILL");
      } else out.push(chunk);
    });
    child.stderr!.on("data", (chunk: Buffer) => {
      if (stderr.length < 64 * 1024) stderr += chunk.toString("utf8");
    });
    const onAbort = () => {
      failure ??= new Error(`${what} was stopped`);
      child.kill("SIGKILL");
    };
    options.signal?.addEventListener("abort", onAbort, { once: true });
    child.on("error", (error) => {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      reject(error);
    });
    child.on("close", (status) => {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      // The deadline is judged by the clock, not by which event a busy loop handled first: a
      // command that ran past it fails even when its exit was seen before the timer fired.
      if (timeoutMs !== undefined && performance.now() - started >= timeoutMs) failure ??= tooLong();
      if (failure) reject(failure);
      else resolve({ status, stdout: Buffer.concat(out), stderr });
    });
    // A command that exits before reading all of its input (an error) must not crash us with EPIPE.
    child.stdin!.on("error", () => {});
    child.stdin!.end(options.input ?? "");
  });
}
