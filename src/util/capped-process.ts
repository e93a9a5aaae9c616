// A child process waited for without blocking the event loop: its stdout kept up to a cap and its
// run bounded in time, its stderr kept in part. The host's git (util/host-git.ts) and the record's
// diff of two folders (record/workspace-patch.ts) run through it.
import { spawn } from "node:child_process";
import fs from "node:fs";

/**
 * coreutils' `timeout`, when this host has it. A bounded command runs under it, so its deadline
 * holds without us: a controller killed while the host's git checked a sandbox's pack left that
 * `git index-pack` running for as long as the pack made it (review, session 35: 675 s and still
 * going, next to gc's own check). Ours kills it first; theirs kills it once we are gone.
 */
const TIMEOUT_PROGRAM = lazyTimeoutProgram();
/** Past our own deadline: ours fires first and says why. */
const TIMEOUT_GRACE_S = 5;

function lazyTimeoutProgram(): () => string | undefined {
  let found: string | undefined | null = null;
  return () => {
    if (found === null)
      found = ["/usr/bin/timeout", "/bin/timeout"].find((file) => {
        try {
          fs.accessSync(file, fs.constants.X_OK);
          return true;
        } catch {
          return false;
        }
      });
    return found;
  };
}

/** What `timeout` could not run, as the spawn error the command itself would have given (its C-locale words). */
const EXEC_ERRORS: ReadonlyArray<[RegExp, string]> = [
  [/No such file or directory/, "ENOENT"],
  [/Permission denied/, "EACCES"],
  [/Resource temporarily unavailable/, "EAGAIN"],
  [/Cannot allocate memory/, "ENOMEM"],
  [/Too many open files in system/, "ENFILE"],
  [/Too many open files/, "EMFILE"],
];

/** A spawn error for `timeout`'s own "failed to run command" or "fork system call failed" (exit 125-127). */
function execError(status: number | null, stderr: string, command: string): NodeJS.ErrnoException | undefined {
  if (status === null || status < 125 || status > 127) return undefined;
  const said = /^(?:\S*\/)?timeout: (?:failed to run command .*|fork system call failed): (.*)$/m.exec(stderr);
  if (!said) return undefined;
  const code = EXEC_ERRORS.find(([words]) => words.test(said[1]!))?.[1] ?? "EIO";
  return Object.assign(new Error(`spawn ${command} ${code}`), { code, syscall: `spawn ${command}`, path: command });
}

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
    const { timeoutMs } = options;
    const bound = timeoutMs === undefined ? undefined : TIMEOUT_PROGRAM();
    // Under `timeout` (the leader of a process group of its own) the command's deadline holds if we die.
    const child = bound
      ? spawn(bound, ["-s", "KILL", `${Math.ceil(timeoutMs! / 1000) + TIMEOUT_GRACE_S}s`, command, ...args], {
          cwd: options.cwd,
          env: options.env,
          stdio: ["pipe", "pipe", "pipe", ...(options.fds ?? [])],
        })
      : spawn(command, args, {
          cwd: options.cwd,
          env: options.env,
          stdio: ["pipe", "pipe", "pipe", ...(options.fds ?? [])],
        });
    const kill = () => {
      // The group: killing `timeout` alone would leave the command running.
      if (bound && child.pid !== undefined)
        try {
          process.kill(-child.pid, "SIGKILL");
          return;
        } catch {}
      child.kill("SIGKILL");
    };
    const out: Buffer[] = [];
    let outBytes = 0;
    let stderr = "";
    let failure: Error | undefined;
    const tooLong = () => new Error(`${what} took longer than ${Math.round((timeoutMs ?? 0) / 1000)} s`);
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            failure ??= tooLong();
            kill();
          }, timeoutMs);
    child.stdout!.on("data", (chunk: Buffer) => {
      outBytes += chunk.length;
      if (outBytes > options.maxOutputBytes) {
        failure ??= new OutputCapError(`${what} wrote more than ${options.maxOutputBytes / 1048576} MiB`);
        kill();
      } else out.push(chunk);
    });
    child.stderr!.on("data", (chunk: Buffer) => {
      if (stderr.length < 64 * 1024) stderr += chunk.toString("utf8");
    });
    const onAbort = () => {
      failure ??= new Error(`${what} was stopped`);
      kill();
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
      // The command could not be started under `timeout`: the spawn error it would have had alone.
      if (bound && !failure) failure = execError(status, stderr, command);
      if (failure) reject(failure);
      else resolve({ status, stdout: Buffer.concat(out), stderr });
    });
    // A command that exits before reading all of its input (an error) must not crash us with EPIPE.
    child.stdin!.on("error", () => {});
    child.stdin!.end(options.input ?? "");
  });
}
