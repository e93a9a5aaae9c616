// `sandbox-run image build` and `image prune`: the runner image on the engine DOCKER_HOST names.
import { DockerEngine } from "../engine/docker-engine.js";
import { runnerImageSpec } from "../image/runner-image.js";
import type { Command } from "commander";
import type { CommandContext } from "./lazy-command.js";
import { platformFlag } from "./platform-flag.js";

export async function build(
  { io }: CommandContext,
  flags: { base: string; apt?: string[]; platform?: string },
  command: Command,
): Promise<undefined> {
  const { buildImages } = await import("../image/build-images.js");
  const engine = new DockerEngine();
  await engine.ping();
  const built = await buildImages(engine, {
    base: flags.base,
    apt: flags.apt,
    // The root command's own --platform takes the flag wherever it is written.
    platform: platformFlag(flags.platform ?? command.optsWithGlobals().platform, io.env),
    progress: (l) => io.stderr(`${l}\n`),
  });
  io.stdout(`${built.derived ?? built.runner}\n`);
  if (built.derived) {
    io.stderr(`sandbox-run: run with --image ${built.derived} (or SANDBOX_RUN_IMAGE=${built.derived})\n`);
  }
  return undefined;
}

export async function prune({ io }: CommandContext): Promise<undefined> {
  const engine = new DockerEngine();
  await engine.ping();
  const { pruneRunnerImages } = await import("../image/prune-images.js");
  const current = runnerImageSpec().tag;
  const { removed, kept } = await pruneRunnerImages(engine, current);
  for (const tag of removed) io.stdout(`${tag}\n`);
  for (const { tag, reason } of kept) io.stderr(`sandbox-run: kept ${tag}: ${reason}\n`);
  io.stderr(
    `sandbox-run: removed ${removed.length} old runner image tag(s); kept ${current} (this version's)${kept.length ? ` and ${kept.length} in use` : ""}.\n`,
  );
  return undefined;
}
