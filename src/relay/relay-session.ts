// The controller's end of the relay (copy mode): one HTTP/2 session over the stdio of an exec of
// images/pi/relay.mjs. The relay is the client and opens every stream; this side is a server that
// never listens on anything, fed the exec's streams as its one connection.
//
// The relay runs as the sandbox uid beside code the sandbox controls, so the whole session is
// hostile input: Node's HTTP/2 enforces the protocol and its limits (concurrent streams, header
// sizes, session memory, flow control), and on top of that only three kinds of stream are served
// (one control stream, connections to the named host sockets, archives this side asked for), the
// number of streams over the session is capped, and control lines are read with a length cap, and
// only as many as this side asked for.
// Connections are held, unread, until open() is called: that is how the launcher, whose liveness
// connection comes through here, is kept from starting Pi before the workspace is copied in.
// (Over 300 lines because each of those refusals is spelled out here; the wire format is in
// relay-protocol.ts.)
import http2 from "node:http2";
import net from "node:net";
import { Duplex, Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { EngineContainer, ExecSession } from "../engine/engine.js";
import { SandboxRunError } from "../errors.js";
import { RELAY_BRIDGE_SOCKET, SANDBOX_NODE } from "../sandbox-contract.js";
import { lazily, z } from "../util/zod.js";
import { coalesced } from "./coalesce.js";
import { watchOutgoingGoaway } from "./goaway-watch.js";
import {
  type ClaimMessage,
  DEFAULT_RELAY_LIMITS,
  RELAY_PATHS,
  type RelayCommand,
  type RelayConfig,
  type RelayLimits,
  type RelayMessage,
  repliesTo,
  UNASKED_RELAY_MESSAGES,
} from "./relay-protocol.js";

export interface RelaySocket {
  /** [a-z]+: the stream path names it. */
  name: string;
  /** Where the relay listens inside the container. */
  containerPath: string;
  /** The host-side server's unix socket (gateway, egress proxy) the connection is handed to. */
  hostPath: string;
}

interface RelayOptions {
  container: EngineContainer;
  /** "uid:gid" the relay runs as: the sandbox's. */
  user: string;
  socketDir: string;
  sockets: RelaySocket[];
  /**
   * Where the relay runs. `bridgeSocket`: in the launcher, which listens on this unix socket; the
   * exec is a bridge (a few lines of perl) from its stdio to it, so no second Node starts.
   * `script`: `node <script>` on the exec's own stdio (another relay, e.g. one a test controls).
   */
  bridgeSocket?: string;
  script?: string;
  /**
   * A warm sandbox's relay: it opens the claim stream, held unanswered until claim(). Any other
   * relay's claim stream is refused.
   */
  warm?: boolean;
  limits?: Partial<RelayLimits>;
  signal?: AbortSignal;
}

/** One tree of a warm sandbox's claim: where it goes in the container, and the tar this side made. */
interface ClaimTree {
  root: string;
  archive: Readable;
}

/** What a claim did to each tree: tar's status as the relay reports it (a claim). */
interface ClaimStatus {
  root: string;
  code: number | null;
  stderr: string;
}

interface ArchiveResult {
  /** The archive bytes as the relay sent them: hostile, unbounded unless the reader bounds it. */
  stream: Readable;
  /** tar's exit as the relay reports it (a claim). */
  exit: Promise<{ code: number | null; signal?: string | null; stderr: string }>;
}

/** The relay's messages, built on first use (session 27: importing the library loads no zod). */
const relayMessage = lazily(() =>
  z.union([
    z.object({ op: z.literal("ready") }),
    z.object({ op: z.literal("loaded"), ms: z.number() }),
    z.object({ op: z.literal("pong"), id: z.number().int() }),
    z.object({
      op: z.literal("claimed"),
      ok: z.boolean(),
      trees: z.array(z.object({ code: z.number().int().nullable(), stderr: z.string().max(8192) })).max(64),
      ms: z.record(z.string().max(32), z.number()).optional(),
    }),
    z.object({ op: z.literal("marked") }),
    z.object({ op: z.literal("full"), root: z.string().max(4096) }),
    z.object({
      op: z.literal("extracted"),
      id: z.number().int(),
      code: z.number().int().nullable(),
      stderr: z.string().max(8192).optional(),
    }),
    z.object({
      op: z.literal("archived"),
      id: z.number().int(),
      code: z.number().int().nullable(),
      signal: z.string().max(32).nullable().optional(),
      stderr: z.string().max(8192).optional(),
      error: z.string().max(8192).optional(),
    }),
  ]),
);

type ArchiveExit = Awaited<ArchiveResult["exit"]>;
type ClaimStatusLine = { code: number | null; stderr: string };

interface PendingArchive {
  stream: Deferred<Readable>;
  exit: Deferred<ArchiveExit>;
  /** Its stream arrived. */
  claimed: boolean;
  /** Its exit arrived. */
  exited?: boolean;
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (error: Error) => void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const STDERR_TAIL_CHARS = 4000;
/** How long a stream may stay open after its host-side connection closed (as relay.mjs's bridge). */
const CLOSE_GRACE_MS = 5_000;

/**
 * The exec that reaches the launcher's relay: perl (in every Debian image), joining its stdio to
 * the unix socket the launcher listens on once (then removes). A unix socket has no Nagle delay,
 * and perl starts in milliseconds, unlike a second Node. When the controller goes away, stdin ends,
 * the socket is shut down, and the relay, then the launcher, stop.
 */
const BRIDGE_SCRIPT = `
use IO::Socket::UNIX; use Socket;
my ($path) = @ARGV; my $s;
for (1 .. 3000) { $s = IO::Socket::UNIX->new(Type => SOCK_STREAM, Peer => $path) and last; select(undef, undef, undef, 0.02); }
die "sandbox-run bridge: nothing listens on $path\n" unless $s;
sub copy { my ($from, $to) = @_; my $buf;
  while (my $n = sysread($from, $buf, 1 << 20)) { for (my $o = 0; $o < $n; ) { my $w = syswrite($to, $buf, $n - $o, $o); return unless defined $w; $o += $w } } }
my $pid = fork(); die "sandbox-run bridge: fork: $!\n" unless defined $pid;
if ($pid == 0) { copy($s, *STDOUT); exit 0 }
copy(*STDIN, $s); shutdown($s, 1); kill "TERM", $pid; waitpid($pid, 0);
`;

/** ref()/unref() on the socket under a hijacked stream, where it has one (a unix or TCP socket). */
export function holdProcess(stream: unknown, hold: boolean): void {
  const socket = stream as { ref?: () => void; unref?: () => void };
  if (hold) socket.ref?.();
  else socket.unref?.();
}

export class Relay {
  readonly #limits: RelayLimits;
  readonly #server: http2.Http2Server;
  readonly #pending = new Map<number, PendingArchive>();
  readonly #gate: Promise<void>;
  #openGate!: () => void;
  #control?: http2.ServerHttp2Stream;
  readonly #extracts = new Map<number, { archive: Readable; claimed: boolean; exit: Deferred<ArchiveExit> }>();
  #session?: http2.ServerHttp2Session;
  /** The host sockets connections may reach: none for a warm sandbox until its claim binds them. */
  #sockets: RelaySocket[];
  readonly #pings = new Map<number, Deferred<void>>();
  /** A warm sandbox's claim stream, held until claim() answers it. */
  #claimStream?: http2.ServerHttp2Stream;
  #claimed = false;
  readonly #claimAnswer = deferred<{ ok: boolean; trees: ClaimStatusLine[]; ms?: Record<string, number> }>();
  readonly #loaded = deferred<number>();
  #streams = 0;
  /** Control messages the relay may still send: its own few, then the answers this side asked for. */
  #controlBudget = UNASKED_RELAY_MESSAGES;
  #nextArchive = 1;
  #closing = false;
  #stderr = "";
  #failure?: SandboxRunError;
  #refused = false;
  readonly #failureListeners: Array<(error: SandboxRunError, refused: boolean) => void> = [];
  readonly #fullListeners: Array<(root: string) => void> = [];
  #resolveReady!: () => void;
  /** Resolves once the relay listens on every socket. */
  readonly ready: Promise<void>;
  /** Connections handed to the host servers so far. */
  connections = 0;

  private constructor(
    private readonly options: RelayOptions,
    private readonly exec: ExecSession,
  ) {
    this.#limits = { ...DEFAULT_RELAY_LIMITS, ...options.limits };
    this.#sockets = [...options.sockets];
    this.#loaded.promise.catch(() => {});
    this.#claimAnswer.promise.catch(() => {});
    this.#gate = new Promise((resolve) => (this.#openGate = resolve));
    this.ready = new Promise<void>((resolve, reject) => {
      this.#resolveReady = resolve;
      this.onFailure(reject);
    });
    this.ready.catch(() => {});
    exec.stderr.on("data", (chunk: Buffer) => {
      this.#stderr = (this.#stderr + chunk.toString("utf8")).slice(-STDERR_TAIL_CHARS);
    });
    void exec.exit.then(
      (code) => this.#fail(`the relay exited (code ${code})`),
      (error: unknown) => this.#fail(`the relay's exec failed: ${(error as Error)?.message ?? error}`),
    );
    this.#server = http2.createServer({
      settings: {
        enablePush: false,
        maxConcurrentStreams: this.#limits.maxConcurrentStreams,
        maxHeaderListSize: this.#limits.maxHeaderListBytes,
        // Small: a stream whose host side stops reading holds at most this (relay-protocol.ts
        // streamWindowBytes); the session's window stays windowBytes.
        initialWindowSize: this.#limits.streamWindowBytes,
        maxFrameSize: 1024 * 1024,
      },
      maxSessionMemory: this.#limits.maxSessionMemoryMb,
      maxHeaderListPairs: 16,
      // Node counts as invalid the DATA a peer had in flight on a stream this side reset, and past
      // this many ends the whole session (INTERNAL_ERROR). The gateway closes connections past its
      // cap as they arrive, so a flood of 32 MiB posts from the sandbox made dozens: at 16 the
      // session, and the run, died under load. Each costs one frame's read; memory stays bounded
      // by maxSessionMemory and the window.
      maxSessionInvalidFrames: 100_000,
      // A stream Node cannot take yet (its table of 128 streams frees closed streams later than
      // the relay counts them closed) is refused with ENHANCE_YOUR_CALM, and past this many
      // refusals in a row Node ends the whole session. The relay opens its next queued connection
      // at once, so a gateway flood on a loaded host refused dozens in a row and the run died with
      // exit 91 (with this set to 0, every flood run did). A refusal costs one RST frame and fails
      // only that connection; the session must not end over them.
      maxSessionRejectedStreams: 1_000_000,
    });
    this.#server.on("session", (session) => {
      this.#session = session;
      session.on("connect", () => session.setLocalWindowSize(this.#limits.windowBytes));
      session.on("error", (error) => this.#fail(`the relay session failed: ${error.message}`, true));
      session.on("frameError", () => this.#fail("the relay sent a frame this side refused", true));
      session.on("goaway", () => this.#fail("the relay ended the session"));
      session.on("close", () => this.#fail("the relay session closed"));
    });
    this.#server.on("stream", (stream, headers) => {
      // Nothing the relay sends may throw out of this listener: uncaught, it ended the controller
      // and every run of it (review, session 45).
      try {
        this.#route(stream, headers);
      } catch (error) {
        stream.destroy();
        this.#fail(`the relay's stream could not be served (${(error as Error).message})`, true);
      }
    });
    this.#server.on("sessionError", (error) => this.#fail(`the relay session failed: ${error.message}`, true));
    // The exec's stdio is the connection: nothing listens anywhere. This side ending the session over
    // bytes it could not read is a failure at once, not when (or if) the relay hangs up.
    const outgoing = watchOutgoingGoaway((code) =>
      this.#fail(
        code === http2.constants.NGHTTP2_INTERNAL_ERROR
          ? // What nghttp2 sends when the peer trips its flood guards (stream resets, invalid frames).
            "this side ended the session (HTTP/2 error code 2): the relay sent more stream resets or invalid frames than HTTP/2's flood guard allows"
          : `this side could not read what the relay sent (HTTP/2 error code ${code}) and ended the session`,
        true,
      ),
    );
    pipeline(outgoing, exec.stdin).catch(() => {});
    this.#server.emit("connection", Duplex.from({ readable: coalesced(exec.stdout), writable: outgoing }));
  }

  /** Execs the relay in the running container and starts serving its session. */
  static async start(options: RelayOptions): Promise<Relay> {
    const config: RelayConfig = {
      socketDir: options.socketDir,
      sockets: options.sockets.map((s) => ({ name: s.name, path: s.containerPath })),
      ...(options.warm ? { claim: true } : {}),
      windowBytes: options.limits?.windowBytes ?? DEFAULT_RELAY_LIMITS.windowBytes,
      maxSessionMemoryMb: options.limits?.maxSessionMemoryMb ?? DEFAULT_RELAY_LIMITS.maxSessionMemoryMb,
    };
    const cmd = options.script
      ? [...SANDBOX_NODE, options.script]
      : ["/usr/bin/perl", "-e", BRIDGE_SCRIPT, options.bridgeSocket ?? RELAY_BRIDGE_SOCKET];
    const exec = await options.container.exec(
      { cmd, user: options.user, env: options.script ? { SANDBOX_RUN_RELAY: JSON.stringify(config) } : {} },
      options.signal,
    );
    return new Relay(options, exec);
  }

  /**
   * A warm sandbox's launcher has Pi loaded and waits for a claim: resolves with how long loading
   * took inside (a claim), rejects if the relay fails first.
   */
  get loaded(): Promise<number> {
    return this.#loaded.promise;
  }

  /** Asks the relay whether it still answers; rejects after `timeoutMs` or when the relay fails. */
  async ping(timeoutMs: number): Promise<void> {
    if (this.#failure) throw this.#failure;
    const id = this.#nextArchive++;
    const pong = deferred<void>();
    this.#pings.set(id, pong);
    const timer = setTimeout(() => pong.reject(this.#error(`no answer to a ping within ${timeoutMs} ms`)), timeoutMs);
    try {
      this.#send({ op: "ping", id });
      await pong.promise;
    } finally {
      clearTimeout(timer);
      this.#pings.delete(id);
    }
  }

  /**
   * A warm sandbox's claim, as one message on the stream its relay has held open since it was made:
   * the claim (the run's configuration, its sockets, where each tree goes) and the trees' tars.
   * From now on connections may reach `sockets`. Resolves with each tree's status once the relay
   * answers (it hands the run to the launcher, which starts Pi, only when every tree is in), with
   * how long its steps took in there (a claim). Once per relay.
   */
  async claim(input: {
    sockets: RelaySocket[];
    trees: ClaimTree[];
    watchFull: readonly string[];
    run: unknown;
  }): Promise<{ statuses: ClaimStatus[]; inSandboxMs?: Record<string, number> }> {
    if (this.#failure) throw this.#failure;
    const stream = this.#claimStream;
    if (this.#claimed || !stream || stream.destroyed) throw this.#error("it offers no claim");
    this.#claimed = true;
    // Its answer, and a `full` per watched root.
    this.#controlBudget += 1 + input.watchFull.length;
    this.#sockets = [...input.sockets];
    const message: ClaimMessage = {
      sockets: input.sockets.map((s) => ({ name: s.name, path: s.containerPath })),
      trees: input.trees.map((t) => t.root),
      watchFull: [...input.watchFull],
      run: input.run,
    };
    const head = JSON.stringify(message);
    stream.respond({ ":status": 200 });
    const sent = pipeline(
      Readable.from(
        (async function* () {
          yield Buffer.from(`${Buffer.byteLength(head)}\n${head}`);
          for (const tree of input.trees) yield* tree.archive;
        })(),
      ),
      stream,
    );
    // An archive that failed with an error of ours (the workspace changed while it was packed) ends
    // the claim with that error; the relay's answer would only say tar saw a truncated archive.
    const archiveFailed = sent.then(
      () => new Promise<never>(() => {}),
      (error: unknown) => {
        if (error instanceof SandboxRunError) throw error;
        return new Promise<never>(() => {});
      },
    );
    const answer = await Promise.race([this.#claimAnswer.promise, archiveFailed]);
    const statuses = input.trees.map(({ root }, i) => ({
      root,
      code: answer.trees[i]?.code ?? null,
      stderr: (answer.trees[i]?.stderr ?? "the relay did not unpack it").slice(-STDERR_TAIL_CHARS),
    }));
    if (answer.ok && statuses.some((s) => s.code !== 0)) throw this.#error("it says a claim failed and succeeded");
    if (!answer.ok && statuses.every((s) => s.code === 0))
      throw this.#error("it could not listen on the run's sockets");
    return answer.ok ? { statuses, inSandboxMs: answer.ms ?? {} } : { statuses };
  }

  /**
   * Whether the link to the relay keeps this process alive (it does by default). A warm sandbox
   * waiting for a claim must not: a caller that never closes its agent can still exit, and the
   * sandbox then stops when its relay's exec sees the link close.
   */
  holdProcess(hold: boolean): void {
    holdProcess(this.exec.stdin, hold);
  }

  /** Lets the connections through that the relay carries (held until now). */
  open(): void {
    this.#openGate();
  }

  /**
   * Calls `listener` once if the relay fails (its exec ends, the session breaks) before close().
   * `refused`: this side refused what the relay sent (a frame, a flood, a message it did not ask
   * for), so the sandbox is misbehaving, not ending: the run must stop it.
   */
  onFailure(listener: (error: SandboxRunError, refused: boolean) => void): void {
    if (this.#failure) listener(this.#failure, this.#refused);
    else this.#failureListeners.push(listener);
  }

  /** Asks the relay for a tar of `root` (a path inside the container). */
  async archive(root: string): Promise<ArchiveResult> {
    if (this.#failure) throw this.#failure;
    const id = this.#nextArchive++;
    const pending: PendingArchive = { stream: deferred(), exit: deferred(), claimed: false };
    pending.exit.promise.catch(() => {});
    this.#pending.set(id, pending);
    this.#send({ op: "archive", id, root });
    return { stream: await pending.stream.promise, exit: pending.exit.promise };
  }

  /** The container is about to be stopped: its relay ending is no longer a failure. */
  expectEnd(): void {
    this.#closing = true;
  }

  /**
   * Has the relay unpack `archive` (a tar this side made) into `root` with `tar -x`, as the
   * relay's uid: a copy-in without an exec of its own. Resolves with tar's status.
   */
  async extract(root: string, archive: Readable): Promise<{ code: number | null; stderr: string }> {
    if (this.#failure) throw this.#failure;
    const id = this.#nextArchive++;
    const pending = { archive, claimed: false, exit: deferred<ArchiveExit>() };
    this.#extracts.set(id, pending);
    this.onFailure((error) => pending.exit.reject(error));
    this.#send({ op: "extract", id, root });
    try {
      return await pending.exit.promise;
    } finally {
      this.#extracts.delete(id);
    }
  }

  /**
   * Tells the relay the copy-in is complete: a file whose status changes after this is sent back
   * whole, any other as "unchanged" (a claim that can only make the host keep its own copy). No
   * answer is awaited: the relay handles the session's frames in order, so the mark is made before
   * anything open() lets through reaches the launcher.
   */
  mark(watchFull: readonly string[] = []): void {
    if (this.#failure) throw this.#failure;
    this.#send({ op: "mark", watchFull: [...watchFull] });
  }

  /** Called when the relay says a root given to mark() filled its filesystem. */
  onFull(listener: (root: string) => void): void {
    this.#fullListeners.push(listener);
  }

  #send(command: RelayCommand): void {
    if (!this.#control) throw this.#error("it has no control stream yet");
    this.#controlBudget += repliesTo(command);
    this.#control.write(`${JSON.stringify(command)}\n`);
  }

  /** Stops serving: the exec ends with the container; nothing here reports that as a failure. */
  close(): void {
    this.#closing = true;
    this.#openGate();
    this.#session?.destroy();
    this.exec.stdin.destroy();
  }

  #route(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on("error", () => {});
    // Opened and reset in one write, a stream is closed when it is announced: answering it throws.
    // An honest relay never does that; a transfer waiting on that stream would wait for nothing.
    if (stream.closed || stream.destroyed) {
      this.#fail("the relay reset a stream in the same breath as it opened it", true);
      return;
    }
    if (++this.#streams > this.#limits.maxStreams) {
      this.#fail(`the relay opened more than ${this.#limits.maxStreams} streams`, true);
      this.#session?.destroy();
      return;
    }
    const path = String(headers[":path"] ?? "");
    const served =
      headers[":method"] === "POST" &&
      (path === RELAY_PATHS.control
        ? this.#serveControl(stream)
        : path.startsWith(RELAY_PATHS.connectPrefix)
          ? this.#serveConnection(stream, path.slice(RELAY_PATHS.connectPrefix.length))
          : path.startsWith(RELAY_PATHS.archivePrefix)
            ? this.#serveArchive(stream, Number(path.slice(RELAY_PATHS.archivePrefix.length)))
            : path.startsWith(RELAY_PATHS.extractPrefix)
              ? this.#serveExtract(stream, Number(path.slice(RELAY_PATHS.extractPrefix.length)))
              : path === RELAY_PATHS.claim
                ? this.#holdClaim(stream)
                : false);
    if (!served && !stream.destroyed) stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
  }

  /** A warm sandbox's claim stream: one, held unanswered until a call claims the sandbox. */
  #holdClaim(stream: http2.ServerHttp2Stream): boolean {
    if (!this.options.warm || this.#claimStream) return false;
    this.#claimStream = stream;
    return true;
  }

  /** The response to an `extract` is the archive this side made: it goes out at the pace the relay reads it. */
  #serveExtract(stream: http2.ServerHttp2Stream, id: number): boolean {
    const pending = this.#extracts.get(id);
    if (!pending || pending.claimed) return false;
    pending.claimed = true;
    stream.respond({ ":status": 200 });
    pipeline(pending.archive, stream).catch((error: Error) => pending.exit.reject(error));
    return true;
  }

  #serveArchive(stream: http2.ServerHttp2Stream, id: number): boolean {
    const pending = this.#pending.get(id);
    if (!pending || pending.claimed) return false;
    pending.claimed = true;
    if (pending.exited) this.#pending.delete(id);
    stream.respond({ ":status": 200 });
    pending.stream.resolve(stream);
    return true;
  }

  #serveControl(stream: http2.ServerHttp2Stream): boolean {
    if (this.#control) return false;
    this.#control = stream;
    stream.respond({ ":status": 200 });
    stream.on("close", () => {
      const closed = () => this.#fail("the relay closed its control stream");
      // A session that ends closes its streams before it reports its error (a turn or, under
      // load, a few hundred ms later): the failure waits for the session's end, so it names the cause.
      if (!this.#session?.destroyed) return closed();
      this.#session.once("close", closed);
      setTimeout(closed, 2_000).unref();
    });
    let pending = "";
    stream.setEncoding("utf8");
    stream.on("data", (text: string) => {
      pending += text;
      for (let newline = pending.indexOf("\n"); newline >= 0; newline = pending.indexOf("\n")) {
        if (--this.#controlBudget < 0) {
          this.#fail("the relay sent more control messages than this side asked for", true);
          this.#session?.destroy();
          return;
        }
        this.#onMessage(pending.slice(0, newline));
        if (stream.destroyed) return;
        pending = pending.slice(newline + 1);
      }
      if (pending.length > this.#limits.maxControlLineBytes) {
        this.#fail("the relay sent a control line over the length limit", true);
        this.#session?.destroy();
      }
    });
    return true;
  }

  #onMessage(line: string): void {
    let parsed: RelayMessage;
    try {
      parsed = relayMessage().parse(JSON.parse(line));
    } catch {
      this.#fail("the relay sent a control message this side cannot read", true);
      this.#session?.destroy();
      return;
    }
    if (parsed.op === "ready") this.#resolveReady();
    else if (parsed.op === "marked") return;
    else if (parsed.op === "loaded") this.#loaded.resolve(parsed.ms);
    else if (parsed.op === "pong") this.#pings.get(parsed.id)?.resolve();
    else if (parsed.op === "claimed") {
      // Only an answer to a claim this side sent counts (a claim about the relay's own doing).
      if (this.#claimed) this.#claimAnswer.resolve(parsed);
    } else if (parsed.op === "full") {
      // A claim: at worst the sandbox fails its own run over its disk limit.
      for (const listener of this.#fullListeners) listener(parsed.root);
    } else if (parsed.op === "extracted") {
      this.#extracts
        .get(parsed.id)
        ?.exit.resolve({ code: parsed.code, stderr: (parsed.stderr ?? "").slice(-STDERR_TAIL_CHARS) });
    } else {
      // The exit may overtake the archive's own stream (streams are not ordered with each other):
      // the entry stays until both arrived.
      const pending = this.#pending.get(parsed.id);
      if (!pending) return;
      if (pending.claimed) this.#pending.delete(parsed.id);
      pending.exited = true;
      const stderr = (parsed.stderr ?? parsed.error ?? "").slice(-STDERR_TAIL_CHARS);
      pending.exit.resolve({ code: parsed.code, signal: parsed.signal, stderr });
    }
  }

  /** A connection to a named host socket: held until open(), then piped both ways. */
  #serveConnection(stream: http2.ServerHttp2Stream, name: string): boolean {
    const socket = this.#sockets.find((s) => s.name === name);
    if (!socket) return false;
    void this.#gate.then(() => {
      if (this.#closing || stream.destroyed) return void stream.destroy();
      const upstream = net.connect(socket.hostPath);
      this.connections++;
      const close = () => {
        upstream.destroy();
        if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_CANCEL);
      };
      upstream.on("error", close);
      // The host's server ended the connection (Pi's keep-alive timeout, the gateway's connection
      // cap): end the stream as a normal close, like the relay does for the sandbox's side (docs/security.md CM8);
      // a burst of resets would end the whole session. Cancel only if the relay never ends its side.
      upstream.on("close", (hadError) => {
        if (hadError || stream.destroyed) return close();
        stream.resume();
        if (!stream.headersSent) stream.respond({ ":status": 200 });
        if (!stream.writableEnded) stream.end();
        setTimeout(close, CLOSE_GRACE_MS).unref();
      });
      stream.on("close", close);
      upstream.once("connect", () => {
        if (stream.destroyed) return close();
        stream.respond({ ":status": 200 });
        stream.pipe(upstream);
        upstream.pipe(stream);
      });
    });
    return true;
  }

  #fail(reason: string, refused = false): void {
    if (this.#closing || this.#failure) return;
    this.#failure = this.#error(reason);
    this.#refused = refused;
    // Nothing more is read from the relay, nor held: its exec's stream is dropped (review, session
    // 36: 3 GB written into the bridge's stdout after this side ended the session grew the
    // controller by 65 MB a second until the run's timeout). Left open and unread, it would keep
    // the engine copying into it, and the container's kill would wait for that copy.
    this.#session?.destroy();
    this.exec.stdin.destroy();
    for (const pending of this.#pending.values()) {
      pending.stream.reject(this.#failure);
      pending.exit.reject(this.#failure);
    }
    this.#pending.clear();
    for (const waiting of [...this.#pings.values(), this.#loaded, this.#claimAnswer]) waiting.reject(this.#failure);
    for (const listener of this.#failureListeners.splice(0)) listener(this.#failure, refused);
  }

  #error(reason: string): SandboxRunError {
    const tail = this.#stderr.trim();
    return new SandboxRunError("agent-crashed", `The sandbox's relay to the host stopped: ${reason}.`, {
      hint: "Code in the sandbox may have stopped it, or the link to the engine broke; the run's events have the details.",
      stderrTail: tail || undefined,
    });
  }
}
