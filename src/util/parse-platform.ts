// A platform named by a user (a flag, a variable, an option), checked: a usage error otherwise.
// Apart from platform.ts, which the shared contract imports and so must import nothing.
import { usageError } from "../errors.js";
import { normalizePlatform, RUNNER_PLATFORMS, type RunnerPlatform } from "./platform.js";

/** A platform from a flag, a variable or a file; a usage error that lists the choices otherwise. */
export function parsePlatform(text: string, where: string): RunnerPlatform {
  const platform = normalizePlatform(text);
  if (platform) return platform;
  throw usageError(
    `${where} names the platform "${text}", which sandbox-run has no runner image for.`,
    `Use ${RUNNER_PLATFORMS.join(" or ")} (or leave it out: the engine's own platform).`,
  );
}
