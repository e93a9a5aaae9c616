// zod for the whole library: one instance, loaded on first use. Loading zod costs ~60 ms of CPU
// bundled (~105 ms from its 95 files), which `sandbox-run --help`, `--version` and a `--dry-run`
// with a built-in policy never need. The schemas of configuration files (policy, models.json) are
// built on first use through `lazily`, and the rest of the library imports `z` from here, so a
// process that does load zod loads it once.
//
// CommonJS (the build's one-file bundle where there is one: vendored.ts), because the first use can
// be in synchronous code (`ContainerPiAgent.plan()` reads a policy file) and Node 20 cannot import
// an ES module synchronously; `z` is a proxy that loads zod when it is first touched.
import type { z as Zod } from "zod";
import { requireVendored } from "./vendored.js";

let loaded: typeof Zod | undefined;

function load(): typeof Zod {
  loaded ??= requireVendored<{ z: typeof Zod }>("zod", (load) => load("zod")).z;
  return loaded;
}

/** zod's `z`, loaded when first touched. */
export const z: typeof Zod = new Proxy({} as typeof Zod, {
  get: (_target, property) => Reflect.get(load(), property),
  has: (_target, property) => Reflect.has(load(), property),
});

/** zod's types under the same name, as `import { z } from "zod"` gives them. */
export declare namespace z {
  export type infer<T> = Zod.infer<T>;
  export type input<T> = Zod.input<T>;
  export type output<T> = Zod.output<T>;
  export type ZodType<Output = unknown, Input = unknown> = Zod.ZodType<Output, Input>;
}

/** A value (a schema) built on first use, then kept. */
export function lazily<T>(build: () => T): () => T {
  let value: { built: T } | undefined;
  return () => {
    value ??= { built: build() };
    return value.built;
  };
}
