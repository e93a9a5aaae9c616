#!/usr/bin/env node
// Entry point of the `sandbox-run` binary.
import { nodeTooOld } from "../util/node-version.js";
import { openFilesLimit } from "../util/open-files-limit.js";
import { outputWasLost, processIo, readerGone } from "./cli-io.js";
import { EXIT } from "./exit-codes.js";
import { stopOnCrash } from "./stop-on-crash.js";

// A Node older than package.json's engines is refused first, every command and --version alike: on
// Node 18, --version, --help, --dry-run and doctor answered as if all was well and a real run
// crashed in the relay's HTTP/2, its container left behind (review, session 37). Exit 3, as
// scripts/quickstart.sh exits for the same thing: the host cannot run sandboxes (not a usage error).
// The words are doctor's and the library's (node-version.ts is in the bundle's first chunk, with
// this module: scripts/chunk-groups.mjs).
const tooOld = nodeTooOld();
if (tooOld) {
  process.stderr.write(`sandbox-run: ${tooOld.message}:\n${tooOld.install.map((line) => `  ${line}\n`).join("")}`);
  process.exit(EXIT.unavailable);
}
// Checked before the commands load: Node loads their ~140 modules at once, and under a lower limit
// of open files that ended in Node's own EMFILE stack trace (review, session 34: `ulimit -n 40`).
const MIN_OPEN_FILES = 64;
if (openFilesLimit() < MIN_OPEN_FILES) {
  process.stderr.write(
    `sandbox-run: this process may open only ${openFilesLimit()} files (ulimit -n); sandbox-run needs at least ${MIN_OPEN_FILES}, and 1024 or more for large workspaces and batches.\n  Raise the limit (\`ulimit -n 1024\`) and run again.\n`,
  );
  process.exit(EXIT.usage);
}
const crash = stopOnCrash(process, (text) => process.stderr.write(text), process.env.SANDBOX_RUN_DEBUG === "1");
const { runCli } = await import("./program.js");
const ran = await runCli(process.argv.slice(2), processIo(), process);
// A command a crash stopped ended as if by SIGTERM: its exit code says the failure (1).
const code = crash.crashed() === undefined ? ran : EXIT.agentFailed;
// Exit once stdout has drained: the Docker client keeps sockets alive otherwise. Output that could
// not be written (a full disk) fails an otherwise successful command.
process.stdout.write("", (error?: NodeJS.ErrnoException | null) => {
  const lost = outputWasLost() || (error != null && !readerGone(error, process.stdout));
  if (code === EXIT.ok && lost) {
    // Said, so exit 1 is not read as the agent's failure (review, session 33: `>/dev/full` exited 1 in silence).
    process.stderr.write(
      "sandbox-run: the output could not be written to stdout (the disk or file behind it is full, or it failed): exit 1\n",
    );
    process.exit(EXIT.agentFailed);
  }
  process.exit(code);
});
