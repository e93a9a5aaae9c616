// dockerode loaded with its BuildKit session (gRPC, protobuf) and docker-modem's ssh:// transport
// (ssh2) deferred to their first call (src/engine/load-dockerode.ts): not loaded with it, and each
// stand-in hands its calls to the real module once loaded.
import http from "node:http";
import { createRequire } from "node:module";
import { expect, it } from "vitest";
import { loadDockerode } from "../../src/engine/load-dockerode.js";

const require = createRequire(import.meta.url);
const loaded = (pattern: RegExp) => Object.keys(require.cache).filter((file) => pattern.test(file));
const DEFERRED = /node_modules\/(@grpc\/|protobufjs\/|ssh2\/)/;

it("loads dockerode without gRPC, protobuf or ssh2; the ssh transport's stand-in loads ssh2 on its first call and returns its agent", () => {
  expect(loaded(/node_modules\/dockerode\//)).toEqual([]);
  const Docker = loadDockerode();
  expect(typeof Docker).toBe("function");
  expect(new Docker({ socketPath: "/nonexistent.sock" }).modem).toBeDefined();
  expect(loaded(/node_modules\/dockerode\//).length).toBeGreaterThan(0);
  expect(loaded(DEFERRED)).toEqual([]);

  const ssh = createRequire(require.resolve("dockerode"))("docker-modem/lib/ssh.js") as (opt: object) => unknown;
  const agent = ssh({ host: "127.0.0.1", port: 9 });
  expect(agent).toBeInstanceOf(http.Agent);
  expect(loaded(/node_modules\/ssh2\//).length).toBeGreaterThan(0);
  expect(loaded(/node_modules\/@grpc\//)).toEqual([]);
  // Loaded once: the same dockerode on every call.
  expect(loadDockerode()).toBe(Docker);
});
