// One run's budget for the paths the lent trees' configs name (git config, environment files, hook,
// agent and editor configs): every reader counts what it emits, per file and in all, and past
// either cap the run is refused. Never fewer paths protected in silence: a cap shared by all the
// repositories, past which targets were dropped, let a committed fixture's config of 10,000 paths
// leave a submodule's hooks unguarded, and a 149 KB .envrc of 10,000 `vendor/bin` folders, each
// then guarding every host command name as a path of its own, made 15 million paths and killed the
// controller before the run (review, session 25; such a folder is one entry now). The configs are
// the repository's own, so a refusal is the repository refusing itself: the caller can lend the
// tree without them or turn the protection off.
import { SandboxRunError } from "../errors.js";

/** Paths one config file may name (after duplicates are dropped). */
export const MAX_TARGETS_PER_FILE = 10_000;
/** Paths all the configs of one run may name together (~300 bytes each while they are judged). */
export const MAX_TARGETS = 200_000;

export class TargetBudget {
  private total = 0;
  private readonly perFile = new Map<string, number>();

  constructor(
    private readonly maxTotal = MAX_TARGETS,
    private readonly maxPerFile = MAX_TARGETS_PER_FILE,
  ) {}

  /** Counts one path `source` names; throws (usage) past a cap. */
  take(source: string): void {
    const count = (this.perFile.get(source) ?? 0) + 1;
    this.perFile.set(source, count);
    if (count > this.maxPerFile)
      throw protectionRefusal(`${source} names more than ${this.maxPerFile} paths to run, load or put on PATH`, LEND);
    this.total += 1;
    if (this.total > this.maxTotal)
      throw protectionRefusal(
        `the lent trees' configs name more than ${this.maxTotal} paths to run, load or put on PATH (the last one read: ${source})`,
        LEND,
      );
  }
}

const LEND =
  "sandbox-run protects every path a lent tree's git config, .envrc, mise, hook, agent and editor configs name, and refuses rather than protect fewer: lend a tree without such a config";

/**
 * The run refused before it starts because what a tree's configs name cannot all be read or
 * protected: `what` happened, `fix` is the first way on; turning the protection off is the other.
 */
export function protectionRefusal(what: string, fix: string): SandboxRunError {
  return new SandboxRunError("usage", `${what[0]!.toUpperCase()}${what.slice(1)}. Nothing was started.`, {
    hint: `${fix}, or turn this protection off for the run (disableBuiltinProtections: ["git-config-paths"]).`,
  });
}
