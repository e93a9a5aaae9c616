// What a root run lent to the sandbox uid, recorded by the host in the run's own folder (inside the
// 0700 run-dirs parent only this user can write) before anything is lent. A reaper hands trees back
// from this record alone: a container's labels are the engine's word, and whoever answers on the
// engine's address (a local user on a loopback port) could name any tree and any owner there.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Engine } from "../engine/engine.js";
import { HostDir } from "../util/host-dir.js";
import { treesOverlap } from "../util/path-inside.js";
import { readSmallFile } from "../util/read-fd.js";
import {
  LEASE_RECORD,
  ownerGone,
  readRunDirOwner,
  runDirPath,
  runDirsParent,
  runDirsParentPrivate,
} from "./run-dirs.js";

export interface LeaseRecord {
  /** The trees lent (canonical, absolute). */
  roots: string[];
  /** Who gets them back. */
  handBackTo: { uid: number; gid: number };
  /** The engine the run's container is on (its address): only it is asked whether the container is gone. */
  engine: string;
}

/**
 * How a record names an engine: its address (where it is), else its name; a local socket by its real
 * path, so a gc reaching the engine as unix:///run/docker.sock finds a run's record made through
 * unix:///var/run/docker.sock.
 */
export function engineIdentity(engine: Pick<Engine, "name" | "address">): string {
  const address = engine.address ?? engine.name;
  if (!address.startsWith("unix://")) return address;
  try {
    return `unix://${fs.realpathSync(address.slice("unix://".length))}`;
  } catch {
    return address;
  }
}

/** Writes the record into the run's folder (a new file, never through a link), before the lease is taken. */
export function writeLeaseRecord(runDir: string, record: LeaseRecord): void {
  HostDir.writeNewIn(runDir, LEASE_RECORD, `${JSON.stringify(record)}\n`, 0o600);
}

/** Once the trees are back (or were never lent): nothing is left for a reaper to do. */
export function removeLeaseRecord(runDir: string): void {
  fs.rmSync(path.join(runDir, LEASE_RECORD), { force: true });
}

/**
 * Run `runId`'s record, when this host holds one and the run's controller (by its folder's marker)
 * is gone; undefined otherwise. Only the private parent is looked into, and nothing in it is followed.
 */
export function deadRunLease(runId: string, tmpDir = os.tmpdir()): LeaseRecord | undefined {
  if (!/^[A-Za-z0-9_-]{1,128}$/.test(runId) || !runDirsParentPrivate(tmpDir)) return undefined;
  const dir = runDirPath(runId, tmpDir);
  const owner = readRunDirOwner(dir);
  if (!owner || !ownerGone(owner)) return undefined;
  return readLeaseRecord(dir);
}

/** The run ids of this host's dead runs that still hold a lease record. */
export function deadRunsWithLeases(tmpDir = os.tmpdir()): string[] {
  if (!runDirsParentPrivate(tmpDir)) return [];
  return fs
    .readdirSync(runDirsParent(tmpDir))
    .filter((name) => name.startsWith("run-"))
    .map((name) => name.slice("run-".length))
    .filter((runId) => deadRunLease(runId, tmpDir) !== undefined);
}

/**
 * A dead run whose lease record names a tree overlapping one of `trees`: its trees are still lent
 * to the sandbox uid, and a run that lent them again would record the files that run left as the
 * sandbox's from the start, and give them back to it (review, session 35).
 */
export function deadLeaseOver(
  trees: readonly string[],
  tmpDir = os.tmpdir(),
): { runId: string; tree: string } | undefined {
  if (trees.length === 0) return undefined;
  for (const runId of deadRunsWithLeases(tmpDir)) {
    const record = deadRunLease(runId, tmpDir);
    for (const theirs of record?.roots ?? [])
      for (const ours of trees) if (treesOverlap(theirs, ours)) return { runId, tree: theirs };
  }
  return undefined;
}

function readLeaseRecord(dir: string): LeaseRecord | undefined {
  try {
    const bytes = readSmallFile(path.join(dir, LEASE_RECORD), 1024 * 1024);
    if (!bytes) return undefined;
    const value = JSON.parse(bytes.toString("utf8")) as Partial<LeaseRecord>;
    const to = value.handBackTo;
    const roots = value.roots;
    if (!Array.isArray(roots) || typeof value.engine !== "string" || !to) return undefined;
    if (!Number.isInteger(to.uid) || !Number.isInteger(to.gid)) return undefined;
    const absolute = roots.filter((r): r is string => typeof r === "string" && r.startsWith("/") && !r.includes("\0"));
    return { roots: absolute, handBackTo: { uid: to.uid, gid: to.gid }, engine: value.engine };
  } catch {
    return undefined;
  }
}
