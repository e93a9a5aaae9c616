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
  process.exit(code === EXIT.ok && lost ? EXIT.agentFailed : code);
});
