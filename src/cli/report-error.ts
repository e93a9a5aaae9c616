// How a failure reaches the terminal: the short message, Pi's stderr tail where it explains
// the failure, the hint, and the exit code; never a stack trace unless SANDBOX_RUN_DEBUG is set.
// Messages may quote the sandbox (paths it created, its stderr, the provider's message): every
// control character is shown escaped.
import { isSandboxRunError, type SandboxRunError } from "../errors.js";
import type { CliIo } from "./cli-io.js";
import { EXIT, exitCodeFor } from "./exit-codes.js";
import { messageText, terminalName } from "./terminal-text.js";

type ChangedFiles = NonNullable<SandboxRunError["changedFiles"]>;

/** The message and hint of a usage error (commander's own, or a SandboxRunError "usage"), else undefined. */
export function usageErrorOf(error: unknown): { message: string; hint?: string } | undefined {
  if (isSandboxRunError(error))
    return error.code === "usage" ? { message: error.shortMessage, hint: error.hint } : undefined;
  const commander = error as { code?: unknown; message?: unknown };
  if (typeof commander?.code !== "string" || !commander.code.startsWith("commander.")) return undefined;
  return { message: String(commander.message ?? "").replace(/^error: /, "") };
}

export function reportError(error: unknown, io: CliIo): number {
  const commanderCode = (error as { code?: string })?.code;
  if (typeof commanderCode === "string" && commanderCode.startsWith("commander.")) {
    // Commander already printed its message (or the help); map to our exit codes.
    const helpShown =
      commanderCode === "commander.helpDisplayed" ||
      commanderCode === "commander.version" ||
      commanderCode === "commander.help";
    return helpShown ? EXIT.ok : EXIT.usage;
  }
  if (isSandboxRunError(error)) {
    io.stderr(`sandbox-run: ${continuationsIndented(messageText(error.shortMessage))}\n`);
    if (error.stderrTail && (error.code === "agent-crashed" || error.code === "limit")) {
      // Each line behind a bar: what the sandbox wrote never starts a line as sandbox-run's own do.
      const tail = error.stderrTail.split("\n").slice(-15);
      io.stderr(`  last lines Pi wrote to stderr:\n${tail.map((line) => `  | ${messageText(line)}`).join("\n")}\n`);
    }
    const left = leftInWorkspace(error.changedFiles);
    if (left) io.stderr(`${left}\n`);
    if (error.hint) io.stderr(`  ${continuationsIndented(messageText(error.hint))}\n`);
    return exitCodeFor(error.code);
  }
  const message = (error as Error)?.message ?? String(error);
  const code = (error as NodeJS.ErrnoException)?.code;
  // The folder the command was started in was removed (process.cwd() fails): not a bug either.
  if (code === "ENOENT" && (error as NodeJS.ErrnoException).syscall === "uv_cwd") {
    io.stderr("sandbox-run: the current folder no longer exists (it was removed after this shell entered it).\n");
    io.stderr("  `cd` into a folder that exists and run again (--cwd names the workspace).\n");
    return EXIT.usage;
  }
  // Out of file descriptors is this host's limit, not a bug (review, session 34).
  if (code === "EMFILE" || code === "ENFILE") {
    io.stderr(`sandbox-run: ${continuationsIndented(messageText(message))}\n`);
    io.stderr(
      `  ${code === "EMFILE" ? "This process ran out of open files (ulimit -n)" : "The system ran out of open files"}: raise the limit (\`ulimit -n 4096\`) and run again.\n`,
    );
    // As host-trouble.ts says a host resource: exit 2.
    return EXIT.usage;
  }
  io.stderr(`sandbox-run: unexpected error: ${continuationsIndented(messageText(message))}\n`);
  io.stderr("  This is a bug in sandbox-run; set SANDBOX_RUN_DEBUG=1 for details and report it.\n");
  if (io.env.SANDBOX_RUN_DEBUG) io.stderr(`${(error as Error)?.stack ?? ""}\n`);
  return EXIT.agentFailed;
}

/**
 * What a failed run left in the workspace (bind mode, or copy mode's apply), in one line: it stays
 * there, and before, only `--json` said so (review, session 29: a timed-out run's partial files).
 */
function leftInWorkspace(changed: ChangedFiles | undefined): string | undefined {
  if (!changed) return undefined;
  const total =
    (changed.truncated?.created ?? changed.created.length) +
    (changed.truncated?.modified ?? changed.modified.length) +
    (changed.truncated?.deleted ?? changed.deleted.length);
  if (total === 0) return undefined;
  // Each name quoted where it holds a line break: the sandbox chose them (review, session 36).
  const named = [
    ...changed.created.map((p) => `+${terminalName(p)}`),
    ...changed.modified.map((p) => `~${terminalName(p)}`),
    ...changed.deleted.map((p) => `-${terminalName(p)}`),
  ].slice(0, 5);
  const more = total > named.length ? `, and ${total - named.length} more` : "";
  return `  the run's changes stay in the workspace: ${total} file(s) (${named.join(", ")}${more}; --json lists them)`;
}

/**
 * A message's later lines, indented: only sandbox-run's own lines start at the left edge, so text a
 * message quotes (a file name the sandbox chose, the model's words) cannot pass for one of them.
 */
function continuationsIndented(text: string): string {
  return text.replace(/\n(?=\S)/g, "\n  ");
}
