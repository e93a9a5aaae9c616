// A warm sandbox as a run gets it (src/warm/ makes and keeps them): a container that runs, its
// attach streams held since it started, its relay up, and the launcher waiting with Pi loaded.
// Binding it to the run is one exchange over the relay (claimSandbox): the run's configuration and
// its trees in one command, the gateway's and proxy's sockets served from then on. Nothing of the
// run reaches the sandbox before that exchange; after the run it is removed, never reused.
import type { Readable } from "node:stream";
import type { ContainerStreams, EngineContainer } from "../engine/engine.js";
import type { Relay, RelaySocket } from "../relay/relay-session.js";
import type { RunPlan } from "../sandbox-contract.js";
import { checkCopyInStatus, type PendingCopyIn } from "./copy-mode/copy-in.js";
import { claimedRunOf } from "./plan/warm-shape.js";

export interface ClaimedSandbox {
  /** The sandbox's own id (its container's run-id label: `warm-...`). */
  readonly warmId: string;
  readonly container: EngineContainer;
  /** Attached before it started: the run reads Pi's output from here and writes the prompt. */
  readonly streams: ContainerStreams;
  /** Up since the sandbox was made; it served nothing before the claim. */
  readonly relay: Relay;
  /** Read-only trees (owned by another uid than the relay's): a waiting `tar -x` per container path. */
  readonly readOnlyCopies: ReadonlyMap<string, PendingCopyIn>;
  /** What the pool knows of it (age, how long the call waited, its check), for the run's events. */
  readonly facts: Record<string, number | string>;
  /** Removes its container (and stops serving its relay); idempotent. */
  destroy(): Promise<boolean>;
  /** The engine's reason, once destroy() said it could not remove the container. */
  readonly removalFailure?: unknown;
}

interface ClaimTreeInput {
  containerPath: string;
  /** What messages call it ("the workspace /path"). */
  what: string;
  sizeMb: number;
  /** Read-only trees go through their waiting exec; the others through the relay. */
  readOnly: boolean;
  archive: () => Readable;
}

/**
 * Binds the sandbox to the run: read-only trees through their waiting execs first (the relay cannot
 * write as their owner), then one claim over the relay with the rest and the run's configuration.
 * Resolves once the relay says the trees are in (the launcher starts Pi right after), with how long
 * its steps took in there (a claim); a tree that could not be filled rejects with the copy-in error
 * the cold path gives.
 */
export async function claimSandbox(
  sandbox: ClaimedSandbox,
  input: { plan: RunPlan; sockets: RelaySocket[]; trees: ClaimTreeInput[]; watchFull: string[] },
): Promise<{ inSandboxMs?: Record<string, number> }> {
  const readOnly = input.trees.filter((t) => t.readOnly);
  await Promise.all(
    readOnly.map(async (tree) => {
      const pending = sandbox.readOnlyCopies.get(tree.containerPath);
      if (!pending) throw new Error(`the warm sandbox has no waiting copy for ${tree.containerPath}`);
      await pending.fill(tree.archive());
    }),
  );
  const viaRelay = input.trees.filter((t) => !t.readOnly);
  const { sockets: _containerSockets, ...run } = claimedRunOf(input.plan);
  const { statuses, inSandboxMs } = await sandbox.relay.claim({
    sockets: input.sockets,
    trees: viaRelay.map((t) => ({ root: t.containerPath, archive: t.archive() })),
    watchFull: input.watchFull,
    run,
  });
  for (const [i, tree] of viaRelay.entries()) checkCopyInStatus(tree, statuses[i]!);
  return { inSandboxMs };
}
