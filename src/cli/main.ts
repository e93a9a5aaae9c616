#!/usr/bin/env node
// Entry point of the `sandbox-run` binary.
import { outputWasLost, processIo, readerGone } from "./cli-io.js";
import { EXIT } from "./exit-codes.js";
import { runCli } from "./program.js";

const code = await runCli(process.argv.slice(2), processIo(), process);
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
