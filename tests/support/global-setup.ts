// Runs once before all test files: makes sure the Docker engine answers and the runner image
// exists (building it if needed). On CI a missing engine fails the run; it is never a skip.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import { buildRunnerImage } from "../../src/image/build-runner-image.js";
import { ensureRunnerImage } from "../../src/image/ensure-runner-image.js";
import { runnerImageSpec } from "../../src/image/runner-image.js";
import { bundleTestScripts } from "./bundle-test-scripts.js";
import {
  engineFileEntry,
  remoteEngine,
  type SecondEngineState,
  secondEngineExpected,
  useSecondEngine,
} from "./second-engine.js";
import { useTestTmp } from "./test-tmp.js";

declare module "vitest" {
  export interface ProvidedContext {
    dockerAvailable: boolean;
    runnerImage: string;
    /** gVisor is registered with the engine: core integration cases run on it too. */
    runscAvailable: boolean;
    /**
     * The "integration-remote" project (SANDBOX_RUN_TEST_ENGINE=remote): the second engine every
     * run goes to, and an engines file naming only it (harness.ts points SANDBOX_RUN_ENGINES at it).
     */
    remoteEngine: { state: SecondEngineState; enginesFile: string } | undefined;
    /** The folder of the helper programs tests start as processes, bundled (bundle-test-scripts.ts). */
    testScriptsDir: string;
  }
}

/**
 * Tells `npm test` (scripts/run-tests.ts names the file in SANDBOX_RUN_TEST_SKIPS) that this
 * project's engine tests are skipped, and why: its step then fails with that reason at the end of
 * the run instead of passing with every test skipped. Run as `npx vitest`, its warning is all.
 */
function reportSkip(project: TestProject, reason: string): void {
  const file = process.env.SANDBOX_RUN_TEST_SKIPS;
  if (file) fs.appendFileSync(file, `${JSON.stringify({ project: project.name, reason })}\n`);
}

/** Runs of the project go to the second engine (tests/support/second-engine.ts) only. */
async function useRemoteEngine(project: TestProject, local: DockerEngine, dir: string): Promise<() => Promise<void>> {
  const { state, release } = await useSecondEngine();
  // Loaded once here, before the files run, rather than by the first runs of every file at once.
  await ensureRunnerImage(remoteEngine(state), {
    sources: [local],
    progress: (line) => console.warn(line),
  });
  const enginesFile = path.join(dir, "engines-remote.json");
  // Capacity for every run the files start at once (the lifecycle suite starts 8 together).
  fs.writeFileSync(enginesFile, JSON.stringify({ engines: [engineFileEntry(state, 16)] }));
  project.provide("remoteEngine", { state, enginesFile });
  return release;
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const removeTestTmp = useTestTmp();
  const testTmp = os.tmpdir(); // the folder useTestTmp made
  let releaseRemote = async () => {};
  const scripts = await bundleTestScripts(project.name);
  project.provide("testScriptsDir", scripts.dir);
  const teardown = async () => {
    await releaseRemote();
    scripts.remove();
    removeTestTmp();
  };
  const engine = new DockerEngine();
  const tag = runnerImageSpec().tag;
  try {
    await engine.ping();
  } catch (error) {
    if (process.env.CI) throw new Error(`Integration tests need a Docker engine on CI: ${(error as Error).message}`);
    console.warn(`Docker is not reachable; integration tests will be skipped locally (${(error as Error).message})`);
    reportSkip(project, (error as { shortMessage?: string }).shortMessage ?? (error as Error).message);
    project.provide("dockerAvailable", false);
    project.provide("runnerImage", tag);
    project.provide("runscAvailable", false);
    project.provide("remoteEngine", undefined);
    return teardown;
  }
  if (!(await engine.imageLabels(tag))) {
    console.warn(`Building the runner image ${tag} for the tests ...`);
    await buildRunnerImage(engine, { progress: () => {} });
  }
  const runtimes = Object.keys((await engine.info()).runtimes);
  const runsc = runtimes.includes("runsc");
  if (!runsc && process.env.CI)
    throw new Error("CI runs the core cases on gVisor too: register runsc (scripts/setup-host.sh does)");
  project.provide("dockerAvailable", true);
  project.provide("runnerImage", tag);
  project.provide("runscAvailable", runsc);
  project.provide("remoteEngine", undefined);
  if (project.config.env?.SANDBOX_RUN_TEST_ENGINE === "remote") {
    if (!secondEngineExpected()) {
      // Off CI, on a machine that cannot start a second engine (not root, no dockerd): skipped like
      // the engine tests. On CI this never happens: a missing engine fails in useSecondEngine.
      console.warn("No second engine here; the integration-remote project's suites are skipped");
      project.provide("dockerAvailable", false);
      return teardown;
    }
    releaseRemote = await useRemoteEngine(project, engine, testTmp);
  }
  return teardown;
}
