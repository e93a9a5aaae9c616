// The versions a run record stores and a replay compares: this sandbox-run, and the Pi and Node of
// its runner image.
import { runnerImageSpec } from "../image/runner-image.js";
import type { RecordVersions } from "../record/record-format.js";
import { sandboxRunVersion } from "../util/package-version.js";

export function currentVersions(): RecordVersions {
  const image = runnerImageSpec();
  return { sandboxRun: sandboxRunVersion(), pi: image.piVersion, node: image.nodeVersion };
}
