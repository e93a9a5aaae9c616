// `sandbox-run doctor`'s lines about platforms, per engine: what the engine is (its platform, Docker
// Desktop and what that changes), which platforms' runner images it holds, and whether it can run
// the other platform (an emulator registered; a container of that image really starts).
import type { Engine, EngineInfo } from "../engine/engine.js";
import { noBindModeReason, ownPlatformOf } from "../engine/engine-kind.js";
import { checkPlatformSupport } from "../engine/platform-support.js";
import { checkContainerStart } from "../engine/start-check.js";
import { isSandboxRunError } from "../errors.js";
import { runnerImageSpec } from "../image/runner-image.js";
import { controllerHostProblem, nodeVersionProblem } from "../util/controller-host.js";
import { raiseLimitsCommand, readPerUserLimits, sharedUidProblem } from "../util/per-user-limits.js";
import { RUNNER_PLATFORMS, type RunnerPlatform } from "../util/platform.js";
import { mib } from "../util/units.js";

interface PlatformReport {
  ok(what: string): void;
  note(what: string, advice?: string): void;
}

/**
 * The controller's own machine: Linux, for its no-follow file handling (/proc/self/fd), and a Node
 * package.json's engines allows.
 */
export function checkControllerHost(
  say: PlatformReport & { bad(what: string, fix: string): void },
  nodeVersion: string = process.versions.node,
): void {
  const problems = [controllerHostProblem(), nodeVersionProblem(nodeVersion)].filter((p) => p !== undefined);
  for (const problem of problems) say.bad(problem.shortMessage, problem.hint ?? "");
  if (problems.length === 0) say.ok(`controller on ${process.platform}/${process.arch} (Node v${nodeVersion})`);
}

/**
 * This host's per-uid kernel limits against sandboxes running as the caller's uid (a non-root
 * caller's bind mode): where they could use them up, bind-mode runs go to copy mode.
 */
export function checkPerUserLimits(say: PlatformReport, uid = process.getuid?.()): void {
  const limits = readPerUserLimits();
  if (!limits) return;
  const problem = sharedUidProblem(limits);
  if (!problem)
    say.ok("per-user kernel limits (epoll watches, inotify instances): above what this host's memory can buy");
  else if (uid === 0)
    say.ok("per-user kernel limits are the kernel's defaults (your sandboxes run as another uid than root)");
  else say.note(`bind-mode runs go to copy mode: ${problem}`, `Raise the limits once: ${raiseLimitsCommand()}`);
}

/** The engine's kind, in words: Docker Desktop changes how runs reach it (copy mode). */
export function describeEngineKind(info: EngineInfo, say: PlatformReport): void {
  const own = ownPlatformOf(info);
  const platform = own ?? `${info.architecture} (no runner image for it)`;
  if (info.dockerDesktop) {
    say.note(
      `engine is Docker Desktop (${info.operatingSystem || "?"}, kernel ${info.kernelVersion || "?"}, ${platform}): ` +
        "its containers run in a VM, so runs copy the workspace in and out and reach the model gateway " +
        "through the exec relay (copy mode); no host path or socket is mounted",
    );
  } else say.ok(`engine platform ${platform}`);
  if (info.remapsUsers)
    say.note(
      `engine ${noBindModeReason(info)}: runs copy the workspace in and out (copy mode); --workspace bind is refused there`,
    );
}

/**
 * Every platform's runner image on this engine, and for each other platform whether the engine can
 * run it: the emulator check a run makes, then a container of that image that starts (when built).
 */
export async function checkPlatformImages(engine: Engine, info: EngineInfo, say: PlatformReport): Promise<void> {
  const held: string[] = [];
  const missing: RunnerPlatform[] = [];
  for (const platform of RUNNER_PLATFORMS) {
    const { tag } = runnerImageSpec(platform);
    const details = await engine.imageDetails(tag);
    if (details?.platform === platform) held.push(`${platform} ${tag} (${Math.round(mib(details.sizeBytes))} MiB)`);
    else missing.push(platform);
  }
  say.ok(`runner images by platform: ${held.length > 0 ? held.join(", ") : "none yet"}`);
  for (const platform of missing) {
    say.note(`no ${platform} runner image here (build it: sandbox-run image build --platform ${platform})`);
  }
  for (const platform of RUNNER_PLATFORMS) {
    if (platform === ownPlatformOf(info)) continue;
    try {
      checkPlatformSupport(platform, info, { engineName: engine.name });
    } catch (error) {
      const e = isSandboxRunError(error) ? error : undefined;
      say.note(`--platform ${platform} is unavailable: ${e?.shortMessage ?? String(error)}`, e?.hint);
      continue;
    }
    if (missing.includes(platform)) {
      say.note(`--platform ${platform} runs emulated here once its image is built`);
      continue;
    }
    const check = await checkContainerStart(engine, runnerImageSpec(platform).tag, "runc", 60_000, platform);
    if (check.ok) say.ok(`a ${platform} container starts under emulation (${check.seconds.toFixed(2)} s; runc only)`);
    else say.note(`--platform ${platform} will fail: ${check.reason}`);
  }
}
