// The flags that take one of a few words, and those words: what `completion` offers after the flag
// (instead of file names). The checks that refuse any other word are where each flag is parsed
// (parse-run-args.ts, replay-command.ts, show-command.ts, platform-flag.ts); the unit test of
// completion fails when a word listed here is refused there, or one accepted there is missing here.
import { HAND_BACK_MODES, SANDBOX_MODES } from "../sandbox-contract.js";
import { RUNNER_PLATFORMS } from "../util/platform.js";

export const FLAG_VALUES: Readonly<Record<string, readonly string[]>> = {
  "--sandbox": SANDBOX_MODES,
  "--runtime": ["runc", "runsc"],
  "--workspace": ["bind", "copy"],
  "--hand-back": HAND_BACK_MODES,
  "--platform": RUNNER_PLATFORMS,
  "--replay-mode": ["strict", "lenient"],
  "--replay-speed": ["fast", "recorded"],
  "--format": ["html", "md"],
};
