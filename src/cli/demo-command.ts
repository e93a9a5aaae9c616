// `sandbox-run demo`: the whole pipeline (image, container, gateway, streamed events,
// schema-validated result) against a scripted model bundled with the package (the library's
// runDemo), so a new user sees it work before having any provider key.
import { usageError } from "../errors.js";
import { runDemo } from "../operations.js";
import { progressTo } from "./cli-io.js";
import { EXIT } from "./exit-codes.js";
import type { CommandContext } from "./lazy-command.js";
import { createProgressReporter } from "./progress-reporter.js";
import { interruptible } from "./stop-signals.js";
import { jsonText } from "./terminal-text.js";

/** `sandbox-run demo`'s action. */
export default async function demoAction(
  { io, signals }: CommandContext,
  flags: { runtime?: string; quiet?: boolean },
): Promise<number> {
  if (flags.runtime && flags.runtime !== "runc" && flags.runtime !== "runsc")
    throw usageError(`--runtime must be runc or runsc, not "${flags.runtime}".`);
  const say = (line: string) => flags.quiet || io.stderr(`${line}\n`);
  // Ctrl-C stops it as it stops a run: the sandbox stopped and removed, the demo's folder removed.
  const words = {
    announce: "stopping the demo's sandbox",
    stopped: "the demo's sandbox was stopped and removed, and its folder too",
  };
  return interruptible(signals, io, words, async (signal) => {
    const { details, upstreamSawKey } = await runDemo({
      runtime: flags.runtime as "runc" | "runsc" | undefined,
      say,
      onProgress: progressTo(io, flags.quiet),
      onEvent: flags.quiet ? undefined : createProgressReporter((line) => io.stderr(`${line}\n`)),
      signal,
    });
    io.stdout(`${jsonText(details.result, 2)}\n`);
    say(
      `demo: done in ${(details.durationMs / 1000).toFixed(2)}s on ${details.image}; ` +
        `the model server received the real key on every request: ${upstreamSawKey ? "yes" : "NO"}; the container is gone.`,
    );
    return EXIT.ok;
  });
}
