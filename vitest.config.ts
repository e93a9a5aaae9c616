import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["tests/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 300_000,
    // Integration files start real containers; files run in parallel, tests inside a file in order.
    fileParallelism: true,
    maxWorkers: 4,
    globalSetup: ["tests/support/global-setup.ts"],
  },
});
