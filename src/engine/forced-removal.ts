// Removing a container by force, the one way every remover does it (a run, the warm pool, gc and
// the start-up reaper), within one deadline. The engine's answer decides what comes next:
// - gone (404, 304): done ("gone": someone else removed it, which a reaper must know);
// - 409, another removal under way (gc, a reaper, the run itself): wait until it is gone, so a
//   caller that goes on (reads the trees as final, counts containers) never finds it still there;
// - 5xx, the engine answered that it failed: try again while time is left. gVisor's sandbox on a
//   loaded host may not have reported its exit when Docker gives up waiting for it ("did not receive
//   an exit event"), or its mounts are still busy; the next attempt, a moment later, succeeds (CI,
//   session 31: one such answer failed a run and left its trees lent until gc);
// - no answer within the deadline: fails, saying so; any other failure is the caller's as it came.
import type Docker from "dockerode";
import { engineDeadline } from "./bounded-answers.js";

/** A removal that failed; `timedOut` when the engine gave no answer within the deadline. */
export class RemovalError extends Error {
  constructor(
    message: string,
    readonly timedOut: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "RemovalError";
  }
}

const MAX_REASON_CHARS = 500;
/** How long a container another remover has in hand is waited for (gc must not hang on one). */
const OTHER_REMOVAL_WAIT_MS = 10_000;
/** The pause before the next attempt after the engine answered that a removal failed. */
const RETRY_PAUSE_MS = 1_000;
/** A refusal that lasts this many attempts is the engine's answer (gc must not spend its minute on it). */
const MAX_ATTEMPTS = 5;
/** How long the last attempt needs at least; less time left than this and the failure stands. */
const LAST_ATTEMPT_MIN_MS = 2_000;

/** "removed" by this call, or "gone": not there, or removed by another remover meanwhile. */
export type Removal = "removed" | "gone";

export async function removeForcibly(container: Docker.Container, timeoutMs: number): Promise<Removal> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 1; ; attempt++) {
    const left = deadline - Date.now();
    const signal = engineDeadline(Math.max(left, 1));
    const failure = await container.remove({ force: true, v: true, abortSignal: signal } as object).then(
      () => undefined,
      (error: unknown) => error,
    );
    if (failure === undefined) return "removed";
    const status = (failure as { statusCode?: number })?.statusCode;
    if (status === 404 || status === 304) return "gone";
    // No answer in time: said so. Any other failure without a status (an answer past the byte cap,
    // a broken link) is the caller's as it came: gc stops reaping an engine that answers so.
    if (status === undefined && signal.aborted)
      throw new RemovalError(`the engine did not finish removing it within ${timeoutMs / 1000} s`, true, {
        cause: failure,
      });
    if (status === undefined) throw failure;
    if (status === 409) {
      await goneBy(container, Math.min(deadline, Date.now() + OTHER_REMOVAL_WAIT_MS));
      return "gone";
    }
    if (attempt >= MAX_ATTEMPTS || deadline - Date.now() < RETRY_PAUSE_MS + LAST_ATTEMPT_MIN_MS)
      throw new RemovalError(
        `the engine failed to remove it${attempt > 1 ? ` (${attempt} attempts)` : ""}: ${messageOf(failure)}`,
        false,
        { cause: failure },
      );
    await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
  }
}

/** Resolves once the engine no longer knows the container; rejects when it still does at the deadline. */
async function goneBy(container: Docker.Container, deadline: number): Promise<void> {
  const started = Date.now();
  while (Date.now() < deadline) {
    const gone = await container.inspect({ abortSignal: engineDeadline(Math.max(deadline - Date.now(), 1)) }).then(
      () => false,
      (error: unknown) => (error as { statusCode?: number })?.statusCode === 404,
    );
    if (gone) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new RemovalError(
    `another removal of it has been under way for ${Math.round((Date.now() - started) / 1000)} s and it is still there`,
    false,
  );
}

/** The engine's own words: dockerode puts them in `json.message`, its `message` adds the HTTP status. */
function messageOf(error: unknown): string {
  const json = (error as { json?: { message?: unknown } })?.json;
  const text =
    typeof json?.message === "string" && json.message
      ? json.message.trim()
      : String((error as Error)?.message ?? error);
  // An engine's answer is untrusted input; a reason is a line, not a page.
  return text.length > MAX_REASON_CHARS ? `${text.slice(0, MAX_REASON_CHARS)}...` : text;
}
