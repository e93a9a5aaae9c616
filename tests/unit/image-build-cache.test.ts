// The image build's dependency cache is baked into every runner image, so what a sandbox may have
// shaped there must not reach the image: a link inside the cache is packed as a link (never as the
// host file it names), and a cache folder another user could write is refused before the build.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { Readable } from "node:stream";
import tarStream from "tar-stream";
import { describe, expect, it } from "vitest";
import type { Engine } from "../../src/engine/engine.js";
import { isSandboxRunError } from "../../src/errors.js";
import { buildRunnerImage } from "../../src/image/build-runner-image.js";
import { IMAGE_DIR } from "../../src/image/runner-image.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir } = tempTrees("image-build-cache-");
const HOST_FILE = "/etc/hostname";

/** A cache whose amd64 install is ready, with a link planted among the installed modules. */
function readyCache(): string {
  const cache = dir();
  const lock = crypto.createHash("sha256");
  for (const file of ["package.json", "package-lock.json"]) lock.update(fs.readFileSync(path.join(IMAGE_DIR, file)));
  const deps = path.join(cache, `deps-${lock.digest("hex").slice(0, 16)}`);
  fs.mkdirSync(path.join(deps, "app", "node_modules", "pkg"), { recursive: true });
  fs.mkdirSync(path.join(deps, "node", "bin"), { recursive: true });
  fs.writeFileSync(path.join(deps, "node", "bin", "node"), "#!/bin/sh\n", { mode: 0o755 });
  fs.writeFileSync(path.join(deps, "app", "node_modules", "pkg", "index.js"), "module.exports = 1;\n");
  fs.symlinkSync(HOST_FILE, path.join(deps, "app", "node_modules", "host-file"));
  fs.writeFileSync(path.join(deps, ".ready"), "now");
  return cache;
}

/** An engine that builds by reading the context's tar: the entries it holds, by name. */
function tarReadingEngine(): {
  engine: Engine;
  entries: Map<string, { type: string; linkname?: string; body: string }>;
} {
  const entries = new Map<string, { type: string; linkname?: string; body: string }>();
  const engine = {
    name: "local",
    sharesHostFilesystem: true,
    info: async () => ({
      version: "20.10",
      apiVersion: "1.41",
      runtimes: {},
      securityOptions: [],
      platform: "linux/amd64",
      architecture: "x86_64",
      kernelVersion: "6.1.0",
    }),
    imageDetails: async () => ({ platform: "linux/amd64" }),
    buildImage: (context: Readable) =>
      new Promise<void>((resolve, reject) => {
        const extract = tarStream.extract();
        extract.on("entry", (header, stream, next) => {
          const chunks: Buffer[] = [];
          stream.on("data", (c: unknown) => chunks.push(c as Buffer));
          stream.on("end", () => {
            entries.set(header.name.replace(/^\.\//, ""), {
              type: header.type ?? "file",
              ...(header.linkname ? { linkname: header.linkname } : {}),
              body: Buffer.concat(chunks).toString(),
            });
            next();
          });
          stream.resume();
        });
        extract.on("finish", () => resolve());
        extract.on("error", reject);
        context.pipe(extract);
      }),
  } as unknown as Engine;
  return { engine, entries };
}

describe("image build: the dependency cache", () => {
  it("follows only the context's two links into the cache: a link planted inside the cache is packed as a link, not as the host file", async () => {
    const { engine, entries } = tarReadingEngine();
    await buildRunnerImage(engine, { base: "base:test", cacheDir: readyCache() });
    expect(entries.get("app/node_modules/pkg/index.js")).toMatchObject({ type: "file", body: "module.exports = 1;\n" });
    expect(entries.get("node/bin/node")).toMatchObject({ type: "file" });
    expect(entries.get("app/node_modules/host-file")).toEqual({ type: "symlink", linkname: HOST_FILE, body: "" });
    expect(entries.get("Dockerfile")?.type).toBe("file");
  });

  it("refuses a cache folder other users may write to, before anything is built", async () => {
    const { engine, entries } = tarReadingEngine();
    const cache = readyCache();
    fs.chmodSync(cache, 0o777);
    let error: unknown;
    try {
      await buildRunnerImage(engine, { base: "base:test", cacheDir: cache });
    } catch (thrown) {
      error = thrown;
    }
    expect(isSandboxRunError(error) && error.code).toBe("image-missing");
    expect(isSandboxRunError(error) && error.shortMessage).toContain("may be written by other users (mode 777)");
    expect(entries.size).toBe(0);
  });
});
