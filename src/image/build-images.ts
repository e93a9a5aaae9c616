// `sandbox-run image build [--platform ...] [--apt ...]`: the runner image for the platform (unless
// it is already there and only an --apt image is asked for), then the derived image with the
// extra Debian packages.
import type { Engine } from "../engine/engine.js";
import { ownPlatformOf } from "../engine/engine-kind.js";
import type { RunnerPlatform } from "../util/platform.js";
import type { Progress } from "./base-image.js";
import { buildRunnerImage } from "./build-runner-image.js";
import { buildDerivedImage, parseAptPackages } from "./derived-image.js";
import { runnerImageSpec } from "./runner-image.js";

export interface BuiltImages {
  runner: string;
  platform: RunnerPlatform;
  /** The --apt image, when packages were asked for. */
  derived?: string;
}

export async function buildImages(
  engine: Engine,
  options: { base?: string; apt?: string[]; platform?: RunnerPlatform; progress: Progress },
): Promise<BuiltImages> {
  // Bad package names are usage errors before any work starts.
  const packages = options.apt ? parseAptPackages(options.apt) : undefined;
  const platform = options.platform ?? ownPlatformOf(await engine.info());
  const runner = platform ? runnerImageSpec(platform).tag : undefined;
  const present = packages && runner ? (await engine.imageLabels(runner)) !== undefined : false;
  const built =
    present && runner && platform
      ? { tag: runner, platform }
      : await buildRunnerImage(engine, { base: options.base, platform, progress: options.progress });
  if (!packages) return { runner: built.tag, platform: built.platform };
  const derived = await buildDerivedImage(engine, {
    aptPackages: packages,
    platform: built.platform,
    progress: options.progress,
  });
  return { runner: built.tag, platform: built.platform, derived: derived.tag };
}
