// The integration-arm64 project's set-up, after the shared one (global-setup.ts): the engine must be
// able to run linux/arm64 containers (this machine's kernel has qemu-aarch64 registered with the F
// flag: scripts/setup-emulation.sh), and the arm64 runner image is built when it is missing (about
// 10 minutes under emulation on 2 cores; docs/performance.md). On CI a missing emulator fails the run.
import type { TestProject } from "vitest/node";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import { checkPlatformSupport } from "../../src/engine/platform-support.js";
import { buildRunnerImage } from "../../src/image/build-runner-image.js";
import { runnerImageSpec } from "../../src/image/runner-image.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** The engine can run linux/arm64 containers and holds the arm64 runner image (its tag). */
    arm64Image: string | undefined;
    /** Seconds the arm64 image took to build in this set-up (0: it was there already). */
    arm64BuildSeconds: number;
  }
}

export default async function setup(project: TestProject): Promise<void> {
  project.provide("arm64Image", undefined);
  project.provide("arm64BuildSeconds", 0);
  const engine = new DockerEngine();
  try {
    await engine.ping();
  } catch (error) {
    if (process.env.CI) throw error;
    return;
  }
  const info = await engine.info();
  try {
    checkPlatformSupport("linux/arm64", info, { engineName: engine.name });
  } catch (error) {
    if (process.env.CI) throw new Error(`CI runs the arm64 project under emulation: ${(error as Error).message}`);
    console.warn(`The integration-arm64 project is skipped here: ${(error as Error).message}`);
    return;
  }
  const tag = runnerImageSpec("linux/arm64").tag;
  let seconds = 0;
  if ((await engine.imageDetails(tag))?.platform !== "linux/arm64") {
    console.warn(`Building the arm64 runner image ${tag} under emulation for the tests (about 10 minutes) ...`);
    const started = Date.now();
    await buildRunnerImage(engine, { platform: "linux/arm64", progress: () => {} });
    seconds = Math.round((Date.now() - started) / 1000);
  }
  project.provide("arm64Image", tag);
  project.provide("arm64BuildSeconds", seconds);
}
