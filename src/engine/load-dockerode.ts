// dockerode without the parts of it our runs never touch loaded up front. Its entry requires
// BuildKit's session support (gRPC and protobuf, for `buildImage` with a session) and docker-modem
// requires its ssh:// transport (ssh2) at load time: ~85 and ~50 ms of CPU that every CLI run paid
// before its first engine call (our ssh:// engines go through ssh-tunnel.ts, and our image builds
// use the classic builder, without a session). Each of the two modules is put in Node's module
// cache as a stand-in that loads the real one on its first call, so nothing changes for a caller
// that does use them.
// Where the build made dist/vendor/dockerode.cjs (scripts/bundle-vendored.mjs), that is loaded
// instead: dockerode and its ~50 files in one, the same modules deferred there (and split-ca), ~35 ms
// of CPU less to load.
// Only a speed-up: when a file is not where this dockerode version keeps it, dockerode loads as is.
import { createRequire, Module } from "node:module";
import type Docker from "dockerode";
import { requireVendored } from "../util/vendored.js";

/** The two modules, each a single exported function, as dockerode and docker-modem require them. */
const DEFERRED: Array<{ from: "dockerode" | "docker-modem"; file: string }> = [
  { from: "dockerode", file: "dockerode/lib/session.js" },
  { from: "docker-modem", file: "docker-modem/lib/ssh.js" },
];

let loaded: typeof Docker | undefined;

export function loadDockerode(): typeof Docker {
  loaded ??= requireVendored<typeof Docker>("dockerode", loadFromPackage);
  return loaded;
}

/** dockerode from its package, with the two modules deferred (no bundle: run from the sources). */
function loadFromPackage(require: NodeJS.Require): typeof Docker {
  const dockerodeRequire = createRequire(require.resolve("dockerode"));
  const requireFor = { dockerode: require, "docker-modem": dockerodeRequire };
  for (const { from, file } of DEFERRED) {
    try {
      deferUntilCalled(requireFor[from], requireFor[from].resolve(file));
    } catch {
      // Not where this version keeps it: loaded with dockerode, as before.
    }
  }
  return require("dockerode") as typeof Docker;
}

/** Puts a stand-in for the module at `filename` (a function) in the cache; its first call loads the real one. */
function deferUntilCalled(require: NodeJS.Require, filename: string): void {
  if (require.cache[filename]) return;
  let real: ((...args: unknown[]) => unknown) | undefined;
  const standIn = function (this: unknown, ...args: unknown[]) {
    if (!real) {
      delete require.cache[filename];
      real = require(filename) as (...args: unknown[]) => unknown;
    }
    return real.apply(this, args);
  };
  const module = new Module(filename);
  module.filename = filename;
  module.loaded = true;
  module.exports = standIn;
  require.cache[filename] = module;
}
