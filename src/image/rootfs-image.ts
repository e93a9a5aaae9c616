// A root filesystem made on this host (debootstrap) as an image of a given platform. `docker
// import --platform` would do it, but Docker 20.10 ignores the architecture there and stamps its
// own on every import (checked: an arm64 rootfs imported with --platform linux/arm64 came out
// linux/amd64, and `--platform linux/arm64` runs then refused it). So the image is written in
// `docker save`'s layout (manifest.json, the config with the right architecture, one layer) and
// loaded: every engine version reads that the same way.
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import tarStream from "tar-stream";
import type { Engine } from "../engine/engine.js";
import { hostProgramEnv } from "../util/host-programs.js";
import { ARCH_NAMES, type RunnerPlatform } from "../util/platform.js";

const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

interface ImageConfigInput {
  platform: RunnerPlatform;
  /** sha256 of the uncompressed layer tar, hex. */
  layerDigest: string;
  created: Date;
  comment: string;
}

/** The image config (OCI/Docker image JSON) of a one-layer image. */
export function rootfsImageConfig(input: ImageConfigInput): Record<string, unknown> {
  const created = input.created.toISOString();
  return {
    architecture: ARCH_NAMES[input.platform].docker,
    os: "linux",
    created,
    config: { Env: [`PATH=${DEFAULT_PATH}`], Cmd: ["bash"] },
    rootfs: { type: "layers", diff_ids: [`sha256:${input.layerDigest}`] },
    history: [{ created, created_by: input.comment }],
  };
}

/** The `docker save` layout around a layer: its file names and manifest.json. */
export function saveLayout(ref: string, config: Record<string, unknown>) {
  const configJson = JSON.stringify(config);
  const configName = `${crypto.createHash("sha256").update(configJson).digest("hex")}.json`;
  const manifest = JSON.stringify([{ Config: configName, RepoTags: [ref], Layers: ["layer.tar"] }]);
  return { configName, configJson, manifest };
}

/**
 * Tars `rootfs` (with the host's tar, which keeps owners, modes and device nodes) into `workDir`,
 * then loads it onto the engine as `ref`, an image of `platform`.
 */
export async function loadRootfsImage(
  engine: Engine,
  options: { rootfs: string; workDir: string; ref: string; platform: RunnerPlatform; comment: string },
): Promise<void> {
  const layerFile = path.join(options.workDir, "layer.tar");
  await tarInto(options.rootfs, layerFile);
  const hash = crypto.createHash("sha256");
  await pipeline(fs.createReadStream(layerFile), hash);
  const config = rootfsImageConfig({
    platform: options.platform,
    layerDigest: hash.digest("hex"),
    created: new Date(),
    comment: options.comment,
  });
  const layout = saveLayout(options.ref, config);
  const pack = tarStream.pack();
  const writeAll = (async () => {
    pack.entry({ name: "manifest.json" }, layout.manifest);
    pack.entry({ name: layout.configName }, layout.configJson);
    const layer = pack.entry({ name: "layer.tar", size: fs.statSync(layerFile).size });
    await pipeline(fs.createReadStream(layerFile), layer);
    pack.finalize();
  })();
  // The engine reads while the layer is written; a failed write ends the load too.
  writeAll.catch((error: Error) => pack.destroy(error));
  await Promise.all([engine.loadImage(Readable.from(pack)), writeAll]);
}

function tarInto(dir: string, file: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const out = fs.openSync(file, "wx", 0o600);
    const child = spawn("tar", ["--numeric-owner", "-C", dir, "-c", "."], {
      stdio: ["ignore", out, "pipe"],
      env: hostProgramEnv(),
    });
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2000)));
    child.on("error", reject);
    child.on("close", (code) => {
      fs.closeSync(out);
      if (code === 0) resolve();
      else reject(new Error(`tar of ${dir} failed (exit ${code}): ${stderr}`));
    });
  });
}
