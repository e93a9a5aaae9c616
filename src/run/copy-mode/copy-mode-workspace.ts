// One copy-mode run's workspace, from walk to apply:
// 1. prepare (before the container exists): walk every tree the plan copies, fail early when one
//    does not fit its tmpfs;
// 2. afterStart (the container runs, the launcher waits): copy each tree in with its own exec of
//    `tar -x` (as the sandbox uid, or the read-only owner), start the relay, and open it once all
//    copies are in; that answers the launcher's liveness request and Pi starts;
// 3. beforeStop (Pi settled, the container still runs): read each writable tree back through the
//    relay as a hostile archive (capped, staged next to the tree, nothing applied);
// 4. finish (the container is gone): run the checks on the returned trees; apply them only when
//    every check passed, so a violation leaves the host trees as they were.
// A run stopped before Pi settled (timeout, abort, limit, crash) brings nothing back.
//
// Copy mode's other places: its part of the plan (run/plan/copy-mode-plan.ts), the trees as data
// (workspace-transfer/), the link into the sandbox (relay/, and images/pi/relay.mjs inside), the
// rules a returned tree is judged by (run/returned-tree-rules.ts); docs/architecture.md has the map.
import path from "node:path";
import { performance } from "node:perf_hooks";
import type { EngineContainer } from "../../engine/engine.js";
import { isSandboxRunError, SandboxRunError } from "../../errors.js";
import type { BranchSelection } from "../../hand-back/branch-commit.js";
import { isGitMetadata } from "../../hand-back/git-paths.js";
import type { HandBackBase } from "../../hand-back/hand-back-base.js";
import type { HandBackReport } from "../../hand-back/hand-back-report.js";
import { Relay, type RelaySocket } from "../../relay/relay-session.js";
import {
  type CopyRoot,
  GATEWAY_SOCKET,
  IMAGE_PATHS,
  PROXY_SOCKET,
  READ_ONLY_OWNER_UID,
  RELAY_BRIDGE_SOCKET,
  type RunPlan,
} from "../../sandbox-contract.js";
import { mib } from "../../util/units.js";
import type { HostRunChange } from "../../workspace/workspace-rules.js";
import { ChangeCollector, type ChangedFiles } from "../../workspace/workspace-snapshot.js";
import { applyReturnedTreesYielding } from "../../workspace-transfer/apply-tree.js";
import { type HostTree, walkHostTree } from "../../workspace-transfer/host-tree.js";
import { packSingleFile, packTree, readableByAll } from "../../workspace-transfer/pack-tree.js";
import { type ReturnedTree, readReturnedTar } from "../../workspace-transfer/returned-tar.js";
import {
  makeStagingDir,
  recordStagingDir,
  removeStagingDirYielding,
  STAGING_RECORD,
} from "../../workspace-transfer/staging-dir.js";
import { diffTrees, type ReturnedTreeCheck, type TreeViolation } from "../../workspace-transfer/tree-entry.js";
import { refuseTreeAway } from "../../workspace-transfer/tree-in-place.js";
import type { RunTimeline } from "../run-events.js";
import type { RunCompanion } from "../supervise-run.js";
import { type ClaimedSandbox, claimSandbox } from "../warm-claim.js";
import { copyIn, copyInThroughRelay } from "./copy-in.js";
import { handBackJudged, prepareHandBack, selectionAfterCheck, selectionForBranch } from "./hand-back-run.js";

/** Trees of at least this many MiB raise a warm sandbox's memory limit at the claim (#raiseWarmMemory). */
const WARM_MEMORY_RAISE_MIN_MB = 32;

interface CopyModeOptions {
  plan: RunPlan;
  /** The run folder holding the gateway's (and the proxy's) host sockets. */
  runDir: string;
  /** Whether the egress proxy runs (its socket is relayed too). */
  proxy: boolean;
  /** The tmpfs size of each tree, in MiB. */
  diskMb: number;
  timeline: RunTimeline;
  /** The checks on returned trees (run/returned-tree-rules.ts: the same rules as bind mode's). */
  check: ReturnedTreeCheck;
  /** A writable tree filled its tmpfs while the run was live (the relay's claim); called once. */
  onFull?: (what: string) => void;
  /** The task, for the branch hand-back's commit message. */
  prompt?: string;
  signal?: AbortSignal;
}

/** Every tree sent in, as it was sent: the checks read the configs of all of them. */
function lentTrees(copied: readonly Copied[]) {
  return copied.flatMap((c) => (c.tree ? [{ hostPath: c.copy.hostPath, entries: c.tree.entries }] : []));
}

interface Copied {
  copy: CopyRoot;
  /** Absent for the CA bundle (a file). */
  tree?: HostTree;
  returned?: ReturnedTree;
  stagingDir?: string;
}

/** Room for tar's headers in the byte cap of a returned tree. */
const HEADER_ALLOWANCE_BYTES = 64 * 1024 * 1024;

/** What came back: the changes, and the violations that kept them from being applied. */
export interface CopyModeOutcome {
  changedFiles: ChangedFiles;
  violations: TreeViolation[];
  /** Changes to files host tools read when a person runs them, from the full change lists (at most 100 listed). */
  hostRun: HostRunChange[];
  hostRunCount: number;
  snapshotMs: number;
  /** The run ended before its writable trees came back: whatever it changed in the sandbox is gone. */
  discarded: boolean;
}

export class CopyModeWorkspace {
  #relay?: Relay;
  /** What the run listens with for a relay this side refused (its companion's onFailure). */
  readonly #refusedListeners: Array<(error: unknown) => void> = [];
  /** Every writable tree came back whole and readable: only then is anything applied. */
  #copiedOut = false;
  /** The run is over: a copy-out still under way makes no more staging directories. */
  #disposed = false;
  #fullReported = false;
  /** A branch hand-back's selection the workspace's check was judged with: the commit takes it as it is. */
  #branchSelection?: BranchSelection;

  private constructor(
    private readonly options: CopyModeOptions,
    private readonly copied: Copied[],
    /** The branch hand-back: the repository and the commit the run starts from. */
    private readonly base: HandBackBase | undefined,
  ) {}

  static async prepare(options: CopyModeOptions): Promise<CopyModeWorkspace> {
    // Before anything is copied: HEAD now is the parent of the commit the run's changes become.
    const base = await prepareHandBack(options.plan, options.runDir);
    const copied: Copied[] = [];
    for (const copy of options.plan.copies) {
      if (copy.kind === "ca-bundle") {
        copied.push({ copy });
        continue;
      }
      const tree = await walkHostTree(copy.hostPath);
      const limit = options.diskMb * 1024 * 1024;
      if (tree.bytes > limit && tree.bytes - tree.sparse.bytes <= limit) throw sparseTree(copy, tree, options.diskMb);
      if (tree.bytes > limit) {
        throw new SandboxRunError(
          "limit",
          `${describe(copy)} holds ${mib(tree.bytes)} MiB, more than the sandbox's copy of it may hold (${options.diskMb} MiB).`,
          { limit: "disk", hint: "Raise limits.diskMb in a policy file, or use bind mode on a local engine." },
        );
      }
      copied.push({ copy, tree });
    }
    options.check.prepare?.(lentTrees(copied));
    return new CopyModeWorkspace(options, copied, base);
  }

  /** MiB of the trees copied in (their files' sizes): what their tmpfs holds before the run adds to it. */
  get copiedMb(): number {
    const bytes = this.copied.reduce((sum, c) => sum + (c.tree?.bytes ?? 0), 0);
    return Math.ceil(bytes / (1024 * 1024));
  }

  /** The work done beside the run while its container runs (a warm sandbox: its claim instead of the copy-in). */
  companion(container: EngineContainer, warm?: ClaimedSandbox): RunCompanion {
    return {
      afterStart: () => (warm ? this.#claim(warm) : this.#copyIn(container)),
      beforeStop: () => this.#copyOut(),
      onFailure: (listener) => this.#refusedListeners.push(listener),
    };
  }

  /**
   * A warm sandbox was made before its trees were known, with the policy's memoryMb only, and the
   * trees' tmpfs counts as its memory: a cold copy-mode call's container gets their size on top
   * (container-spec.ts), so a warm one gets it at the claim, before the copy-in, where the runtime
   * can change a running container's limit (runc; gVisor fixes the sandbox's memory at its start).
   * Below WARM_MEMORY_RAISE_MIN_MB the trees come out of memoryMb: the engine's answer takes
   * 100-250 ms here, more than a small call's whole claim.
   */
  async #raiseWarmMemory(warm: ClaimedSandbox): Promise<void> {
    const treesMb = this.copiedMb;
    if (treesMb < WARM_MEMORY_RAISE_MIN_MB) return;
    const { plan, timeline } = this.options;
    const memoryMb = plan.limits.memoryMb + treesMb;
    const notRaised = (why: string) =>
      timeline.sandbox("warm.memory", { treesMb, memoryMb: plan.limits.memoryMb, notRaised: why });
    if (plan.runtime === "runsc") return notRaised("gVisor fixes a sandbox's memory when it starts");
    if (!warm.container.setMemoryLimit) return notRaised("the engine cannot change a running container's limit");
    try {
      await warm.container.setMemoryLimit(memoryMb);
    } catch (error) {
      return notRaised(((error as Error)?.message ?? String(error)).split("\n")[0]!.slice(0, 300));
    }
    timeline.sandbox("warm.memory", { treesMb, memoryMb });
  }

  /**
   * The relay failed: said; and when this side refused what it sent (a flood, frames or messages it
   * did not ask for), the run stops now rather than at its timeout (docs/security.md CM6; review,
   * session 36: the run went on to its timeout, the sandbox still writing).
   */
  #relayStopped(error: SandboxRunError, refused: boolean): void {
    this.options.timeline.sandbox("relay.stopped", { reason: error.shortMessage });
    if (refused) for (const listener of this.#refusedListeners.splice(0)) listener(error);
  }

  /** The same trees as #copyIn, for its claim: one exchange over the relay the sandbox has up already. */
  async #claim(warm: ClaimedSandbox): Promise<void> {
    const { plan } = this.options;
    await this.#raiseWarmMemory(warm);
    const started = performance.now();
    const relay = warm.relay;
    this.#relay = relay;
    relay.onFailure((error, refused) => this.#relayStopped(error, refused));
    const writable = this.copied.filter((c) => c.copy.writable && c.tree);
    this.#watchFull(relay, writable);
    // The host's servers run already: connections go through as soon as the relay serves them.
    relay.open();
    const { inSandboxMs } = await claimSandbox(warm, {
      plan,
      sockets: this.#sockets(),
      watchFull: writable.map((c) => c.copy.containerPath),
      trees: this.copied.map(({ copy, tree }) => {
        const readOnly = !copy.writable && copy.kind !== "ca-bundle";
        return {
          containerPath: tree ? copy.containerPath : path.dirname(copy.containerPath),
          what: describe(copy),
          sizeMb: this.options.diskMb,
          readOnly,
          archive: () =>
            tree
              ? packTree(tree, readOnly ? { modeOf: readableByAll } : {})
              : packSingleFile(copy.hostPath, path.basename(copy.containerPath)),
        };
      }),
    });
    this.#copiedInEvent(started, inSandboxMs ? { inSandboxMs } : {});
  }

  /** The gateway's socket (and the proxy's) the relay hands connections to. */
  #sockets(): RelaySocket[] {
    return [
      { name: "gateway", containerPath: GATEWAY_SOCKET, hostPath: path.join(this.options.runDir, "gateway.sock") },
      ...(this.options.proxy
        ? [{ name: "proxy", containerPath: PROXY_SOCKET, hostPath: path.join(this.options.runDir, "proxy.sock") }]
        : []),
    ];
  }

  #watchFull(relay: Relay, writable: Copied[]): void {
    relay.onFull((root) => {
      const full = writable.find((c) => c.copy.containerPath === root);
      if (full && !this.#fullReported) {
        this.#fullReported = true;
        this.options.onFull?.(describe(full.copy));
      }
    });
  }

  #copiedInEvent(started: number, extra: Record<string, unknown> = {}): void {
    this.options.timeline.sandbox("workspace.copied-in", {
      ...extra,
      trees: this.copied.length,
      entries: this.copied.reduce((n, c) => n + (c.tree?.entries.length ?? 1), 0),
      bytes: this.copied.reduce((n, c) => n + (c.tree?.bytes ?? 0), 0),
      skipped: this.copied.flatMap((c) => c.tree?.skipped ?? []).slice(0, 20),
      ms: Math.round(performance.now() - started),
    });
  }

  async #copyIn(container: EngineContainer): Promise<void> {
    const { plan, signal } = this.options;
    const started = performance.now();
    const sockets = this.#sockets();
    const relay = Relay.start({
      container,
      user: plan.user,
      bridgeSocket: RELAY_BRIDGE_SOCKET,
      socketDir: IMAGE_PATHS.socketDir,
      sockets,
      signal,
    }).then(async (started) => {
      this.#relay = started;
      started.onFailure((error, refused) => this.#relayStopped(error, refused));
      await started.ready;
      return started;
    });
    // Read-only trees belong to another uid than the relay's: each gets an exec of its own, started
    // at once. Writable trees (and the CA bundle) go through the relay as soon as it is up.
    const copies = this.copied.map(({ copy, tree }) => {
      const readOnly = !copy.writable && copy.kind !== "ca-bundle";
      const archive = () =>
        tree
          ? packTree(tree, readOnly ? { modeOf: readableByAll } : {})
          : packSingleFile(copy.hostPath, path.basename(copy.containerPath));
      const target = {
        containerPath: tree ? copy.containerPath : path.dirname(copy.containerPath),
        what: describe(copy),
        sizeMb: this.options.diskMb,
      };
      if (readOnly) {
        const user = `${READ_ONLY_OWNER_UID}:${READ_ONLY_OWNER_UID}`;
        return copyIn(container, archive(), { ...target, user }, signal);
      }
      return relay.then((ready) => copyInThroughRelay(ready, archive(), target));
    });
    await Promise.all([relay, ...copies]);
    // Nothing of the sandbox has run yet: from here on, a changed file is one whose status changes.
    const writable = this.copied.filter((c) => c.copy.writable && c.tree);
    this.#watchFull(this.#relay!, writable);
    this.#relay!.mark(writable.map((c) => c.copy.containerPath));
    this.#relay!.open();
    this.#copiedInEvent(started);
  }

  async #copyOut(): Promise<void> {
    const relay = this.#relay;
    if (!relay) throw new SandboxRunError("agent-crashed", "The relay to the sandbox never started.");
    for (const copied of this.copied) {
      if (!copied.copy.writable || !copied.tree) continue;
      const started = performance.now();
      const tree = copied.tree;
      if (this.#disposed) throw new SandboxRunError("aborted", "The run ended while its workspace was read back.");
      refuseTreeAway(tree, describe(copied.copy));
      copied.stagingDir = makeStagingDir(tree.root);
      recordStagingDir(path.join(this.options.runDir, STAGING_RECORD), copied.stagingDir);
      this.options.timeline.sandbox("workspace.copying-out", { root: copied.copy.hostPath });
      const { stream, exit } = await relay.archive(copied.copy.containerPath);
      copied.returned = await readReturnedTar(stream, {
        before: tree,
        stagingDir: copied.stagingDir,
        what: describe(copied.copy),
        limits: {
          maxBytes: this.options.diskMb * 1024 * 1024 + HEADER_ALLOWANCE_BYTES,
          // Entries a returned tree may have beyond the ones sent in: the policy's limits.maxEntries.
          maxEntries: tree.entries.length + this.options.plan.limits.maxEntries,
          maxPathBytes: 4096,
          maxDepth: 1024,
          maxLinkTargetBytes: 4096,
        },
      });
      const status = await exit;
      // As GNU tar's: 1, a file changed while it was read (something in the sandbox still runs);
      // what was read is judged like everything else. Anything else: the tree was not read whole.
      if (status.code !== 0 && status.code !== 1) {
        throw new SandboxRunError(
          "agent-crashed",
          `Reading ${describe(copied.copy)} back from the sandbox failed: the relay could not read all of it (status ${status.code ?? status.signal}). Nothing was applied.`,
          {
            hint: "A file or directory the sandbox made unreadable cannot be copied back; the stderr tail says which.",
            stderrTail: status.stderr || undefined,
          },
        );
      }
      this.options.timeline.sandbox("workspace.copied-out", {
        root: copied.copy.hostPath,
        entries: copied.returned.after.length,
        bytes: copied.returned.bytes,
        changed: copied.returned.staged.size,
        refused: copied.returned.refused.slice(0, 20),
        setuidDropped: copied.returned.strippedModes.slice(0, 20),
        writeBitsCleared: copied.returned.writeBitsCleared.slice(0, 20),
        ms: Math.round(performance.now() - started),
      });
    }
    this.#copiedOut = true;
    // The host stops the container next, and the relay with it.
    relay.expectEnd();
  }

  /**
   * After the container is gone: the checks on every returned tree, then (only when all passed)
   * the apply. A run whose trees never came back changes nothing.
   */
  async finish(): Promise<CopyModeOutcome> {
    const started = performance.now();
    const check = this.options.check;
    // Lists as long as the sandbox makes them: appended one by one (a spread of 130,000 paths
    // overflows the stack), and the changed files capped per kind as bind mode's are.
    const changes = new ChangeCollector();
    const violations: TreeViolation[] = [];
    // What host tools follow or misread (links out, names, host-run files), as the check judged
    // each pair: the same rule engine as bind mode's, so the two cannot disagree on what is reported.
    // Each tree's list is kept whole, as bind mode's are (a full workspace list hides no root's link).
    const hostRun: HostRunChange[] = [];
    let hostRunCount = 0;
    const returned = this.#copiedOut ? this.copied.filter((c) => c.returned && c.tree) : [];
    const lent = lentTrees(this.copied);
    for (const { copy, tree, returned: after } of returned) {
      const kind = copy.kind === "workspace" ? "workspace" : "writable-root";
      // Reported as bind mode reports them: a writable root's paths are absolute (its bin/git is not the workspace's).
      const prefix = kind === "workspace" ? "" : `${copy.hostPath}/`;
      const { plan, runDir, signal } = this.options;
      const selection =
        kind === "workspace" && copy.writable
          ? await selectionForBranch({ plan, runDir, base: this.base, tree: tree!, returned: after!, signal })
          : undefined;
      const leftOutPaths = selection && new Set(selection.leftOut.map((l) => l.path));
      const leftOut = leftOutPaths && ((rel: string) => leftOutPaths.has(rel));
      const root = { hostPath: copy.hostPath, kind } as const;
      const judged = await check(tree!.entries, after!.after, root, after, lent, leftOut);
      if (selection) this.#branchSelection = selectionAfterCheck(selection, after!);
      for (const v of judged.violations) violations.push(prefix ? { ...v, path: prefix + v.path } : v);
      for (const h of judged.hostRun) hostRun.push(prefix ? { ...h, path: prefix + h.path } : h);
      hostRunCount += judged.hostRunCount;
      const diff = diffTrees(tree!.entries, after!.after);
      for (const change of ["created", "modified", "deleted"] as const)
        for (const p of diff[change]) changes.add(change, prefix + p);
    }
    // The workspace's changes first, then each writable directory's, as the trees were returned.
    const changedFiles: ChangedFiles = changes.result(false);
    // branch and patch: the judged tree waits in the staging directory for handBack().
    const applying = this.options.plan.handBack === "apply";
    // branch and patch hand back the worktree's files only, never anything in a git directory
    // (branch-commit.ts and change-patch.ts leave those out, and the host's own git writes the
    // commit): what the sandbox did there cannot reach the host, so it fails no run. A sparse-checkout
    // edit, a submodule bump or a `git worktree add` failed such a run, and its work was lost with
    // the sandbox (review, session 28).
    const gitLeftOut = applying ? [] : takeGitOnly(violations);
    if (violations.length === 0 && applying) {
      // All the trees or none (a writable directory whose disk fills undoes the workspace too:
      // review, session 38), letting other runs of this controller through as it goes (a tree of
      // 150,000 entries held the loop for 40-110 s, and a neighbour timed out: review, session 37).
      const results = await this.#applied(() =>
        applyReturnedTreesYielding(
          returned.map(({ copy, tree, returned: after, stagingDir }) => ({
            before: tree!,
            returned: after!,
            what: describe(copy),
            options: { asideDir: stagingDir },
          })),
        ),
      );
      for (const [i, result] of results.entries()) {
        const { copy } = returned[i]!;
        if (result.keptDirectories.length > 0) {
          this.options.timeline.sandbox("workspace.kept", {
            root: copy.hostPath,
            reason: "deleted in the sandbox, but they hold files that were never copied in",
            directories: result.keptDirectories.slice(0, 20),
          });
        }
        if (result.leftAside.length > 0) {
          this.options.timeline.sandbox("workspace.kept", {
            root: copy.hostPath,
            reason: "the host's old entries that the apply replaced or deleted could not be removed; they wait here",
            directories: result.leftAside.slice(0, 20),
          });
        }
      }
    }
    const ms = Math.round(performance.now() - started);
    if (!this.#copiedOut)
      this.options.timeline.sandbox("workspace.not-applied", {
        reason: "the run ended before the workspace came back",
      });
    else if (violations.length > 0)
      this.options.timeline.sandbox("workspace.not-applied", { reason: "a check of the returned tree failed", ms });
    else if (!applying)
      this.options.timeline.sandbox("workspace.judged", {
        trees: returned.length,
        ms,
        ...(gitLeftOut.length > 0
          ? {
              gitLeftOut: gitLeftOut.length,
              gitLeftOutPaths: gitLeftOut.slice(0, 20).map((v) => `${v.path} (${v.change}, ${v.rule})`),
            }
          : {}),
      });
    else this.options.timeline.sandbox("workspace.applied", { trees: returned.length, ms });
    const discarded = !this.#copiedOut && this.copied.some((c) => c.copy.writable);
    return {
      changedFiles,
      violations,
      hostRun,
      hostRunCount,
      snapshotMs: Math.round(performance.now() - started),
      discarded,
    };
  }

  /**
   * After a successful run whose trees passed the checks, for hand-back "branch" or "patch": the
   * judged workspace becomes a commit or a patch (hand-back-run.ts); nothing is written into the
   * working tree. Undefined in apply mode, or when nothing came back.
   */
  async handBack(): Promise<HandBackReport | undefined> {
    const { plan, runDir, prompt, timeline } = this.options;
    if (plan.handBack === "apply" || !this.#copiedOut) return undefined;
    const workspace = this.copied.find((c) => c.copy.kind === "workspace" && c.copy.writable);
    if (!workspace?.tree || !workspace.returned) return undefined;
    const judged = { tree: workspace.tree, returned: workspace.returned, what: describe(workspace.copy) };
    const { signal } = this.options;
    const selection = this.#branchSelection;
    return handBackJudged({
      plan,
      runDir,
      prompt,
      base: this.base,
      timeline,
      judged,
      ...(signal ? { signal } : {}),
      ...(selection ? { selection } : {}),
    });
  }

  /** Removes the staging directories and stops serving the relay (the container is gone by now). */
  async dispose(): Promise<void> {
    this.#disposed = true;
    this.#relay?.close();
    for (const copied of this.copied) if (copied.stagingDir) await removeStagingDirYielding(copied.stagingDir);
  }

  /**
   * An apply the host refused (the user's own edit meanwhile, what this user may not write, a write
   * that failed) is said in the events as well as thrown: `workspace.not-applied` with its reason,
   * as for a refused check (review, session 31: only `run.failed` said so).
   */
  async #applied<T>(apply: () => Promise<T>): Promise<T> {
    try {
      return await apply();
    } catch (error) {
      this.options.timeline.sandbox("workspace.not-applied", {
        reason: isSandboxRunError(error) ? error.shortMessage : "the apply failed",
      });
      throw error;
    }
  }
}

function describe(copy: CopyRoot): string {
  switch (copy.kind) {
    case "workspace":
      return `the workspace ${copy.hostPath}`;
    case "writable-root":
      return `the writable directory ${copy.hostPath}`;
    case "read-only":
      return `the read-only directory ${copy.hostPath}`;
    case "ca-bundle":
      return "the host's CA bundle";
  }
}

/**
 * A tree that fits but for its sparse files (which cost no disk, often left by an earlier run):
 * the pack sends every file whole, so their holes would fill the sandbox's copy; a larger diskMb
 * would only make the host read and send their zeros.
 */
function sparseTree(copy: CopyRoot, tree: HostTree, diskMb: number): SandboxRunError {
  const { count, bytes, largest } = tree.sparse;
  const named = largest.map((f) => `${f.path} (${mib(f.size)} MiB)`).join(", ");
  const more = count > largest.length ? ` and ${count - largest.length} more` : "";
  return new SandboxRunError(
    "limit",
    `${describe(copy)} holds ${count} sparse file(s) whose apparent size (${mib(bytes)} MiB in all) takes it past what the sandbox's copy of it may hold (${diskMb} MiB): ${named}${more}. Copy mode sends every file whole, holes as zeros.`,
    {
      limit: "disk",
      hint: "Remove the sparse files from the tree (or move them out of it), or use bind mode on a local engine.",
    },
  );
}

/**
 * Removes from `violations` (in place) those in the workspace's git directories, which a branch or
 * patch hand-back never carries, and returns them.
 */
function takeGitOnly(violations: TreeViolation[]): TreeViolation[] {
  const taken: TreeViolation[] = [];
  let kept = 0;
  // In place, one by one: the sandbox decides how long the list is (no spread of it).
  for (const v of violations) {
    if (!path.isAbsolute(v.path) && isGitMetadata(v.path)) taken.push(v);
    else violations[kept++] = v;
  }
  violations.length = kept;
  return taken;
}
