// `sandbox-run gc` as a library operation: what dead controllers left behind, removed from every
// engine of the pool (their containers; a bind-mode run that was never judged is judged, as its
// controller would have, then lent trees are handed back) and this host's run folders. One
// engine that does not answer (its ping, or a request after it: every one has a deadline) must not
// keep the others dirty: it is reported and the others are cleaned (a pool of one engine that does
// not answer is an error).
import path from "node:path";
import type { AnswerLimits } from "../engine/answer-limits.js";
import { EngineAnswerError } from "../engine/bounded-answers.js";
import { type HandedBackRun, handBackGoneRuns, type ReapedContainer, reapContainers } from "../run/reap-orphans.js";
import { reapRunDirs } from "../run/reap-run-dirs.js";
import { HOLD_FILE_PREFIX, type KeptPackFolder, keptPackFolders } from "../run/run-dirs.js";
import { type DeadApply, deadApplySentence } from "../workspace-transfer/dead-apply.js";
import { chosenEnginePool, pingWithin } from "./engine-choice.js";

export interface GarbageOptions {
  /** An engines file: clean each of its engines (default: SANDBOX_RUN_ENGINES, else DOCKER_HOST's engine). */
  engines?: string;
  /** The host environment (default process.env). */
  env?: Record<string, string | undefined>;
  /** Every sandbox-run container, even of live controllers. */
  all?: boolean;
  /**
   * Find what would be removed, judged and handed back, and change nothing: the lists are what a
   * gc now would act on (a run folder still holding a lease or a judgement's state goes only
   * after its run's container, so it is listed under its run, not in runDirs).
   */
  dryRun?: boolean;
  /** @internal What each engine request may take (tests make the deadline short). */
  answers?: AnswerLimits;
}

export interface CollectedGarbage {
  /** Per engine, in the pool's order: what was removed there, or why it was not reached. */
  engines: Array<{ name: string; removed: ReapedContainer[]; handedBack?: HandedBackRun[]; unreachable?: string }>;
  /** This host's run folders whose controller is gone. */
  runDirs: string[];
  /** This host's tree-hold files whose controller is gone (removed with the run folders; counted apart). */
  holds: string[];
  /**
   * Folders of git packs that ended runs set aside because this host could not check them (its git
   * could not start): never removed by gc, they wait for their user to verify the packs and put
   * them back, or to delete them.
   */
  keptPacks: KeptPackFolder[];
  /**
   * Copy-mode applies a dead controller left half done, undone in its tree (dead-apply.ts); what
   * could not be put back waits in `kept`, with a manifest of where each entry belongs; `sentence`
   * says what was done in a line.
   */
  undoneApplies: Array<DeadApply & { sentence: string }>;
}

export type { JudgedDeadRun } from "../run/judge-dead-run.js";
export type { HandedBackRun, ReapedContainer } from "../run/reap-orphans.js";
export type { KeptPackFolder } from "../run/run-dirs.js";
export type { DeadApply } from "../workspace-transfer/dead-apply.js";

export async function collectGarbage(options: GarbageOptions = {}): Promise<CollectedGarbage> {
  const pool = chosenEnginePool(options.engines, options.env ?? process.env, options.answers);
  const engines: CollectedGarbage["engines"] = [];
  try {
    for (const engine of pool.engines) {
      const unreachable = (error: unknown) => {
        if (pool.engines.length === 1) throw error;
        engines.push({ name: engine.name, removed: [], unreachable: (error as Error).message.split("\n")[0]! });
      };
      try {
        await pingWithin(engine);
      } catch (error) {
        unreachable(error);
        continue;
      }
      try {
        // Bind-mode runs whose controller died before judging them are judged here, before their trees go back.
        const removed = await reapContainers(engine, { all: options.all, judge: true, dryRun: options.dryRun });
        // Dead runs whose container is already gone from this engine: their trees, from their records.
        const handedBack = await handBackGoneRuns(engine, { judge: true, dryRun: options.dryRun });
        engines.push({ name: engine.name, removed, ...(handedBack.length ? { handedBack } : {}) });
      } catch (error) {
        if (!(error instanceof EngineAnswerError)) throw error;
        unreachable(error);
      }
    }
  } finally {
    pool.close();
  }
  const undoneApplies: DeadApply[] = [];
  const reaped = reapRunDirs(undefined, options.dryRun, undoneApplies);
  const isHold = (p: string) => path.basename(p).startsWith(HOLD_FILE_PREFIX);
  return {
    engines,
    runDirs: reaped.filter((p) => !isHold(p)),
    holds: reaped.filter(isHold),
    keptPacks: keptPackFolders(),
    undoneApplies: undoneApplies.map((a) => ({ ...a, sentence: deadApplySentence(a) })),
  };
}
