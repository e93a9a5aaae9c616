// Where a planned run meets the engine it was given: the platform (the caller's, else the engine's
// own) is checked against what the engine can run, before anything is built or created, and a run
// that asked for no image gets that platform's runner image. A plan made before the engine said
// what it is (a Docker Desktop engine found only now) cannot bind-mount there: refused, not tried.
import type { Engine, EngineInfo } from "../engine/engine.js";
import { noBindModeReason, ownPlatformOf, sharesHostPaths } from "../engine/engine-kind.js";
import { checkPlatformSupport } from "../engine/platform-support.js";
import { SandboxRunError, usageError } from "../errors.js";
import { runnerImageSpec } from "../image/runner-image.js";
import { RUNNER_PLATFORMS } from "../util/platform.js";
import type { PlannedRun } from "./plan/prepare-plan.js";

interface PlacedRun {
  planned: PlannedRun;
  /** The sandbox runs under the engine's emulator (another platform than the engine's own). */
  emulated: boolean;
}

export function placeOnEngine(planned: PlannedRun, engine: Engine, info: EngineInfo): PlacedRun {
  const { run, plan } = planned;
  const platform = run.policy.platform ?? ownPlatformOf(info);
  if (!platform) {
    throw new SandboxRunError(
      "docker-unavailable",
      `Engine "${engine.name}" runs on ${info.architecture}, for which sandbox-run has no runner image.`,
      { hint: `Choose ${RUNNER_PLATFORMS.join(" or ")} with --platform (it then runs under the engine's emulator).` },
    );
  }
  const { emulated } = checkPlatformSupport(platform, info, { engineName: engine.name, runtime: plan.runtime });
  if (plan.workspaceMode === "bind" && !sharesHostPaths(engine, info)) {
    throw usageError(
      info.dockerDesktop
        ? `Engine "${engine.name}" is Docker Desktop (${info.operatingSystem}, kernel ${info.kernelVersion}): its containers run in a VM, where this host's unix sockets, the model gateway's among them, cannot be mounted.`
        : `Engine "${engine.name}" ${noBindModeReason(info) ?? "does not share this host's files"}, so the workspace cannot be bind-mounted.`,
      "Use --workspace copy (the default there once the engine is known: the CLI and run() ask it first).",
    );
  }
  const image = run.image ?? runnerImageSpec(platform).tag;
  if (plan.platform === platform && plan.image === image) return { planned, emulated };
  return { planned: { ...planned, plan: { ...plan, platform, image } }, emulated };
}
