// `sandbox-run image build [--apt ...]`: the runner image (unless it is already there and only an
// --apt image is asked for), then the derived image with the extra Debian packages.
import type { Engine } from "../engine/engine.js";
import type { Progress } from "./base-image.js";
import { buildRunnerImage } from "./build-runner-image.js";
import { buildDerivedImage, parseAptPackages } from "./derived-image.js";
import { runnerImageSpec } from "./runner-image.js";

export interface BuiltImages {
  runner: string;
  /** The --apt image, when packages were asked for. */
  derived?: string;
}

export async function buildImages(
  engine: Engine,
  options: { base?: string; apt?: string[]; progress: Progress },
): Promise<BuiltImages> {
  // Bad package names are usage errors before any work starts.
  const packages = options.apt ? parseAptPackages(options.apt) : undefined;
  const runner = runnerImageSpec().tag;
  const present = packages ? (await engine.imageLabels(runner)) !== undefined : false;
  if (!present) await buildRunnerImage(engine, { base: options.base, progress: options.progress });
  if (!packages) return { runner };
  const derived = await buildDerivedImage(engine, { aptPackages: packages, progress: options.progress });
  return { runner, derived: derived.tag };
}
