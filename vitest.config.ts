import { defineConfig } from "vitest/config";

// Two projects: unit tests need no engine and run anywhere (`npm run test:unit`, also with the
// Docker engine stopped); integration tests use the real engine, image and Pi, behind a global
// set-up that checks the engine and builds the image when it is missing.
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
        test: {
          name: "integration",
          // examples/ carry their own tests (e.g. a workflow replayed from committed recordings).
          include: ["tests/integration/**/*.test.ts", "examples/**/*.test.ts"],
          testTimeout: 120_000,
          hookTimeout: 300_000,
          // Files start real containers: they run in parallel, tests inside a file in order.
          fileParallelism: true,
          maxWorkers: 4,
          globalSetup: ["tests/support/global-setup.ts"],
        },
      },
    ],
  },
});
