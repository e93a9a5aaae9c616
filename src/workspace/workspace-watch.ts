// One run's view of the host trees it may write: snapshots the workspace and the extra
// writable roots before the container starts, and after it stopped reports what changed and
// which of those changes touch protected paths. Workspace paths are reported relative to the
// workspace; paths in extra writable roots are absolute (they are not inside the workspace).
// A read-only workspace is not walked: the mount already guarantees it cannot change.
import { performance } from "node:perf_hooks";
import { protectedChanges, type ProtectedChange } from "./protected-paths.js";
import { diffSnapshots, takeSnapshot, type ChangedFiles, type Snapshot } from "./workspace-snapshot.js";

export interface WorkspaceWatchInput {
  workspace: string;
  workspaceWritable: boolean;
  writableRoots: readonly string[];
  protectedPaths: readonly string[];
}

export interface WorkspaceReport {
  changedFiles: ChangedFiles;
  /** Changes to protected workspace paths: non-empty fails the run. */
  violations: ProtectedChange[];
  /** Time both passes took, for the event log. */
  snapshotMs: number;
}

interface Watched {
  root: string;
  /** Prefix for reported paths: "" for the workspace, the root + "/" for extra roots. */
  prefix: string;
  before: Snapshot;
}

export class WorkspaceWatch {
  private constructor(
    private readonly input: WorkspaceWatchInput,
    private readonly watched: Watched[],
    private readonly firstPassMs: number,
  ) {}

  static async start(input: WorkspaceWatchInput): Promise<WorkspaceWatch> {
    const started = performance.now();
    const targets = [
      ...(input.workspaceWritable ? [{ root: input.workspace, prefix: "" }] : []),
      ...input.writableRoots.map((root) => ({ root, prefix: `${root}/` })),
    ];
    const watched: Watched[] = [];
    for (const target of targets) watched.push({ ...target, before: await takeSnapshot(target.root) });
    return new WorkspaceWatch(input, watched, performance.now() - started);
  }

  async finish(): Promise<WorkspaceReport> {
    const started = performance.now();
    const changedFiles: ChangedFiles = { created: [], modified: [], deleted: [] };
    let workspaceChanges: ChangedFiles = { created: [], modified: [], deleted: [] };
    for (const { root, prefix, before } of this.watched) {
      const diff = diffSnapshots(before, await takeSnapshot(root, { previous: before }));
      if (prefix === "") workspaceChanges = diff;
      for (const kind of ["created", "modified", "deleted"] as const)
        changedFiles[kind].push(...diff[kind].map((p) => prefix + p));
    }
    return {
      changedFiles,
      violations: protectedChanges(workspaceChanges, this.input.protectedPaths),
      snapshotMs: Math.round(this.firstPassMs + performance.now() - started),
    };
  }
}
