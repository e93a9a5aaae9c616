// This package's own version and the Node it needs, read once from its package.json (two levels
// above both src/util and dist/util, and the CLI's bundle in dist/cli), for run records, the CLI's
// --version and the check of the host's Node (node-version.ts).
import fs from "node:fs";

interface Manifest {
  version?: unknown;
  engines?: { node?: unknown };
}

let manifest: Manifest | undefined;

function ownManifest(): Manifest {
  if (manifest) return manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as Manifest;
  } catch {
    manifest = {};
  }
  return manifest;
}

export function sandboxRunVersion(): string {
  const { version } = ownManifest();
  return typeof version === "string" ? version : "unknown";
}

/** package.json's engines.node (">=20.4"), or undefined where it cannot be read. */
export function enginesNode(): string | undefined {
  const node = ownManifest().engines?.node;
  return typeof node === "string" ? node : undefined;
}
