// The emulation section of `npm run bench`: the same per-call task on the linux/arm64 runner image
// under qemu (binfmt_misc) against the engine's own platform's image, interleaved, and the ratio:
// what emulation costs, for people choosing between an emulated run here and a native arm64 engine
// (an arm64 CI runner, Apple Silicon). Not a product target. Also the size of both images.
import { ContainerPiAgent } from "../src/container-pi-agent.js";
import type { DockerEngine } from "../src/engine/docker-engine.js";
import { checkPlatformSupport } from "../src/engine/platform-support.js";
import { buildRunnerImage } from "../src/image/build-runner-image.js";
import { runnerImageSpec } from "../src/image/runner-image.js";
import { RUNNER_PLATFORMS, type RunnerPlatform } from "../src/util/platform.js";
import { mib } from "../src/util/units.js";
import { benchModelsJson, PROVIDER, TASK_MODEL, TASK_SCHEMA } from "./bench-task.js";
import { interleave, type VariantResult } from "./interleave.js";
import { round, seconds, table } from "./stats.js";
import { type Scratch, sandboxVariant } from "./variants.js";

export interface EmulationResults {
  native: RunnerPlatform;
  emulated: RunnerPlatform;
  images: Array<{ platform: RunnerPlatform; tag: string; sizeMb?: number }>;
  perCall?: VariantResult[];
  /** Median emulated / median native. */
  ratio?: number;
  skipped?: string;
}

function platformAgent(baseUrl: string, platform: RunnerPlatform): ContainerPiAgent {
  return new ContainerPiAgent({
    model: `${PROVIDER}/${TASK_MODEL}`,
    models: benchModelsJson(baseUrl),
    schema: TASK_SCHEMA,
    runtime: "runc",
    platform,
    reapOrphans: false,
    // Pi under qemu starts in seconds.
    timeoutMs: 300_000,
  });
}

export async function runEmulationSection(input: {
  engine: DockerEngine;
  baseUrl: string;
  runs: number;
  scratch: Scratch;
  progress: (line: string) => void;
}): Promise<{ results: EmulationResults; text: string }> {
  const { engine, progress } = input;
  const info = await engine.info();
  const native = info.platform ?? "linux/amd64";
  const emulated = RUNNER_PLATFORMS.find((p) => p !== native)!;
  const results: EmulationResults = { native, emulated, images: [] };
  try {
    checkPlatformSupport(emulated, info, { engineName: engine.name });
  } catch (error) {
    results.skipped = (error as Error).message.split("\n")[0];
    return { results, text: `emulation: skipped: ${results.skipped}` };
  }
  for (const platform of [native, emulated]) {
    const { tag } = runnerImageSpec(platform);
    if ((await engine.imageDetails(tag))?.platform !== platform) {
      progress(`Emulation: building ${tag} (${platform}) ...`);
      await buildRunnerImage(engine, { platform, progress: () => {} });
    }
    const details = await engine.imageDetails(tag);
    results.images.push({ platform, tag, sizeMb: details ? mib(details.sizeBytes) : undefined });
  }
  progress(`Emulation: ${input.runs} interleaved rounds, ${native} vs ${emulated} (emulated) ...`);
  const perCall = await interleave(
    [
      sandboxVariant("native", `${native} (the engine's own)`, platformAgent(input.baseUrl, native), input.scratch),
      sandboxVariant("emulated", `${emulated} under qemu`, platformAgent(input.baseUrl, emulated), input.scratch),
    ],
    { warmup: 1, runs: input.runs, progress },
  );
  results.perCall = perCall;
  const [n, e] = perCall as [VariantResult, VariantResult];
  results.ratio = round(e.medianMs / n.medianMs, 1);
  const phases = ["start", "piStart", "turns", "exit"] as const;
  const text = [
    table(
      ["emulation: the per-call task, runc", "runs", "failures", "median s", "p90 s", ...phases.map((p) => `${p} ms`)],
      perCall.map((r) => [
        r.label,
        r.runs,
        r.failures,
        seconds(r.medianMs),
        seconds(r.p90Ms),
        ...phases.map((p) => r.phasesMedianMs?.[p] ?? "-"),
      ]),
    ),
    `emulated / native (median): ${results.ratio}x; images: ${results.images.map((i) => `${i.platform} ${i.sizeMb ?? "?"} MiB`).join(", ")}`,
  ].join("\n");
  return { results, text };
}
