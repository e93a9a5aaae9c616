// What the CLI needs from its surroundings, injected so tests can run the program in-process.
import type { ContainerPiAgentConfig } from "../index.js";
import { terminalLine } from "./terminal-text.js";

export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Reads all of stdin, or undefined when stdin is a terminal. */
  readStdin: () => Promise<string | undefined>;
  env: Record<string, string | undefined>;
  stderrIsTty: boolean;
  /** stdout is a terminal (not a pipe or file): the result is shown, not handed on as data. */
  stdoutIsTty?: boolean;
  /** Width of the terminal on stderr, when it is one. */
  stderrColumns?: number;
  /**
   * Tests only, for a program run in-process: passed to the agent a run makes (the egress proxy's
   * stand-ins, run/run-egress.ts). processIo() never sets it; no flag or variable reaches it.
   */
  egressOverrides?: ContainerPiAgentConfig["egressOverrides"];
}

/** Set when the program's own output could not be written for another reason than a reader gone (a full disk). */
let outputFailed = false;

/** Whether some of the program's output could not be written (main.ts then exits non-zero). */
export function outputWasLost(): boolean {
  return outputFailed;
}

/** A pipe's reader that went away, or a terminal that closed (EIO on a file is a failing disk). */
export function readerGone(error: NodeJS.ErrnoException | null | undefined, stream: { isTTY?: boolean }): boolean {
  return error?.code === "EPIPE" || (error?.code === "EIO" && stream.isTTY === true);
}

export function processIo(): CliIo {
  // A reader that went away (`| head`: EPIPE; a closed terminal: EIO) must not end the program
  // mid-run, between the sandbox's writes and their judgement: what cannot be shown is dropped.
  // Any other failure (ENOSPC or EIO on `> file`) is dropped too, then makes the exit code non-zero.
  for (const stream of [process.stdout, process.stderr])
    stream.on("error", (error: NodeJS.ErrnoException) => {
      if (!readerGone(error, stream)) outputFailed = true;
    });
  return {
    stdout: (text) => void process.stdout.write(text),
    stderr: (text) => void process.stderr.write(text),
    readStdin: async () => {
      if (process.stdin.isTTY) return undefined;
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks).toString("utf8");
    },
    env: process.env,
    stderrIsTty: Boolean(process.stderr.isTTY),
    stdoutIsTty: Boolean(process.stdout.isTTY),
    stderrColumns: process.stderr.columns,
  };
}

/**
 * The agent's progress lines (image builds, the engine's output among them) for stderr, each escaped
 * as one line: they carry an engine's and a Dockerfile's words, never a terminal's commands.
 */
export function progressTo(io: CliIo, quiet?: boolean): ((line: string) => void) | undefined {
  return quiet ? undefined : (line) => io.stderr(`${terminalLine(line)}\n`);
}

/**
 * Whether stderr takes a live display (redrawn lines, colour): a terminal that is not `TERM=dumb`
 * (Emacs shells, some CI log viewers: ~220 escape sequences a short run; review, session 33).
 */
export function liveTerminal(io: Pick<CliIo, "stderrIsTty" | "env">): boolean {
  return io.stderrIsTty && io.env.TERM !== "dumb";
}
