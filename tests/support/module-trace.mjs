// `node --import <this file> ...`: records every module the process loads into the file
// SANDBOX_RUN_MODULE_TRACE names, one per line: ES modules as the loader resolves them ("esm <url>"),
// CommonJS modules as they are in require's cache when the process exits ("cjs <path>"), and
// Node's own modules the main thread loaded ("builtin <name>"). For tests/unit/cli-start-up.test.ts,
// which checks what `sandbox-run --help` and friends load.
import fs from "node:fs";
import { createRequire, register } from "node:module";

const file = process.env.SANDBOX_RUN_MODULE_TRACE;
if (file) {
  register(new URL("./module-trace-hooks.mjs", import.meta.url), { data: { file } });
  const cache = createRequire(import.meta.url).cache;
  process.on("exit", () => {
    fs.appendFileSync(
      file,
      Object.keys(cache)
        .map((path) => `cjs ${path}\n`)
        .concat(
          process.moduleLoadList
            .filter((entry) => entry.startsWith("NativeModule "))
            .map((entry) => `builtin ${entry.slice("NativeModule ".length)}\n`),
        )
        .join(""),
    );
  });
}
