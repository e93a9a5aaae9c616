import { defineConfig } from "vitest/config";
import { LongestFirstSequencer } from "./tests/support/longest-first-sequencer.js";

// Unit tests need no engine and run anywhere (`npm run test:unit`, also with the Docker engine
// stopped); integration tests use the real engine, image and Pi, behind a global set-up that checks
// the engine and builds the image when it is missing. "integration-copy" runs the security suites
// again with every run in copy mode (SANDBOX_RUN_WORKSPACE=copy): the same promises, no bind mounts;
// "integration-remote" runs them with every run on an engine of another machine (mutual TLS);
// "integration-arm64" runs a task and the core boundary checks on the linux/arm64 image, emulated.
// "integration-warm" runs them with every agent keeping a warm sandbox (SANDBOX_RUN_WARM=1): each
// call is served by a sandbox made before it (copy mode, the workspace at /workspace).
const integration = {
  // A test's runs take seconds; the margin is for a slower or loaded machine (the hostile runs'
  // own timeout is 180 s), where a test that passes must not be cut short.
  testTimeout: 300_000,
  hookTimeout: 300_000,
  // Files start real containers: they run in parallel, tests inside a file in order.
  fileParallelism: true,
  globalSetup: ["tests/support/global-setup.ts"],
};

export default defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 300_000,
    // The pool's size is the root's (a project's maxWorkers is not read): without it vitest runs
    // cores - 1 files at once, one on a 2-core machine, and the engine tests, which mostly wait on
    // containers, would run one file after another.
    maxWorkers: 4,
    // A step's longest files start first, so its end is short files on every worker.
    sequence: { sequencer: LongestFirstSequencer },
    projects: [
      {
        test: {
          name: "unit",
          // Projects do not take the root's timeouts; four files at once on two cores need more than 5 s.
          testTimeout: 30_000,
          include: ["tests/unit/**/*.test.ts"],
          globalSetup: ["tests/support/unit-setup.ts"],
        },
      },
      {
        // examples/ carry their own tests (e.g. a workflow replayed from committed recordings).
        test: {
          name: "integration",
          include: ["tests/integration/**/*.test.ts", "examples/**/*.test.ts"],
          ...integration,
        },
      },
      {
        test: {
          name: "integration-copy",
          // Cold copy-mode calls on the local engine, for the security suites the remote project
          // does not run. The others run in copy mode there: a remote engine forces copy mode, and
          // once planned a copy-mode call takes the same path whichever engine it is placed on (the
          // tests do not tell the two apart either), so running them here as well proved nothing
          // new. The local engine's copy path runs them again in the warm project (a warm call is
          // a copy-mode call on the local engine, through the same relay).
          include: ["tests/integration/security-{network-flood,failure-contract,workspace-git}.test.ts"],
          env: { SANDBOX_RUN_WORKSPACE: "copy" },
          ...integration,
        },
      },
      {
        test: {
          name: "integration-arm64",
          // A real task and the core boundary checks on the linux/arm64 runner image, under qemu on an
          // x86-64 machine (arm64-setup.ts builds the image when missing and checks the emulator).
          include: ["tests/arm64/**/*.test.ts"],
          ...integration,
          globalSetup: ["tests/support/global-setup.ts", "tests/support/arm64-setup.ts"],
          // Pi under emulation takes seconds to start; the runs of a file go one by one.
          testTimeout: 600_000,
        },
      },
      {
        test: {
          name: "integration-warm",
          // The copy project's suites: a warm call is a copy-mode call. Not the two floods of the
          // gateway (network-flood, gateway-memory): they load the relay and the controller's
          // gateway, which a warm call reaches exactly as a cold copy-mode call does (the same relay
          // in the launcher, the same exec), and they run in the copy project.
          include: [
            "tests/integration/security-{filesystem,secrets,privilege,network,limits,repo-content,lifecycle,failure-contract,workspace-git}.test.ts",
          ],
          env: { SANDBOX_RUN_WORKSPACE: "copy", SANDBOX_RUN_WARM: "1" },
          ...integration,
        },
      },
      {
        test: {
          name: "integration-remote",
          // The security suites again, every run on the second engine (another machine, mutual
          // TLS; tests/support/second-engine.ts), which forces copy mode: harness.ts points
          // SANDBOX_RUN_ENGINES at an engines file naming only that engine.
          include: [
            "tests/integration/security-{filesystem,secrets,privilege,network,limits,output-limits,stream-memory,gateway-memory,repo-content,lifecycle}.test.ts",
          ],
          env: { SANDBOX_RUN_WORKSPACE: "copy", SANDBOX_RUN_TEST_ENGINE: "remote" },
          ...integration,
        },
      },
    ],
  },
});
