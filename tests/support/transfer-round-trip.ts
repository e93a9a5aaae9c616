// Copy mode's host side as a unit test drives it, without an engine: walk and pack a host tree (as
// copy-in does), let "the sandbox" change an extracted copy with GNU tar on both ends, and read the
// returned tar (pax, as the relay writes it) into a staging directory (as copy-out does).
import { spawnSync } from "node:child_process";
import { Readable } from "node:stream";
import { expect } from "vitest";
import { type HostTree, walkHostTree } from "../../src/workspace-transfer/host-tree.js";
import { packTree } from "../../src/workspace-transfer/pack-tree.js";
import { type ReturnedTree, readReturnedTar } from "../../src/workspace-transfer/returned-tar.js";

export interface RoundTrip {
  before: HostTree;
  returned: ReturnedTree;
  stagingDir: string;
}

/** Sends `root`, applies `change` to the sandbox's copy, and reads what comes back. */
export async function roundTrip(
  root: string,
  change: (copy: string) => void,
  dirs: { copy: string; staging: string },
): Promise<RoundTrip> {
  const before = await walkHostTree(root);
  const chunks: Buffer[] = [];
  for await (const chunk of packTree(before)) chunks.push(chunk as Buffer);
  const x = spawnSync("tar", ["-x", "-f", "-", "-C", dirs.copy, "--no-same-owner", "-p"], {
    input: Buffer.concat(chunks),
  });
  expect(x.status, x.stderr.toString()).toBe(0);
  change(dirs.copy);
  const c = spawnSync("tar", ["-c", "--format=posix", "-f", "-", "-C", dirs.copy, "--hard-dereference", "."], {
    maxBuffer: 1 << 30,
  });
  expect(c.status, c.stderr.toString()).toBe(0);
  const returned = await readReturnedTar(Readable.from([c.stdout]), {
    before,
    stagingDir: dirs.staging,
    limits: { maxBytes: 1 << 30, maxEntries: 100_000, maxPathBytes: 4096, maxDepth: 512, maxLinkTargetBytes: 4096 },
    what: "the workspace",
  });
  return { before, returned, stagingDir: dirs.staging };
}
