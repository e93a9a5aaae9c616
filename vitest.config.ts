import { defineConfig } from "vitest/config";

// Unit tests need no engine and run anywhere (`npm run test:unit`, also with the Docker engine
// stopped); integration tests use the real engine, image and Pi, behind a global set-up that checks
// the engine and builds the image when it is missing. "integration-copy" runs the security suites
// again with every run in copy mode (SANDBOX_RUN_WORKSPACE=copy): the same promises, no bind mounts.
const integration = {
  testTimeout: 120_000,
  hookTimeout: 300_000,
  // Files start real containers: they run in parallel, tests inside a file in order.
  fileParallelism: true,
  maxWorkers: 4,
  globalSetup: ["tests/support/global-setup.ts"],
};

export default defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 300_000,
    projects: [
      {
        test: {
          name: "unit",
          include: ["tests/unit/**/*.test.ts"],
        },
      },
      {
        test: { name: "integration", include: ["tests/integration/**/*.test.ts"], ...integration },
      },
      {
        test: {
          name: "integration-copy",
          include: ["tests/integration/security-*.test.ts"],
          env: { SANDBOX_RUN_WORKSPACE: "copy" },
          ...integration,
        },
      },
    ],
  },
});
