// dockerode loaded with its BuildKit session (gRPC, protobuf) and docker-modem's ssh:// transport
// (ssh2) deferred to their first call (src/engine/load-dockerode.ts): not loaded with it, and each
// stand-in hands its calls to the real module once loaded. Checked in a Node process of its own,
// whose module cache holds only what this check loads (the test worker's may hold other files').
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const LOADER = fileURLToPath(new URL("../../src/engine/load-dockerode.ts", import.meta.url));

const CHECK = `
import http from "node:http";
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const loaded = (pattern) => Object.keys(require.cache).filter((file) => pattern.test(file));
const DEFERRED = /node_modules\\/(@grpc\\/|protobufjs\\/|ssh2\\/)/;
const seen = { before: loaded(/node_modules\\/dockerode\\//).length };
const { loadDockerode } = await import(${JSON.stringify(LOADER)});
const Docker = loadDockerode();
seen.isFunction = typeof Docker === "function";
seen.hasModem = new Docker({ socketPath: "/nonexistent.sock" }).modem !== undefined;
seen.dockerode = loaded(/node_modules\\/dockerode\\//).length;
seen.deferred = loaded(DEFERRED);
const ssh = createRequire(require.resolve("dockerode"))("docker-modem/lib/ssh.js");
seen.sshAgent = ssh({ host: "127.0.0.1", port: 9 }) instanceof http.Agent;
seen.ssh2 = loaded(/node_modules\\/ssh2\\//).length;
seen.grpc = loaded(/node_modules\\/@grpc\\//);
seen.sameOnSecondCall = loadDockerode() === Docker;
console.log(JSON.stringify(seen));
`;

it("loads dockerode without gRPC, protobuf or ssh2; the ssh transport's stand-in loads ssh2 on its first call and returns its agent", () => {
  const child = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", CHECK], {
    cwd: fileURLToPath(new URL("../..", import.meta.url)),
    encoding: "utf8",
    // Synchronous: vitest's own timeout cannot interrupt it, and the worker's other files wait.
    timeout: 60_000,
  });
  expect(child.signal, child.stderr).toBeNull();
  expect(child.status, child.stderr).toBe(0);
  const seen = JSON.parse(child.stdout.trim().split("\n").at(-1)!);
  expect(seen.before).toBe(0);
  expect(seen.isFunction).toBe(true);
  expect(seen.hasModem).toBe(true);
  expect(seen.dockerode).toBeGreaterThan(0);
  expect(seen.deferred).toEqual([]);
  expect(seen.sshAgent).toBe(true);
  expect(seen.ssh2).toBeGreaterThan(0);
  expect(seen.grpc).toEqual([]);
  // Loaded once: the same dockerode on every call.
  expect(seen.sameOnSecondCall).toBe(true);
});
