// The --platform flag of the run, `image build` and `image tag`: linux/amd64 or linux/arm64, else
// SANDBOX_RUN_PLATFORM, else left to the engine (its own platform).
import { parsePlatform } from "../util/parse-platform.js";
import type { RunnerPlatform } from "../util/platform.js";

export const PLATFORM_FLAG = "--platform <os/arch>";
export const RUN_PLATFORM_HELP =
  "linux/amd64 or linux/arm64 (or set SANDBOX_RUN_PLATFORM; default: the engine's own; another one runs emulated, runc only)";

export function platformFlag(
  flag: string | undefined,
  env: Record<string, string | undefined>,
): RunnerPlatform | undefined {
  if (flag) return parsePlatform(flag, "--platform");
  if (env.SANDBOX_RUN_PLATFORM) return parsePlatform(env.SANDBOX_RUN_PLATFORM, "SANDBOX_RUN_PLATFORM");
  return undefined;
}
