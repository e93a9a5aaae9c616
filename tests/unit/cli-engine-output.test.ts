// What an engine answers (container labels, image tags, its error messages) reaches the terminal
// with control characters escaped, like everything the sandbox chose (E4): `gc` and `image prune`
// against a stand-in engine on a unix socket that answers with escape sequences.
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CliIo } from "../../src/cli/cli-io.js";
import { gcCommand } from "../../src/cli/gc-command.js";
import { prune } from "../../src/cli/image-command.js";
import type { CommandContext } from "../../src/cli/lazy-command.js";
import { IMAGE_REPOSITORY } from "../../src/image/runner-image.js";
import { createRunDir, removeRunDir } from "../../src/run/run-dirs.js";
import { UNCHECKED_PACKS_DIR } from "../../src/workspace/watch-state-file.js";

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const RAW_CONTROLS = /[\u001b\u0007\r]/;
const ESC = "\u001b]0;PWNED\u0007\u001b[2K\rsandbox-run: all clean\u001b[31m";
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-engine-output-"));
const socketPath = path.join(dir, "engine.sock");
let deletes = 0;
const server = http.createServer((req, res) => {
  if (req.method === "DELETE") deletes++;
  const json = (status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  if (req.url?.includes("/_ping")) return res.end("OK");
  if (req.method === "GET" && req.url?.includes("/containers/json"))
    return json(200, [
      {
        Id: "a".repeat(64),
        State: "exited",
        Labels: {
          "sandbox-run.managed": "true",
          "sandbox-run.run-id": `x${ESC}`,
          "sandbox-run.deadline": "2000-01-01T00:00:00Z",
        },
      },
    ]);
  if (req.method === "GET" && req.url?.includes("/images/json"))
    return json(200, [{ Id: "sha256:1", RepoTags: [`${IMAGE_REPOSITORY}:old${ESC}`], Labels: {} }]);
  if (req.method === "DELETE" && req.url?.includes("/images/")) return json(409, { message: `in use${ESC}` });
  if (req.method === "DELETE") {
    res.writeHead(204);
    return res.end();
  }
  json(404, { message: "no such thing" });
});
// Every engine here is the stand-in: an engines file for gc, DOCKER_HOST for prune (it reads the
// process's), so nothing reaches a real engine.
const enginesFile = path.join(dir, "engines.json");
fs.writeFileSync(
  enginesFile,
  JSON.stringify({ engines: [{ name: "local", host: `unix://${socketPath}`, capacity: 1 }] }),
);
const { DOCKER_HOST: dockerHost, TMPDIR: tmpDir } = process.env;
beforeAll(async () => {
  process.env.DOCKER_HOST = `unix://${socketPath}`;
  // gc's run folders: this test's own, not the host's.
  process.env.TMPDIR = dir;
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
});
afterAll(async () => {
  if (dockerHost === undefined) delete process.env.DOCKER_HOST;
  else process.env.DOCKER_HOST = dockerHost;
  if (tmpDir === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = tmpDir;
  await new Promise((resolve) => server.close(resolve));
  fs.rmSync(dir, { recursive: true, force: true });
});

function io(env: Record<string, string>) {
  const out = { stdout: "", stderr: "" };
  const cliIo: CliIo = {
    stdout: (text) => void (out.stdout += text),
    stderr: (text) => void (out.stderr += text),
    readStdin: async () => undefined,
    env,
    stderrIsTty: true,
  };
  return { cliIo, out };
}

describe("engine answers on the terminal", () => {
  it("gc: a run id from a container's labels is shown escaped", async () => {
    const { cliIo, out } = io({});
    await gcCommand({ engines: enginesFile }, cliIo);
    expect(out.stderr).toContain(
      "(run x\\x1b]0;PWNED\\x07\\x1b[2K\\x0dsandbox-run: all clean\\x1b[31m): past its deadline",
    );
    expect(out.stderr).not.toMatch(RAW_CONTROLS);
  });

  it("gc --dry-run: says what it would remove, escaped, and asks the engine to remove nothing", async () => {
    const { cliIo, out } = io({});
    const before = deletes;
    expect(await gcCommand({ engines: enginesFile, dryRun: true }, cliIo)).toBe(0);
    expect(deletes).toBe(before);
    expect(out.stderr).toMatch(/^would remove aaaaaaaaaaaa \(run x\\x1b\]0;PWNED.*\): past its deadline\n/);
    expect(out.stderr).toContain(
      "dry run: 1 container(s), 0 run folder(s) and 0 tree hold(s) would be removed; nothing was changed\n",
    );
    expect(out.stderr).not.toMatch(RAW_CONTROLS);
    // The same gc without it removes it.
    await gcCommand({ engines: enginesFile }, io({}).cliIo);
    expect(deletes).toBe(before + 1);
  });

  it("gc and gc --dry-run name a folder of packs a run set aside unchecked, and keep it (session 35: never listed)", async () => {
    const runDir = createRunDir("keptpacks1", dir);
    const packs = path.join(runDir, UNCHECKED_PACKS_DIR);
    fs.mkdirSync(packs);
    fs.writeFileSync(path.join(packs, "pack-2.pack"), Buffer.alloc(2 * 1024 * 1024));
    fs.writeFileSync(path.join(packs, "pack-2.idx"), "x");
    removeRunDir(runDir);
    try {
      for (const dryRun of [true, false]) {
        const { cliIo, out } = io({});
        await gcCommand({ engines: enginesFile, dryRun }, cliIo);
        expect(out.stderr).toContain(
          `kept ${packs} (2 file(s), 2.0 MiB): git packs a run set aside because this host could not check them\n`,
        );
        expect(out.stderr).toContain("git index-pack --verify <pack>");
        expect(fs.existsSync(path.join(packs, "pack-2.pack"))).toBe(true);
      }
    } finally {
      fs.rmSync(runDir, { recursive: true, force: true });
    }
  });

  it("image prune: the engine's tags and refusals are shown escaped", async () => {
    const { cliIo, out } = io({});
    await prune({ io: cliIo } as CommandContext);
    expect(out.stderr).toContain(`kept ${IMAGE_REPOSITORY}:old\\x1b]0;PWNED`);
    expect(out.stdout + out.stderr).not.toMatch(RAW_CONTROLS);
  });
});

describe("an engine that accepts and never answers", () => {
  it("gc and doctor give up on its ping after the timeout, naming it", async () => {
    const { pingWithin } = await import("../../src/operations/engine-choice.js");
    const { DockerEngine } = await import("../../src/engine/docker-engine.js");
    const silentPath = path.join(dir, "silent.sock");
    const silent = http.createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(silentPath, resolve));
    try {
      const engine = new DockerEngine({ name: "mute", endpoint: { kind: "unix", socketPath: silentPath } });
      await expect(pingWithin(engine, 300)).rejects.toThrow(
        `Engine "mute" at unix://${silentPath} did not answer its ping within 0.3 s.`,
      );
    } finally {
      silent.closeAllConnections();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});

describe("the environment an operation is given", () => {
  it("chooses its engine: DOCKER_HOST from options.env, not the process's", async () => {
    const { chosenEnginePool } = await import("../../src/operations/engine-choice.js");
    // The process's DOCKER_HOST is the stand-in (beforeAll); the given env names another socket.
    const pool = chosenEnginePool(undefined, { DOCKER_HOST: "unix:///nonexistent/given.sock" });
    try {
      expect(pool.engines.map((e) => e.address)).toEqual(["unix:///nonexistent/given.sock"]);
    } finally {
      pool.close();
    }
  });
});
