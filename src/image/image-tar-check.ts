// An image tar from another engine (`docker save`) is that engine's word: `docker load` applies
// every tag its manifest.json, repositories and index.json name, so an engine of the pool could
// tag anything on this one (a `node:20` or another runner tag pointing at its own image). The tar
// is re-packed entry by entry on its way through (never held whole: layers stream); those three
// small files are read (capped) and must name the requested ref and nothing else, as plain files
// not reached through a link. Anything else fails the copy before the file reaches the engine.
import { Readable } from "node:stream";
import tarStream from "tar-stream";
import { SandboxRunError } from "../errors.js";

/** The files `docker load` takes tags from. */
const TAG_FILES = new Set(["manifest.json", "repositories", "index.json"]);
/** Far above what one image's files hold (a few hundred bytes). */
const MAX_TAG_FILE_BYTES = 1024 * 1024;
const ENTRY_TYPES = new Set(["file", "directory", "symlink", "link"]);

/** `tar` re-packed, failing (before a refused file is passed on) unless it tags only `ref`; `source` says who sent it. */
export function onlyTagging(tar: Readable, ref: string, source: string): Readable {
  const extract = tarStream.extract();
  const pack = tarStream.pack();
  const refuse = (what: string) =>
    new SandboxRunError("image-missing", `${source} sent ${ref} with ${what}: nothing was loaded.`, {
      hint: "Build the runner image here (`sandbox-run image build`), or save one that carries no other tag (`docker rmi` the others before `docker save`).",
    });
  const relay = async () => {
    const links = new Set<string>();
    let manifest = false;
    for await (const entry of extract) {
      const { header } = entry;
      const name = normalName(header.name);
      if (!ENTRY_TYPES.has(header.type ?? "")) throw refuse(`an entry of type ${header.type} (${name})`);
      // The engine's tar reader obeys PAX records this one ignores (GNU.sparse.name renames an
      // entry: a harmless name became manifest.json). Any record beyond the header's own fields is
      // refused, and none is passed on (packEntry).
      const odd = Object.keys(header.pax ?? {}).find((key) => !PAX_KEYS.has(key));
      if (odd) throw refuse(`a PAX record ${JSON.stringify(odd)} on ${name}`);
      // docker load untars before it reads: a name below a link may land anywhere, the tag files too.
      if (parentsOf(name).some((p) => links.has(p))) throw refuse(`${name} below a link`);
      if (header.type === "symlink" || header.type === "link") links.add(name);
      if (!TAG_FILES.has(name)) {
        await packEntry(pack, header, entry as AsyncIterable<Uint8Array>);
        continue;
      }
      if (header.type !== "file") throw refuse(`${name} that is not a plain file`);
      if ((header.size ?? 0) > MAX_TAG_FILE_BYTES) throw refuse(`a ${name} over 1 MiB`);
      const chunks: Buffer[] = [];
      for await (const chunk of entry) chunks.push(chunk as Buffer);
      const content = Buffer.concat(chunks);
      const others = otherTags(name, content.toString("utf8"), ref);
      if (others.length > 0) throw refuse(`${name} naming ${others.slice(0, 5).join(", ")}`);
      if (name === "manifest.json") manifest = true;
      await packEntry(pack, header, [content]);
    }
    if (!manifest) throw refuse("no manifest.json");
    pack.finalize();
  };
  relay().catch((error: Error) => {
    extract.destroy();
    pack.destroy(error);
  });
  tar.on("error", (error) => extract.destroy(error));
  tar.pipe(extract as unknown as NodeJS.WritableStream);
  return Readable.from(pack);
}

/**
 * Tags in a tag file other than `ref` (an unreadable file is one: "unreadable JSON"); manifest.json
 * must also name `ref` itself.
 */
export function otherTags(name: string, text: string, ref: string): string[] {
  let value: unknown;
  const oddKeys = new Set<string>();
  try {
    value = JSON.parse(text, (key, v) => {
      if (oddKeys.size < 8 && isOddKey(key)) oddKeys.add(key);
      return v;
    });
  } catch {
    return ["unreadable JSON"];
  }
  // manifest.json's and index.json's fields are Go struct fields: the engine's JSON reader matches
  // their names whatever their case (and folds ſ to s, K to k), and the last of two wins. A
  // `repotags` beside `RepoTags` would tag what this check never read.
  if (name !== "repositories" && oddKeys.size > 0)
    return [...oddKeys].map((key) => `a field named ${JSON.stringify(key)}`);
  const wanted = imageName(ref);
  const others = (tags: string[]) => tags.filter((tag) => imageName(tag) !== wanted);
  if (name === "manifest.json") {
    if (!Array.isArray(value)) return ["not a list"];
    const tags = value.flatMap((image) => {
      const repoTags = (image as { RepoTags?: unknown })?.RepoTags;
      return Array.isArray(repoTags) ? repoTags.map(String) : [];
    });
    return tags.some((tag) => imageName(tag) === wanted) ? others(tags) : [...others(tags), `no ${ref}`];
  }
  if (name === "repositories") {
    if (!value || typeof value !== "object") return ["not an object"];
    return others(
      Object.entries(value).flatMap(([repo, tags]) =>
        tags && typeof tags === "object" ? Object.keys(tags).map((tag) => `${repo}:${tag}`) : [repo],
      ),
    );
  }
  // index.json (OCI layout): the containerd image store tags from its annotations.
  const manifests = (value as { manifests?: unknown })?.manifests;
  if (!Array.isArray(manifests)) return [];
  const { tag } = splitTag(wanted);
  return manifests.flatMap((m) => {
    const notes = ((m as { annotations?: unknown })?.annotations ?? {}) as Record<string, unknown>;
    const full = notes["io.containerd.image.name"];
    const short = notes["org.opencontainers.image.ref.name"];
    return [
      ...(full === undefined || imageName(String(full)) === wanted ? [] : [String(full)]),
      ...(short === undefined || short === tag || imageName(String(short)) === wanted ? [] : [String(short)]),
    ];
  });
}

/** A reference as the engine stores it: docker.io/library/x:latest for x. */
export function imageName(ref: string): string {
  const slash = ref.indexOf("/");
  const first = slash < 0 ? "" : ref.slice(0, slash);
  const domain = first.includes(".") || first.includes(":") || first === "localhost";
  let name = domain ? ref : `docker.io/${ref}`;
  if (!domain && slash < 0) name = `docker.io/library/${ref}`;
  return /:[^/]*$|@/.test(name.slice(name.indexOf("/"))) ? name : `${name}:latest`;
}

function splitTag(name: string): { tag: string } {
  const colon = name.lastIndexOf(":");
  return { tag: colon > name.lastIndexOf("/") ? name.slice(colon + 1) : "latest" };
}

/** As the path lands under the folder docker load untars into. */
function normalName(name: string): string {
  const parts: string[] = [];
  for (const part of name.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") parts.pop();
    else parts.push(part);
  }
  return parts.join("/");
}

function parentsOf(name: string): string[] {
  const parts = name.split("/");
  return parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join("/"));
}

/** PAX records that only say what the entry's own header fields say (tar-stream has read them into it). */
const PAX_KEYS = new Set(["path", "linkpath", "size", "mtime", "atime", "ctime", "uid", "gid", "uname", "gname"]);

/** Writes one entry into the pack with backpressure; resolves once the pack has it. */
function packEntry(
  pack: tarStream.Pack,
  header: tarStream.Header,
  content: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
): Promise<void> {
  // Only the fields read here go on: the packer writes its own PAX records where a name needs one.
  const { name, size, mode, mtime, type, linkname, uid, gid } = header;
  const clean = { name, size, mode, mtime, type, linkname, uid, gid } as tarStream.Header;
  return new Promise<void>((resolve, reject) => {
    const sink = pack.entry(clean, (error) => (error ? reject(error) : resolve()));
    (async () => {
      for await (const chunk of content) {
        if (!sink.write(chunk)) await new Promise<void>((drained) => sink.once("drain", () => drained()));
      }
      sink.end(undefined);
    })().catch(reject);
  });
}

/** Field names of manifest.json and index.json (and the descriptors in it), as docker writes them. */
const FIELDS = new Set([
  "Config",
  "RepoTags",
  "Layers",
  "Parent",
  "LayerSources",
  "schemaVersion",
  "mediaType",
  "manifests",
  "annotations",
  "digest",
  "size",
  "platform",
  "urls",
  "artifactType",
  "subject",
  "data",
  "architecture",
  "os",
  "os.version",
  "os.features",
  "variant",
]);
const FIELDS_FOLDED = new Set([...FIELDS].map((f) => f.toLowerCase()));

/** A key that is one of FIELDS in another case, or not plain ASCII: the engine may read it as a field. */
function isOddKey(key: string): boolean {
  if (/[^\x20-\x7e]/.test(key)) return true;
  return FIELDS_FOLDED.has(key.toLowerCase()) && !FIELDS.has(key);
}
