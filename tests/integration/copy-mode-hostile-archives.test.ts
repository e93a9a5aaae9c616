// Copy-out against a relay that code in the sandbox controls. The relay runs as the sandbox uid next
// to everything the sandbox runs, so it can answer the controller's `archive` command with any bytes
// at all: tests/support/hostile-relay.mjs does, in a real hardened container, over a real exec's
// stdio and HTTP/2 session, and the controller's own reader (readReturnedTar) judges the result.
// Nothing may land outside the workspace, and the controller's memory stays bounded.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { EngineContainer } from "../../src/engine/engine.js";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import { Relay } from "../../src/relay/relay-session.js";
import { copyIn } from "../../src/run/copy-mode/copy-in.js";
import { containerLabels, IMAGE_PATHS, SANDBOX_UID } from "../../src/sandbox-contract.js";
import { applyReturnedTree } from "../../src/workspace-transfer/apply-tree.js";
import { walkHostTree } from "../../src/workspace-transfer/host-tree.js";
import { packSingleFile } from "../../src/workspace-transfer/pack-tree.js";
import { type ReturnedTree, readReturnedTar } from "../../src/workspace-transfer/returned-tar.js";
import { makeStagingDir, removeStagingDir } from "../../src/workspace-transfer/staging-dir.js";
import { containersOfRuns, engine } from "../support/harness.js";
import { cleanupHostileDirs, hostileWorkspace, hostTmp, treeSnapshot } from "../support/hostile-model.js";

const HOSTILE_RELAY = fileURLToPath(new URL("../support/hostile-relay.mjs", import.meta.url));
const USER = `${SANDBOX_UID}:${SANDBOX_UID}`;
const runId = `hostile-relay-${process.pid}`;
const CAP_BYTES = 64 * 1024 * 1024;

let container: EngineContainer;
let relay: Relay;
const stagingDirs: string[] = [];

beforeAll(async () => {
  container = await engine.createContainer({
    image: inject("runnerImage"),
    entrypoint: ["/bin/sleep"],
    cmd: ["600"],
    env: {},
    user: USER,
    labels: containerLabels({ runId, pid: process.pid, host: os.hostname(), createdAt: new Date() }),
    runtime: "runc",
    network: "none",
    mounts: [],
    tmpfs: {
      [IMAGE_PATHS.socketDir]: `rw,nosuid,nodev,size=8m,uid=${SANDBOX_UID},gid=${SANDBOX_UID},mode=0700`,
    },
    limits: { memoryMb: 512, pids: 128, cpus: 1 },
    openStdin: false,
    init: true,
  });
  await container.start();
  const script = `${IMAGE_PATHS.socketDir}/hostile-relay.mjs`;
  await copyIn(container, packSingleFile(HOSTILE_RELAY, path.basename(script)), {
    containerPath: IMAGE_PATHS.socketDir,
    user: USER,
    what: "the hostile relay",
    sizeMb: 8,
  });
  relay = await Relay.start({ container, user: USER, socketDir: IMAGE_PATHS.socketDir, sockets: [], script });
  await relay.ready;
});

afterAll(async () => {
  relay?.expectEnd();
  await container?.remove();
  relay?.close();
  for (const dir of stagingDirs) removeStagingDir(dir);
  expect(await containersOfRuns([runId])).toEqual([]);
  cleanupHostileDirs();
});

/** Asks the hostile relay for `attack` as the copy of a fresh workspace, and reads what it sends. */
async function attack(name: string, limits: { maxBytes?: number; maxEntries?: number } = {}) {
  const ws = hostileWorkspace({ "a.txt": "a\n" });
  const neighbours = fs.readdirSync(path.dirname(ws)).filter((n) => n.startsWith("sandbox-run-pwned"));
  const before = await walkHostTree(ws);
  const snapshot = treeSnapshot(ws);
  const stagingDir = makeStagingDir(ws);
  stagingDirs.push(stagingDir);
  const { stream } = await relay.archive(`/attack/${name}`);
  const rssBefore = process.memoryUsage().rss;
  let peakRss = rssBefore;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 20);
  const outcome = await readReturnedTar(stream, {
    before,
    stagingDir,
    what: "the workspace",
    limits: {
      maxBytes: limits.maxBytes ?? CAP_BYTES,
      maxEntries: limits.maxEntries ?? 100_000,
      maxPathBytes: 4096,
      maxDepth: 1024,
      maxLinkTargetBytes: 4096,
    },
  }).then(
    (returned: ReturnedTree) => ({ returned, error: undefined }),
    (error: unknown) => ({ returned: undefined, error: error as SandboxRunError }),
  );
  clearInterval(sampler);
  const stagedBytes = fs
    .readdirSync(stagingDir)
    .reduce((sum, n) => sum + fs.lstatSync(path.join(stagingDir, n)).blocks * 512, 0);
  return {
    ws,
    before,
    snapshot,
    stagingDir,
    stagedBytes,
    neighbours,
    growthMb: (peakRss - rssBefore) / 1048576,
    ...outcome,
  };
}

/** Nothing named sandbox-run-pwned-* appeared in /tmp, next to the workspace, or anywhere it could point. */
function nothingEscaped(result: Awaited<ReturnType<typeof attack>>): void {
  const now = fs.readdirSync(path.dirname(result.ws)).filter((n) => n.startsWith("sandbox-run-pwned"));
  expect(now).toEqual(result.neighbours);
  expect(fs.readdirSync("/tmp").filter((n) => n.startsWith("sandbox-run-pwned"))).toEqual([]);
  expect(fs.readdirSync(hostTmp()).filter((n) => n.startsWith("sandbox-run-pwned"))).toEqual([]);
}

describe("archives crafted by a relay the sandbox controls", () => {
  for (const [name, message] of [
    ["absolute", /is an absolute path/],
    ["dotdot", /climbs out with "\.\."/],
    ["symlink-then-file", /written through the symbolic link "escape"/],
    ["hard-link", /"passwd" is a link/],
  ] as const) {
    it(`${name}: the copy-out fails before anything is applied, and nothing lands anywhere`, async () => {
      const result = await attack(name);
      expect(isSandboxRunError(result.error), String(result.error)).toBe(true);
      expect(result.error?.code).toBe("policy-violation");
      expect(result.error?.message).toMatch(message);
      expect(result.error?.message).toContain("Nothing was applied");
      nothingEscaped(result);
      expect(treeSnapshot(result.ws)).toEqual(result.snapshot);
      removeStagingDir(result.stagingDir);
    });
  }

  it("devices and FIFOs are left out and reported; the rest applies", async () => {
    const result = await attack("device-and-fifo");
    expect(result.error).toBeUndefined();
    expect(result.returned!.refused.map((r) => `${r.path}: ${r.reason}`)).toEqual([
      "null: it is a character-device",
      "disk: it is a block-device",
      "fifo: it is a fifo",
    ]);
    applyReturnedTree(result.before, result.returned!, "the workspace");
    removeStagingDir(result.stagingDir);
    // a.txt was not in the archive: the sandbox "deleted" it; kept.txt is new.
    expect(fs.readdirSync(result.ws).sort()).toEqual(["kept.txt"]);
    expect(fs.readFileSync(path.join(result.ws, "kept.txt"), "utf8")).toBe("an ordinary file\n");
  });

  it("a setuid file arrives without its setuid and setgid bits", async () => {
    const result = await attack("setuid");
    expect(result.error).toBeUndefined();
    expect(result.returned!.strippedModes).toEqual(["suid-sh"]);
    applyReturnedTree(result.before, result.returned!, "the workspace");
    removeStagingDir(result.stagingDir);
    const stat = fs.statSync(path.join(result.ws, "suid-sh"));
    expect((stat.mode & 0o7777).toString(8)).toBe("755");
    expect(stat.uid).toBe(process.geteuid!());
  });

  it("a 10 GB file (zeros, endless) stops at the byte cap; the staged copy holds no data", async () => {
    const result = await attack("sparse-10g");
    expect(result.error?.code).toBe("limit");
    expect(result.error?.limit).toBe("disk");
    expect(result.error?.message).toMatch(/more than 64 MiB/);
    expect(result.stagedBytes).toBeLessThan(1024 * 1024);
    expect(treeSnapshot(result.ws)).toEqual(result.snapshot);
    removeStagingDir(result.stagingDir);
  });

  it("a million entries stop at the entry cap, and the controller's memory stays bounded", async () => {
    const result = await attack("million", { maxEntries: 100_000, maxBytes: 1024 ** 3 });
    expect(result.error?.code).toBe("limit");
    expect(result.error?.message).toMatch(/more than 100000 entries/);
    expect(result.growthMb, "RSS growth of the controller while it read the archive").toBeLessThan(150);
    expect(treeSnapshot(result.ws)).toEqual(result.snapshot);
    removeStagingDir(result.stagingDir);
  });

  it("after all that, the relay session still works (each archive is its own stream)", async () => {
    const result = await attack("setuid");
    expect(result.error).toBeUndefined();
    removeStagingDir(result.stagingDir);
  });
});
