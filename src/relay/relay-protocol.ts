// What the controller and the in-container relay (images/pi/relay.mjs, plain JavaScript in the image
// that keeps its own copy of these names) agree on: the stream paths, the relay's configuration and
// the control messages. A unit test checks the relay script uses the same paths.

export const RELAY_PATHS = {
  control: "/control",
  /** `/connect/<socket name>`: one connection to an in-container socket. */
  connectPrefix: "/connect/",
  /** `/archive/<id>`: the archive of one `archive` command (relay -> controller). */
  archivePrefix: "/archive/",
  /** `/extract/<id>`: the response carries the tar one `extract` command unpacks (controller -> relay). */
  extractPrefix: "/extract/",
  /**
   * A warm sandbox's claim, opened by its relay at once and answered only when a call claims it:
   * `<length>\n<ClaimMessage as JSON>`, then each tree's tar in the order of `trees`.
   */
  claim: "/claim",
} as const;

/** The head of a warm sandbox's claim stream: everything of the call but its trees' bytes. */
export interface ClaimMessage {
  /** The in-container sockets to listen on from now on (the gateway's, the proxy's). */
  sockets: Array<{ name: string; path: string }>;
  /** Where each tree that follows goes, in order. */
  trees: string[];
  /** Roots whose filesystem filling up the relay reports (copy mode's disk limit). */
  watchFull: string[];
  /** The launcher's configuration of the call (src/run/plan/warm-shape.ts ClaimedRunConfig). */
  run: unknown;
}

/** The relay's configuration, passed in SANDBOX_RUN_RELAY (and removed from its environment). */
export interface RelayConfig {
  socketDir: string;
  /** A warm sandbox's relay: opens the claim stream (RELAY_PATHS.claim) at once. */
  claim?: boolean;
  sockets: Array<{ name: string; path: string }>;
  /** HTTP/2 flow-control window of each stream and of the session, in bytes. */
  windowBytes: number;
  maxSessionMemoryMb: number;
}

/** Controller -> relay, one JSON object per line of the control stream's response. */
export type RelayCommand =
  /**
   * The copy-in is complete: files whose status changes after this are "changed". `watchFull`:
   * roots whose filesystem filling up the relay reports (copy mode's disk limit is their size).
   */
  | { op: "mark"; watchFull?: string[] }
  | {
      op: "archive" | "extract";
      id: number;
      /** Absolute path inside the container. */
      root: string;
    }
  /** A warm sandbox: are you there? (answered by `pong` with the same id). */
  | { op: "ping"; id: number };

/**
 * Control messages the relay sends unasked (`ready`, a warm sandbox's `loaded`), with room to
 * spare: every other one answers a command or a claim, and the controller refuses more than it
 * asked for (each line costs it a JSON parse and a schema check).
 */
export const UNASKED_RELAY_MESSAGES = 8;

/**
 * The control messages one command may get back: its answer (an `extract` whose tar cannot start
 * is answered twice: its spawn error, then its close), and a `mark` one `full` per watched root.
 */
export function repliesTo(command: RelayCommand): number {
  if (command.op === "mark") return 1 + (command.watchFull?.length ?? 0);
  return command.op === "extract" ? 2 : 1;
}

/** Free space under which the relay calls a watched root's filesystem full. */
export const FULL_FREE_BYTES = 1024 * 1024;

// The archives the relay sends back are tar; a file entry whose status has not changed since the
// mark carries workspace-transfer/tar-header.ts' UNCHANGED_PAX_KEY (header only, no content).

/** Relay -> controller, one JSON object per line of the control stream's request (claims, not facts). */
export type RelayMessage =
  | { op: "ready" }
  /** A warm sandbox's launcher has Pi loaded and waits for its claim (`ms`: how long loading took). */
  | { op: "loaded"; ms: number }
  | { op: "pong"; id: number }
  /**
   * The claim's trees are in (each tree's status as tar's: 0 fine, else what failed), and how long
   * the steps took in there; the launcher starts Pi only when ok.
   */
  | { op: "claimed"; ok: boolean; trees: Array<{ code: number | null; stderr: string }>; ms?: Record<string, number> }
  | { op: "marked" }
  /** A watched root's filesystem has under FULL_FREE_BYTES left (once per root). */
  | { op: "full"; root: string }
  | { op: "extracted"; id: number; code: number | null; stderr?: string }
  | { op: "archived"; id: number; code: number | null; signal?: string | null; stderr?: string; error?: string };

/** Exit codes of relay.mjs (the launcher's numbers: the same causes). */
export const RELAY_EXIT = Object.freeze({ setupFailed: 90, controllerGone: 91 });

export interface RelayLimits {
  /** Streams open at once (each in-container connection is one). */
  maxConcurrentStreams: number;
  /** Streams over the whole session. */
  maxStreams: number;
  maxSessionMemoryMb: number;
  maxHeaderListBytes: number;
  maxControlLineBytes: number;
  /** HTTP/2 window of the session (both sides) and of each stream the relay receives on. */
  windowBytes: number;
  /**
   * HTTP/2 window of each stream this side receives on: what a stream whose host side stops
   * reading (a refused CONNECT, a stalled server) can make this side hold, up to
   * maxConcurrentStreams times. Node hands a stream's DATA to JavaScript as it arrives, paused or
   * not, and maxSessionMemory does not count it: only the window bounds it. The one large stream
   * this side receives is a copy-out's archive: on a busy 2-core machine a 200 MB one (20 files of
   * 10 MB) came back as fast at 512 KiB as at 4 MiB (medians 3.44 and 3.44 s), and up to 20 %
   * slower at 256 KiB; 512 KiB bounds 127 stalled streams at ~64 MiB.
   */
  streamWindowBytes: number;
}

export const DEFAULT_RELAY_LIMITS: RelayLimits = Object.freeze({
  maxConcurrentStreams: 128,
  maxStreams: 100_000,
  maxSessionMemoryMb: 64,
  maxHeaderListBytes: 8 * 1024,
  maxControlLineBytes: 64 * 1024,
  windowBytes: 4 * 1024 * 1024,
  streamWindowBytes: 512 * 1024,
});
