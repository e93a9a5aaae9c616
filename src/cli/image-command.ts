// `sandbox-run image build` and `image prune`: the runner image on the engine DOCKER_HOST names
// (buildImages and pruneImages of the library).
import type { Command } from "commander";
import { buildImages, loadImageTar, pruneImages } from "../operations.js";
import type { CommandContext } from "./lazy-command.js";
import { platformFlag } from "./platform-flag.js";
import { terminalLine } from "./terminal-text.js";

export async function build(
  { io }: CommandContext,
  flags: { base: string; apt?: string[]; platform?: string },
  command: Command,
): Promise<undefined> {
  const built = await buildImages({
    base: flags.base,
    apt: flags.apt,
    // The root command's own --platform takes the flag wherever it is written.
    platform: platformFlag(flags.platform ?? command.optsWithGlobals().platform, io.env),
    // Build output is the engine's: control characters escaped.
    onProgress: (l) => io.stderr(`${terminalLine(l)}\n`),
  });
  io.stdout(`${built.derived ?? built.runner}\n`);
  if (built.derived) {
    io.stderr(`sandbox-run: run with --image ${built.derived} (or SANDBOX_RUN_IMAGE=${built.derived})\n`);
  }
  return undefined;
}

export async function prune({ io }: CommandContext): Promise<undefined> {
  const { removed, kept, current } = await pruneImages();
  // Tags and refusals are the engine's answers.
  for (const tag of removed) io.stdout(`${terminalLine(tag)}\n`);
  for (const { tag, reason } of kept) io.stderr(`sandbox-run: kept ${terminalLine(tag)}: ${terminalLine(reason)}\n`);
  io.stderr(
    `sandbox-run: removed ${removed.length} old runner image tag(s); kept ${current} (this version's)${kept.length ? ` and ${kept.length} in use` : ""}.\n`,
  );
  return undefined;
}

export async function load({ io }: CommandContext, file: string, flags: { tag?: string }): Promise<undefined> {
  await loadImageTar(file, flags.tag);
  io.stderr(`sandbox-run: loaded ${terminalLine(flags.tag ?? "the runner image")} from ${terminalLine(file)}\n`);
  return undefined;
}
