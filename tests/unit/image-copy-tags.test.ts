// Loading the runner image from another engine of the pool: the tar that engine saves is its word,
// and `docker load` applies every tag in it. Only the requested ref may be named; anything else
// fails the copy and the loading engine never gets a whole tar.
import { Readable } from "node:stream";
import tarStream from "tar-stream";
import { describe, expect, it } from "vitest";
import type { Engine } from "../../src/engine/engine.js";
import { copyImage } from "../../src/image/copy-image.js";
import { imageName, onlyTagging } from "../../src/image/image-tar-check.js";

const REF = "sandbox-run/pi:1.2.3-abc";
const LAYER = Buffer.alloc(3 * 1024 * 1024, 7);

type Entry = {
  name: string;
  content?: string | Buffer;
  type?: "file" | "symlink" | "directory";
  linkname?: string;
  pax?: Record<string, string>;
};

function imageTar(entries: Entry[]): Readable {
  const pack = tarStream.pack();
  for (const { name, content, type, linkname, pax } of entries) {
    if (type === "symlink") pack.entry({ name, type, linkname });
    else if (type === "directory") pack.entry({ name, type });
    else pack.entry({ name, ...(pax ? { pax } : {}) }, content ?? "");
  }
  pack.finalize();
  return Readable.from(pack);
}

const manifest = (tags: string[] | null) =>
  JSON.stringify([{ Config: "c.json", RepoTags: tags, Layers: ["l/layer.tar"] }]);
const honest = (): Entry[] => [
  { name: "l/", type: "directory" },
  { name: "l/layer.tar", content: LAYER },
  { name: "c.json", content: "{}" },
  { name: "manifest.json", content: manifest([REF]) },
  { name: "repositories", content: JSON.stringify({ "sandbox-run/pi": { "1.2.3-abc": "x" } }) },
];

/** Reads the checked stream to its end: the names that reached the engine, or the error. */
async function passed(entries: Entry[]): Promise<{ names: string[]; bytes: number } | Error> {
  const extract = tarStream.extract();
  const names: string[] = [];
  let bytes = 0;
  try {
    const checked = onlyTagging(imageTar(entries), REF, 'Engine "source"');
    const reading = (async () => {
      for await (const entry of extract) {
        names.push(entry.header.name);
        for await (const chunk of entry) bytes += (chunk as Buffer).length;
      }
    })();
    for await (const chunk of checked) extract.write(chunk);
    extract.end(undefined);
    await reading;
    return { names, bytes };
  } catch (error) {
    return error as Error;
  }
}

describe("an image tar from another engine", () => {
  it("with a PAX record the engine's tar reader obeys and this one does not (GNU.sparse.name renaming an entry to manifest.json) is refused", async () => {
    const planted = [
      ...honest(),
      { name: "zz-notes.json", content: manifest([REF, "victim:latest"]), pax: { "GNU.sparse.name": "manifest.json" } },
    ];
    const result = await passed(planted);
    expect(result).toBeInstanceOf(Error);
    expect((result as Error).message).toContain('a PAX record "GNU.sparse.name" on zz-notes.json');
    // The records a header's own fields carry pass, and none is passed on as it came.
    const plain = await passed([...honest(), { name: "notes.txt", content: "x", pax: { mtime: "1700000000" } }]);
    expect(plain).not.toBeInstanceOf(Error);
  });

  it("that tags only the requested ref passes whole, layers included", async () => {
    const result = await passed(honest());
    expect(result).toEqual({
      names: ["l/", "l/layer.tar", "c.json", "manifest.json", "repositories"],
      bytes: honest().reduce((sum, e) => sum + Buffer.byteLength(e.content ?? ""), 0),
    });
  });

  it("with another tag in manifest.json or repositories is refused, naming it", async () => {
    const extra = honest().map((e) => (e.name === "manifest.json" ? { ...e, content: manifest([REF, "node:20"]) } : e));
    expect(String(await passed(extra))).toContain(
      'Engine "source" sent sandbox-run/pi:1.2.3-abc with manifest.json naming node:20: nothing was loaded.',
    );
    const repos = honest().map((e) =>
      e.name === "repositories"
        ? { ...e, content: JSON.stringify({ "sandbox-run/pi": { "1.2.3-abc": "x" }, evil: { latest: "x" } }) }
        : e,
    );
    expect(String(await passed(repos))).toContain("with repositories naming evil:latest");
  });

  it("with an index.json whose annotations name another image, or without manifest.json, is refused", async () => {
    const index = JSON.stringify({
      manifests: [
        {
          annotations: {
            "io.containerd.image.name": "docker.io/library/node:20",
            "org.opencontainers.image.ref.name": "20",
          },
        },
      ],
    });
    expect(String(await passed([...honest(), { name: "index.json", content: index }]))).toContain(
      "index.json naming docker.io/library/node:20, 20",
    );
    expect(String(await passed(honest().filter((e) => e.name !== "manifest.json")))).toContain("with no manifest.json");
  });

  it("with a field spelled in another case (the engine's JSON reader folds case, the last one wins) is refused", async () => {
    const folded = JSON.stringify([{ Config: "c.json", RepoTags: [REF], repotags: [REF, "node:20"], Layers: [] }]);
    const withManifest = (content: string) => honest().map((e) => (e.name === "manifest.json" ? { ...e, content } : e));
    expect(String(await passed(withManifest(folded)))).toContain('with manifest.json naming a field named "repotags"');
    const kelvin = JSON.stringify([{ Config: "c.json", RepoTags: [REF], "Layers\u212a": [] }]);
    expect(String(await passed(withManifest(kelvin)))).toContain("a field named");
    const index = JSON.stringify({
      Manifests: [{ annotations: { "io.containerd.image.name": "docker.io/library/node:20" } }],
    });
    expect(String(await passed([...honest(), { name: "index.json", content: index }]))).toContain(
      'with index.json naming a field named "Manifests"',
    );
  });

  it("with a tag file that is a link, or reached through one, is refused", async () => {
    const linked = [
      ...honest().filter((e) => e.name !== "manifest.json"),
      { name: "./manifest.json", type: "symlink" as const, linkname: "c.json" },
    ];
    expect(String(await passed(linked))).toContain("with manifest.json that is not a plain file");
    const below = [
      { name: "d", type: "symlink" as const, linkname: "." },
      { name: "d/manifest.json", content: manifest([REF]) },
      ...honest(),
    ];
    expect(String(await passed(below))).toContain("with d/manifest.json below a link");
  });

  it("copyImage: a refused tar ends the load with the refusal, before the engine has the whole tar", async () => {
    let received = 0;
    let finished = false;
    const from = {
      name: "source",
      saveImage: async () =>
        imageTar(honest().map((e) => (e.name === "manifest.json" ? { ...e, content: manifest(["node:20", REF]) } : e))),
    };
    const to = {
      name: "here",
      loadImage: async (tar: Readable, signal?: AbortSignal) => {
        for await (const chunk of tar) {
          signal?.throwIfAborted();
          received += (chunk as Buffer).length;
        }
        finished = true;
      },
    };
    await expect(copyImage(from as unknown as Engine, to as unknown as Engine, REF)).rejects.toThrow(
      "manifest.json naming node:20",
    );
    expect(finished).toBe(false);
    expect(received).toBeGreaterThanOrEqual(LAYER.length);
  });

  it("names compare as the engine stores them", () => {
    expect(imageName("node")).toBe("docker.io/library/node:latest");
    expect(imageName("sandbox-run/pi:1")).toBe("docker.io/sandbox-run/pi:1");
    expect(imageName("localhost:5000/x")).toBe("localhost:5000/x:latest");
    expect(imageName("docker.io/library/node:20")).toBe(imageName("node:20"));
  });
});
