#!/usr/bin/env node
// Entry point of the `sandbox-run` binary.
import { processIo } from "./cli-io.js";
import { runCli } from "./program.js";

const code = await runCli(process.argv.slice(2), processIo(), process);
// Exit once stdout has drained: the Docker client keeps sockets alive otherwise.
process.stdout.write("", () => process.exit(code));
