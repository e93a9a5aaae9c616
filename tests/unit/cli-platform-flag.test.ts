// --platform through the CLI, in-process: the plan names the platform and its runner image (a dry
// run asks no engine: DOCKER_HOST points at a socket that counts connections), a bad name is a usage
// error, and `image tag --platform` prints the platform's tag.
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runnerImageSpec } from "../../src/image/runner-image.js";
import { runCliInProcess } from "../support/in-process-cli.js";

const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-cli-platform-")));
const modelsFile = path.join(dir, "models.json");
fs.writeFileSync(
  modelsFile,
  JSON.stringify({
    providers: { scripted: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", models: [{ id: "x" }] } },
  }),
);
let engineConnections = 0;
const engine = net.createServer((socket) => {
  engineConnections++;
  socket.destroy();
});
const socketPath = path.join(dir, "engine.sock");
beforeAll(() => new Promise<void>((resolve) => engine.listen(socketPath, resolve)));
afterAll(async () => {
  await new Promise<void>((resolve) => engine.close(() => resolve()));
  fs.rmSync(dir, { recursive: true, force: true });
});

function cli(argv: string[], env: Record<string, string> = {}) {
  return runCliInProcess(argv, { DOCKER_HOST: `unix://${socketPath}`, ...env });
}

// The workspace beside the models file, not around it (a models file inside it would be refused).
const ws = path.join(dir, "ws");
fs.mkdirSync(ws);
const run = ["--model", "scripted/x", "--models", modelsFile, "--cwd", ws, "--dry-run"];

describe("--platform on the command line", () => {
  it("plans the platform and its runner image, without asking any engine", async () => {
    const before = engineConnections;
    const result = await cli([...run, "--platform", "linux/arm64", "go"]);
    expect(result.code, result.stderr).toBe(0);
    const plan = JSON.parse(result.stdout);
    expect(plan.platform).toBe("linux/arm64");
    expect(plan.image).toBe(runnerImageSpec("linux/arm64").tag);
    expect(engineConnections).toBe(before);
  });

  it("takes SANDBOX_RUN_PLATFORM when the flag is absent, the flag over it", async () => {
    const fromEnv = await cli([...run, "go"], { SANDBOX_RUN_PLATFORM: "arm64" });
    expect(JSON.parse(fromEnv.stdout).platform).toBe("linux/arm64");
    const flag = await cli([...run, "--platform", "linux/amd64", "go"], { SANDBOX_RUN_PLATFORM: "arm64" });
    expect(JSON.parse(flag.stdout)).toMatchObject({
      platform: "linux/amd64",
      image: runnerImageSpec("linux/amd64").tag,
    });
  });

  it("refuses a platform without a runner image: exit 2, one message, nothing on stdout", async () => {
    const result = await cli([...run, "--platform", "linux/s390x", "go"]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain('--platform names the platform "linux/s390x"');
  });

  it("prints each platform's tag with `image tag --platform`", async () => {
    expect((await cli(["image", "tag", "--platform", "linux/arm64"])).stdout).toBe(
      `${runnerImageSpec("linux/arm64").tag}\n`,
    );
    expect((await cli(["image", "tag", "--platform", "amd64"])).stdout).toBe(`${runnerImageSpec("linux/amd64").tag}\n`);
  });
});
