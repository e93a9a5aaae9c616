// `sandbox-run show <record>`: a run record as one self-contained page (default <record>/run.html,
// or -o), or with --format md as a Markdown summary on stdout (for CI logs and job summaries). The
// record is read as hostile input (the library's showRecord) and a record that fails its checksum
// check is still shown, with a red banner on the page and a warning here.
import { spawn } from "node:child_process";
import { usageError } from "../errors.js";
import { showRecord } from "../operations.js";
import { hostProgramEnv } from "../util/host-programs.js";
import type { CliIo } from "./cli-io.js";
import { EXIT } from "./exit-codes.js";
import type { CommandContext } from "./lazy-command.js";
import { terminalLine } from "./terminal-text.js";

export interface ShowCommandFlags {
  output?: string;
  open?: boolean;
  format?: string;
}

export async function showCommand(recordDir: string, flags: ShowCommandFlags, io: CliIo): Promise<number> {
  const format = flags.format ?? "html";
  if (format !== "html" && format !== "md") {
    throw usageError(`--format must be html or md, not "${format}".`, "html writes the page; md prints a summary.");
  }
  if (flags.open && (format !== "html" || flags.output === "-")) {
    throw usageError(
      "--open opens the page: it needs --format html and a file.",
      "Drop --open, or write the page to a file.",
    );
  }
  const shown = await showRecord(recordDir, {
    format,
    ...(flags.output !== undefined ? { output: flags.output } : {}),
  });
  const { integrity } = shown;
  if (integrity.state !== "ok") {
    const what = integrity.state === "mismatch" ? "does not match its SHA256SUMS" : "cannot be checked";
    // One line, every control character escaped: a file name in a record must not start a line of
    // its own (a CI runner reads a line that starts with "::" as a command).
    const problems = terminalLine(integrity.problems.slice(0, 3).join("; "));
    io.stderr(`sandbox-run: warning: the record ${what}: ${problems}\n`);
  }
  if (shown.newerFormat) io.stderr(`sandbox-run: warning: ${terminalLine(shown.newerFormat)}\n`);
  if (shown.written === undefined) {
    io.stdout(shown.content);
    return EXIT.ok;
  }
  const written = shown.written;
  io.stdout(`${written}\n`);
  if (flags.open) await openInBrowser(written, io);
  return EXIT.ok;
}

/** The system's opener (xdg-open, open, start) on the file; a missing one is a hint, not a failure. */
async function openInBrowser(file: string, io: CliIo): Promise<void> {
  const [command, args] =
    process.platform === "darwin"
      ? ["open", [file]]
      : process.platform === "win32"
        ? ["cmd", ["/c", "start", '""', file]]
        : ["xdg-open", [file]];
  await new Promise<void>((resolve) => {
    const child = spawn(command, args as string[], { detached: true, stdio: "ignore", env: hostProgramEnv(io.env) });
    child.once("spawn", () => {
      child.unref();
      resolve();
    });
    child.once("error", (error: NodeJS.ErrnoException) => {
      io.stderr(
        `sandbox-run: cannot open a browser (${command}: ${error.code ?? error.message}); open ${file} yourself.\n`,
      );
      resolve();
    });
  });
}

/** The `show` command's action (program.ts loads this module when the command runs). */
export default function show(ctx: CommandContext, recordDir: string, flags: ShowCommandFlags): Promise<number> {
  return showCommand(recordDir, flags, ctx.io);
}
