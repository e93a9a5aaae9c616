// `sandbox-run image build --apt` on the real engine: a runner image with more Debian packages,
// used through --image, keeps the boundary (non-root, no setuid binaries); an image that was not
// built from the runner image is refused with a clear error.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { stringify as yamlStringify } from "yaml";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { loadPolicy } from "../../src/policy/load-policy.js";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import {
  bashThenFinal,
  containersOfRuns,
  docker,
  dockerAvailable,
  lastToolResult,
  makeWorkspace,
  modelsFor,
  runBuiltCli,
  startModel,
} from "../support/harness.js";

const PROBE = "jq --version; echo setuid=$(find / -xdev -perm /6000 -type f 2>/dev/null | wc -l); echo uid=$(id -u)";

describe.skipIf(!dockerAvailable())("image build --apt and --image", () => {
  let server: ScriptedModelServer;
  let modelsFile: string;
  const cleanups: Array<() => Promise<unknown>> = [];

  beforeAll(async () => {
    server = await startModel({
      derived: bashThenFinal(PROBE, { done: true }),
      plain: bashThenFinal(PROBE, { done: true }),
      unlabelled: bashThenFinal("true", { done: true }),
      health: bashThenFinal("sleep 4", { done: true }),
      retag: bashThenFinal("if test -e /data; then echo has-data; else echo no-data; fi", { done: true }),
    });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-derived-"));
    modelsFile = path.join(dir, "models.json");
    fs.writeFileSync(
      modelsFile,
      JSON.stringify(modelsFor(server, ["derived", "plain", "unlabelled", "health", "retag"])),
    );
    cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
  });
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    await server?.close();
  });

  const run = (model: string, extra: string[]) =>
    runBuiltCli([
      "-q",
      "--json",
      "--cwd",
      makeWorkspace(),
      "--models",
      modelsFile,
      "--model",
      `scripted/${model}`,
      "--schema",
      schemaFile(),
      ...extra,
      "go",
    ]);

  it("adds the packages, and a run with --image has them, as the same non-root user, with no setuid binary", async () => {
    const build = await runBuiltCli(["image", "build", "--apt", "jq"]);
    expect(build.status, build.stderr).toBe(0);
    const tag = build.stdout.trim();
    expect(tag).toMatch(/^sandbox-run\/pi-apt:/);
    cleanups.push(() => docker.getImage(tag).remove({ force: true }));
    expect((await docker.getImage(tag).inspect()).Config?.Labels?.["sandbox-run.apt-packages"]).toBe("jq");

    const withImage = await run("derived", ["--image", tag]);
    expect(withImage.status, withImage.stderr).toBe(0);
    const envelope = JSON.parse(withImage.stdout);
    expect(envelope).toMatchObject({ ok: true, image: tag });
    const probe = lastToolResult(server, "derived");
    expect(probe).toMatch(/^jq-1\.\d/m);
    expect(probe).toContain("setuid=0");
    expect(probe).not.toMatch(/^uid=0$/m);
    expect(await containersOfRuns([envelope.runId])).toEqual([]);

    // Control: the plain runner image has no jq.
    const plain = await run("plain", []);
    expect(plain.status, plain.stderr).toBe(0);
    expect(lastToolResult(server, "plain")).toMatch(/jq: command not found/);

    // A policy can name the image; --image still wins over it.
    const policyFile = path.join(path.dirname(schemaFile()), "with-jq.yaml");
    fs.writeFileSync(policyFile, `${yamlStringify({ ...loadPolicy("read-only"), name: "with-jq", image: tag })}`);
    const viaPolicy = await run("derived", ["--policy", policyFile]);
    expect(viaPolicy.status, viaPolicy.stderr).toBe(0);
    expect(JSON.parse(viaPolicy.stdout)).toMatchObject({ ok: true, image: tag, policy: "with-jq" });
    expect(lastToolResult(server, "derived")).toMatch(/^jq-1\.\d/m);
    const overridden = await run("plain", ["--policy", policyFile, "--image", inject("runnerImage")]);
    expect(JSON.parse(overridden.stdout)).toMatchObject({ ok: true, image: inject("runnerImage") });
    expect(lastToolResult(server, "plain")).toMatch(/jq: command not found/);
  });

  it("an image not built from the runner image is a usage error that says how to build one", async () => {
    const context = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-unlabelled-"));
    fs.writeFileSync(path.join(context, "Dockerfile"), "FROM scratch\nCOPY Dockerfile /Dockerfile\n");
    const tag = `sandbox-run-test/unlabelled:${process.pid}`;
    const { default: tar } = await import("tar-fs");
    const stream = await docker.buildImage(tar.pack(context) as unknown as NodeJS.ReadableStream, { t: tag });
    await new Promise((resolve, reject) =>
      docker.modem.followProgress(stream, (e: Error | null) => (e ? reject(e) : resolve(undefined))),
    );
    fs.rmSync(context, { recursive: true, force: true });
    cleanups.push(() => docker.getImage(tag).remove({ force: true }));

    const result = await run("unlabelled", ["--image", tag]);
    expect(result.status).toBe(2);
    const envelope = JSON.parse(result.stdout);
    expect(envelope.error.code).toBe("usage");
    expect(envelope.error.message).toBe(
      `The image ${tag} is not a sandbox-run runner image (it has no sandbox-run.pi-version label).`,
    );
    expect(envelope.error.hint).toMatch(/image build --apt/);
    expect(server.requests.filter((r) => r.body.model === "unlabelled")).toEqual([]);

    const doctor = await runBuiltCli(["doctor"], { env: { ...process.env, SANDBOX_RUN_IMAGE: tag } });
    expect(doctor.status).toBe(3);
    expect(doctor.stderr).toContain(`FAIL  The image ${tag} is not a sandbox-run runner image`);
  });

  it("an --apt image built on another version's runner image is refused with the command that rebuilds it", async () => {
    // Such an image, made by relabelling: another runner content hash, an apt package list.
    const source = await docker.createContainer({ Image: inject("runnerImage"), Entrypoint: ["true"] });
    const tag = `sandbox-run/pi-apt:0.0.0-old-${process.pid}`;
    try {
      await source.commit({
        repo: "sandbox-run/pi-apt",
        tag: tag.split(":")[1],
        changes: ["LABEL sandbox-run.content-hash=0123abcd", 'LABEL sandbox-run.apt-packages="jq make"'],
      });
    } finally {
      await source.remove({ force: true });
    }
    cleanups.push(() => docker.getImage(tag).remove({ force: true }));

    const result = await run("unlabelled", ["--image", tag]);
    expect(result.status).toBe(3);
    const envelope = JSON.parse(result.stdout);
    expect(envelope.error).toMatchObject({
      code: "image-missing",
      message: `The image ${tag} was built on the runner image of another sandbox-run version.`,
      hint: "Rebuild it for this version: sandbox-run image build --apt jq,make",
    });
  });

  /** The runner image with Dockerfile instructions on top (`docker commit --change`), tagged for this test. */
  async function derivedImage(name: string, changes: string[]): Promise<string> {
    const source = await docker.createContainer({ Image: inject("runnerImage"), Entrypoint: ["true"] });
    const tag = `sandbox-run-test/${name}:${process.pid}`;
    try {
      await source.commit({ repo: tag.split(":")[0], tag: tag.split(":")[1], changes });
    } finally {
      await source.remove({ force: true });
    }
    cleanups.push(() => docker.getImage(tag).remove({ force: true }));
    return tag;
  }

  // Review, session 34: a derived image's metadata acted in its sandboxes beyond what sandbox-run sets.
  it("an image's HEALTHCHECK never runs in a sandbox (the engine's exec would run it outside the no-setuid filter)", async () => {
    const tag = await derivedImage("healthcheck", [
      'HEALTHCHECK --interval=1s --timeout=2s CMD ["/bin/sh", "-c", "touch health-ran"]',
    ]);
    const ws = makeWorkspace({ "a.txt": "a\n" });
    try {
      const result = await runBuiltCli([
        "-q",
        "--json",
        "--cwd",
        ws,
        "--models",
        modelsFile,
        "--model",
        "scripted/health",
        "--schema",
        schemaFile(),
        "--image",
        tag,
        "go",
      ]);
      expect(result.status, result.stderr).toBe(0);
      // The run lasted over 4 s: a check every second would have made the file in the workspace.
      expect(fs.existsSync(path.join(ws, "health-ran"))).toBe(false);
    } finally {
      fs.rmSync(ws, { recursive: true, force: true });
    }
  });

  it("an image declaring a VOLUME, or one of sandbox-run's container labels, is refused before any container, naming it", async () => {
    const volume = await derivedImage("volume", ["VOLUME /data"]);
    const labelled = await derivedImage("labelled", [
      "LABEL sandbox-run.managed=true sandbox-run.deadline=2000-01-01T00:00:00.000Z",
    ]);
    const before = server.requests.length;
    const withVolume = await run("unlabelled", ["--image", volume]);
    expect(withVolume.status).toBe(2);
    expect(JSON.parse(withVolume.stdout).error.message).toBe(
      `The image ${volume} declares a VOLUME ("/data"): the engine would make a volume on its own disk for each, outside the run's limits and its workspace's rules.`,
    );
    const withLabels = await run("unlabelled", ["--image", labelled]);
    expect(withLabels.status).toBe(2);
    expect(JSON.parse(withLabels.stdout).error.message).toContain(
      `The image ${labelled} declares the labels sandbox-run.managed, sandbox-run.deadline, which sandbox-run sets on its containers`,
    );
    expect(server.requests.length).toBe(before);
    // A container some other tool made from the imitating image is not one of ours to gc.
    const theirs = await docker.createContainer({ Image: labelled, Entrypoint: ["true"] });
    try {
      const gc = await runBuiltCli(["gc", "--dry-run"]);
      expect(gc.status, gc.stderr).toBe(0);
      expect(`${gc.stdout}${gc.stderr}`).not.toContain(theirs.id.slice(0, 12));
      expect((await theirs.inspect()).Id).toBe(theirs.id);
    } finally {
      await theirs.remove({ force: true });
    }
  });

  // Review of this session's change (fix34): an agent checked an image once and made its later
  // containers from the tag, which by then named an image with a VOLUME and our labels.
  it("an agent makes its containers from the image it checked, not from whatever its tag names later", async () => {
    const clean = await derivedImage("retag-clean", ["LABEL org.example.kind=clean"]);
    const bad = await derivedImage("retag-bad", ["VOLUME /data", "LABEL sandbox-run.managed=true"]);
    const [repo, version] = ["sandbox-run-test/retag", String(process.pid)];
    const tag = `${repo}:${version}`;
    await docker.getImage(clean).tag({ repo, tag: version });
    cleanups.push(() => docker.getImage(tag).remove({ force: true }));
    const agent = new ContainerPiAgent({ models: modelsFor(server, ["retag"]), model: "scripted/retag", image: tag });
    const ws = makeWorkspace({ "a.txt": "a\n" });
    try {
      const schema = { type: "object", properties: { done: { type: "boolean" } }, required: ["done"] } as const;
      await agent.run("go", { cwd: ws, schema });
      expect(lastToolResult(server, "retag")).toContain("no-data");
      // The tag now names the image sandbox-run refuses.
      await docker.getImage(bad).tag({ repo, tag: version });
      await agent.run("go", { cwd: ws, schema });
      expect(lastToolResult(server, "retag")).toContain("no-data");
    } finally {
      await agent.close();
      fs.rmSync(ws, { recursive: true, force: true });
    }
  });

  it("an image built FROM another build's runner image runs, with a warning that names the rebuild (review, session 34: no word)", async () => {
    const stale = await derivedImage("stale-base", ["LABEL sandbox-run.content-hash=0123abcd4567ef"]);
    const result = await run("unlabelled", ["--image", stale]);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr).toContain(
      `sandbox-run: warning: the image ${stale} was built FROM the runner image of another sandbox-run build (content hash 0123abcd4567,`,
    );
    expect(result.stderr).toContain(`rebuild it FROM ${inject("runnerImage")}`);
    // A warm call from that image says the same (session 35: the pool's check kept the warning to itself).
    const warm = await runBuiltCli(
      ["-q", "--json", "--cwd", makeWorkspace(), "--models", modelsFile, "--model", "scripted/unlabelled"].concat([
        "--schema",
        schemaFile(),
        "--image",
        stale,
        "go",
      ]),
      { env: { ...process.env, SANDBOX_RUN_WARM: "1" } },
    );
    expect(warm.status, warm.stderr).toBe(0);
    expect(JSON.parse(warm.stdout)).toMatchObject({ ok: true, warm: true });
    expect(warm.stderr).toContain(`sandbox-run: warning: the image ${stale} was built FROM the runner image`);
  });

  it("package names that are not Debian names stop `image build` before the engine is asked", async () => {
    const result = await runBuiltCli(["image", "build", "--apt", "jq;touch /tmp/pwned"]);
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/^sandbox-run: Not Debian package names: .*"jq;touch"/);
  });

  let schemaPath: string | undefined;
  function schemaFile(): string {
    if (!schemaPath) {
      schemaPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-schema-")), "s.json");
      fs.writeFileSync(
        schemaPath,
        JSON.stringify({ type: "object", properties: { done: { type: "boolean" } }, required: ["done"] }),
      );
      const dir = path.dirname(schemaPath);
      cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
    }
    return schemaPath;
  }
});
