// `sandbox-run image load <tar>` on the real engine: the GitHub Action loads its cached runner image
// this way, and the cache's key is public, so the tar is whoever wrote it's word. `docker load`
// applies every tag a tar names; this loads a tar only if it tags the one image asked for.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import tarStream from "tar-stream";
import { afterAll, describe, expect, it } from "vitest";
import { docker, runBuiltCli } from "../support/harness.js";
import { hostTmp } from "../support/hostile-model.js";

const suffix = crypto.randomBytes(4).toString("hex");
const wanted = `sandbox-run-test/load:${suffix}`;
const victim = `sandbox-run-test/victim:${suffix}`;
const made: string[] = [];
afterAll(async () => {
  for (const tag of [wanted, victim])
    await docker
      .getImage(tag)
      .remove({ force: true })
      .catch(() => {});
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

const sha256 = (data: Buffer) => crypto.createHash("sha256").update(data).digest("hex");

/** A one-layer image as `docker save` writes it, its manifest naming `tags`. */
async function imageTar(tags: string[]): Promise<string> {
  const layer = await packed([{ name: "hello.txt", body: Buffer.from("hello\n") }]);
  const config = Buffer.from(
    JSON.stringify({
      architecture: "amd64",
      os: "linux",
      config: {},
      rootfs: { type: "layers", diff_ids: [`sha256:${sha256(layer)}`] },
    }),
  );
  const configName = `${sha256(config)}.json`;
  const manifest = Buffer.from(JSON.stringify([{ Config: configName, RepoTags: tags, Layers: ["l/layer.tar"] }]));
  const dir = fs.mkdtempSync(path.join(hostTmp(), "sandbox-run-image-load-"));
  made.push(dir);
  const file = path.join(dir, "image.tar");
  fs.writeFileSync(
    file,
    await packed([
      { name: "l/layer.tar", body: layer },
      { name: configName, body: config },
      { name: "manifest.json", body: manifest },
    ]),
  );
  return file;
}

async function packed(entries: Array<{ name: string; body: Buffer }>): Promise<Buffer> {
  const pack = tarStream.pack();
  for (const { name, body } of entries) pack.entry({ name }, body);
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const tagged = async (tag: string) =>
  docker
    .getImage(tag)
    .inspect()
    .then(() => true)
    .catch(() => false);

describe("image load", () => {
  it("loads a tar that tags only the image asked for; one that also tags another image loads nothing", async () => {
    const hostile = await runBuiltCli(["image", "load", await imageTar([wanted, victim]), "--tag", wanted]);
    expect(hostile.status, hostile.stderr).toBe(3);
    expect(hostile.stderr).toContain(`sent ${wanted} with manifest.json naming ${victim}: nothing was loaded.`);
    expect(await tagged(wanted)).toBe(false);
    expect(await tagged(victim)).toBe(false);

    const plain = await runBuiltCli(["image", "load", await imageTar([wanted]), "--tag", wanted]);
    expect(plain.status, plain.stderr).toBe(0);
    expect(await tagged(wanted)).toBe(true);
    expect(await tagged(victim)).toBe(false);
  });
});
