// What the host takes from an engine in answer to a request that is not a stream (lists,
// inspections, version, info, create, remove ...). An engine's answers are untrusted input, and
// docker-modem reads each of them whole before it hands it on (a ~300 MB `/containers/json` took
// `gc` to 1.3 GB) and waits for it without end (an engine that answers its ping and nothing after
// kept `gc` waiting forever). Here every such request of a dockerode client is made as a stream,
// read up to a byte cap as it arrives, and given a deadline unless its caller set one of its own
// (`engineDeadline`; a caller's cancel signal does not lift the default); callers get
// the results and errors docker-modem gives. Streams (attach, exec, build, pull, save, wait) are
// their callers' to read and bound (progress: progress-stream.ts).
import type { IncomingMessage } from "node:http";
import type Docker from "dockerode";
import { SandboxRunError } from "../errors.js";
import type { AnswerLimits } from "./answer-limits.js";

/**
 * The most the host reads of one answer. The largest real ones are the lists gc and image prune
 * ask for, filtered to sandbox-run's own: a container's summary is 1-4 KB, so this holds thousands.
 * The parsed JSON costs more than its text: a few times for real answers, ~30 times at worst (16 MiB
 * of `{},` parse to ~500 MB, measured): bounded, where docker-modem's reading was not.
 */
export const MAX_ENGINE_ANSWER_BYTES = 16 * 1024 * 1024;

/**
 * How long a request whose caller set no deadline of its own may take, connection, headers and
 * body together. A working engine answers these in well under a second; a loaded one (removing a
 * container whose processes die slowly) in seconds.
 */
export const ENGINE_ANSWER_TIMEOUT_MS = 30_000;

/** Signals made by `engineDeadline`: a request carrying one has that deadline instead of the default. */
const OWN_DEADLINES = new WeakSet<AbortSignal>();

/**
 * A deadline of a request's own, longer or shorter than ENGINE_ANSWER_TIMEOUT_MS (a removal that
 * waits on dying processes, a kill). Any other signal a caller passes is a cancel, not a deadline:
 * the default still applies beside it (a run's cancel signal may never fire).
 */
export function engineDeadline(ms: number): AbortSignal {
  const signal = AbortSignal.timeout(ms);
  OWN_DEADLINES.add(signal);
  return signal;
}

/** An engine that did not answer in time, or answered too much: it cannot be used as it is. */
export class EngineAnswerError extends SandboxRunError {}

interface DialOptions {
  path: string;
  method: string;
  isStream?: boolean;
  hijack?: boolean;
  openStdin?: boolean;
  abortSignal?: AbortSignal;
  /** The call's own options; dockerode leaves some calls' abortSignal here (image inspect). */
  options?: { abortSignal?: AbortSignal };
  statusCodes: Record<number, true | string>;
}

type Dial = (options: DialOptions, callback: (error: unknown, data?: unknown) => void) => void;

/**
 * docker-modem reads the body of a streamed answer whose status is not listed as expected whole
 * (to quote it in its error): every status is taken as expected, and judged here after a capped read.
 */
const EVERY_STATUS = new Proxy({} as Record<number, true>, { get: () => true });

/** Makes the client's non-stream requests bounded, for the engine `engine` names (its messages say which). */
export function boundAnswers(
  docker: Docker,
  engine: { name: string; address: string },
  limits: AnswerLimits = {},
): Docker {
  const modem = docker.modem as unknown as { dial: Dial };
  const dial: Dial = modem.dial.bind(modem);
  modem.dial = (options, callback) => {
    // A wait is answered when the container exits, however long it runs: not an answer to bound by
    // time (the product's own waits are streams read to a cap: container-wait.ts).
    if (options.isStream || options.hijack || options.openStdin || isWait(options)) return dial(options, callback);
    bounded(dial, options, engine, limits).then(
      (data) => callback(null, data),
      (error: unknown) => callback(error),
    );
  };
  return docker;
}

const isWait = (options: DialOptions) =>
  options.method === "POST" && /^\/containers\/[^/?]+\/wait(\?|$)/.test(options.path);

async function bounded(
  dial: Dial,
  options: DialOptions,
  engine: { name: string; address: string },
  limits: AnswerLimits,
): Promise<unknown> {
  const request = `${options.method} ${options.path.split("?")[0]}`;
  const ownSignal = options.abortSignal ?? options.options?.abortSignal;
  const timeoutMs = limits.timeoutMs ?? ENGINE_ANSWER_TIMEOUT_MS;
  const deadline = ownSignal && OWN_DEADLINES.has(ownSignal) ? undefined : new AbortController();
  const timer =
    deadline &&
    setTimeout(
      () =>
        deadline.abort(
          new EngineAnswerError(
            "docker-unavailable",
            `Engine "${engine.name}" at ${engine.address} did not answer ${request} within ${timeoutMs / 1000} s.`,
            { hint: "Check that the engine runs and answers (`docker version`), then run the command again." },
          ),
        ),
      timeoutMs,
    );
  const signal = !deadline ? ownSignal! : ownSignal ? AbortSignal.any([ownSignal, deadline.signal]) : deadline.signal;
  const maxBytes = limits.maxBytes ?? MAX_ENGINE_ANSWER_BYTES;
  const tooLarge = () =>
    new EngineAnswerError(
      "docker-unavailable",
      `Engine "${engine.name}" at ${engine.address} answered ${request} with more than ${maxBytes / 1024 / 1024} MiB; sandbox-run stopped reading it.`,
      {
        hint: "No Docker engine answers this request with that much: check that DOCKER_HOST (or the engines file) names the engine you mean.",
      },
    );
  try {
    const response = await new Promise<IncomingMessage>((resolve, reject) =>
      dial({ ...options, isStream: true, abortSignal: signal, statusCodes: EVERY_STATUS }, (error, res) =>
        error ? reject(error) : resolve(res as IncomingMessage),
      ),
    );
    const closedEarly = () =>
      new EngineAnswerError(
        "docker-unavailable",
        `Engine "${engine.name}" at ${engine.address} closed the connection before its answer to ${request} was complete.`,
        { hint: "Check that the engine runs and answers (`docker version`), then run the command again." },
      );
    const body = await readCapped(response, maxBytes, signal, tooLarge, closedEarly);
    return payload(options.statusCodes, response.statusCode ?? 0, body);
  } catch (error) {
    if (deadline?.signal.aborted) throw deadline.signal.reason;
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** The body, read as it arrives; the connection is closed at once past `maxBytes` or when `signal` aborts. */
function readCapped(
  response: IncomingMessage,
  maxBytes: number,
  signal: AbortSignal,
  tooLarge: () => Error,
  closedEarly: () => Error,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (error: unknown) => {
      signal.removeEventListener("abort", onAbort);
      response.destroy();
      reject(error);
    };
    const onAbort = () => fail(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    if (Number(response.headers["content-length"]) > maxBytes) return fail(tooLarge());
    response.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) return fail(tooLarge());
      chunks.push(chunk);
    });
    response.on("end", () => {
      signal.removeEventListener("abort", onAbort);
      resolve(Buffer.concat(chunks));
    });
    response.on("error", fail);
    response.on("close", () => {
      if (!response.complete) fail(closedEarly());
    });
  });
}

/** What docker-modem makes of a whole answer: its JSON (or the bytes), or an error with the status. */
function payload(statusCodes: DialOptions["statusCodes"], status: number, body: Buffer): unknown {
  const json = parsedOrNull(body.toString()) || body;
  if (statusCodes[status] === true) return json;
  const cause = json as { message?: unknown; error?: unknown };
  throw Object.assign(
    new Error(
      `(HTTP code ${status}) ${statusCodes[status] || "unexpected"} - ${cause.message || cause.error || json} `,
    ),
    { reason: statusCodes[status], statusCode: status, json },
  );
}

function parsedOrNull(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
