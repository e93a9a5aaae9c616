// The CLI run in the test's own process (program.ts runCli) with captured stdout and stderr, no
// terminal and no stdin: what a unit test of a command's words and exit code needs.
import type { CliIo } from "../../src/cli/cli-io.js";
import { runCli } from "../../src/cli/program.js";

export interface InProcessRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `sandbox-run <argv>` with `env` as its whole environment. */
export async function runCliInProcess(argv: string[], env: Record<string, string> = {}): Promise<InProcessRun> {
  let stdout = "";
  let stderr = "";
  const io: CliIo = {
    stdout: (text) => void (stdout += text),
    stderr: (text) => void (stderr += text),
    readStdin: async () => undefined,
    env,
    stderrIsTty: false,
  };
  const code = await runCli(argv, io);
  return { code, stdout, stderr };
}
