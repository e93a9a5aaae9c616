// `sandbox-run gc`: remove what dead controllers left behind on every engine of the pool (their
// containers, handing lent trees back) and the run folders of this host (collectGarbage). One
// engine that is down must not keep the others dirty: it is reported, and gc fails. What the engine
// said (ids, run ids from labels, its errors) reaches the terminal with control characters escaped.
import type { Command } from "commander";
import { type CollectedGarbage, collectGarbage, type JudgedDeadRun } from "../operations.js";
import type { CliIo } from "./cli-io.js";
import { EXIT } from "./exit-codes.js";
import type { CommandContext } from "./lazy-command.js";
import { terminalLine } from "./terminal-text.js";

/** `sandbox-run gc`'s action (the root's --engines and --dry-run count wherever they are written). */
export default function gcAction(
  { io }: CommandContext,
  flags: { all?: boolean; engines?: string; dryRun?: boolean },
  command: Command,
): Promise<number> {
  const root = command.parent?.opts<{ engines?: string; dryRun?: boolean }>();
  const engines = flags.engines ?? root?.engines;
  return gcCommand({ all: flags.all, engines, dryRun: flags.dryRun ?? root?.dryRun }, io);
}

export async function gcCommand(
  flags: { all?: boolean; engines?: string; dryRun?: boolean },
  io: CliIo,
): Promise<number> {
  if (flags.dryRun) return gcDryRun(flags, io);
  const collected = await collectGarbage({ all: flags.all, engines: flags.engines, env: io.env });
  let removed = 0;
  /** Judged runs whose trees still hold something the sandbox was not allowed to leave. */
  let unsafe = 0;
  /** Runs another gc is judging now: not this one's to say anything of yet. */
  let elsewhere = 0;
  const unreachable: string[] = [];
  for (const engine of collected.engines) {
    if (engine.unreachable !== undefined) {
      unreachable.push(engine.name);
      io.stderr(`skipped ${terminalLine(engine.name)}: ${terminalLine(engine.unreachable)}\n`);
      continue;
    }
    const on = collected.engines.length > 1 || engine.name !== "local" ? ` on ${terminalLine(engine.name)}` : "";
    for (const r of engine.removed) {
      io.stderr(
        `removed ${terminalLine(r.id.slice(0, 12))}${on} (run ${terminalLine(r.runId ?? "?")}): ${terminalLine(r.reason)}\n`,
      );
      if (r.judged && !judgedLines(r.judged, io)) r.judged.judgedBy === undefined ? unsafe++ : elsewhere++;
      for (const problem of r.notHandedBack ?? []) io.stderr(`  could not hand back ${terminalLine(problem)}\n`);
    }
    for (const run of engine.handedBack ?? []) {
      if (run.judged && !judgedLines(run.judged, io)) run.judged.judgedBy === undefined ? unsafe++ : elsewhere++;
      if (run.roots.length > 0)
        io.stderr(`handed back run ${terminalLine(run.runId)}'s trees${on} (its container is gone)\n`);
      for (const problem of run.notHandedBack ?? []) io.stderr(`  could not hand back ${terminalLine(problem)}\n`);
    }
    removed += engine.removed.length;
  }
  for (const dir of [...collected.runDirs, ...collected.holds])
    io.stderr(`removed ${terminalLine(dir)} (its controller is gone)\n`);
  // Hold files apart: one run's folder and hold read as "2 run folder(s)" (kill sweep, round 3, session 42).
  io.stderr(
    `${removed} container(s), ${collected.runDirs.length} run folder(s) and ${collected.holds.length} tree hold(s) removed\n`,
  );
  keptPackLines(collected.keptPacks, io);
  // An apply not undone whole waits for its user: gc fails, as for a judged run not put back.
  const notUndone = !undoneApplyLines(collected.undoneApplies, io);
  if (unsafe > 0)
    io.stderr(
      "sandbox-run: a judged run left what could not be put back (above): until you have looked at those paths from outside (ls with full paths, a file manager), do not run git, direnv or an editor in that tree\n",
    );
  if (elsewhere > 0)
    io.stderr(
      "sandbox-run: another gc is judging the run(s) above: run gc again once it ends; until then, do not run git, direnv or an editor in their trees\n",
    );
  if (unreachable.length === 0) return unsafe > 0 || elsewhere > 0 || notUndone ? EXIT.agentFailed : EXIT.ok;
  io.stderr(
    `sandbox-run: not cleaned (engine not reachable): ${terminalLine(unreachable.join(", "))}; run gc again once they answer\n`,
  );
  return EXIT.unavailable;
}

/** `gc --dry-run`: what a gc now would remove, judge and hand back; nothing is changed. */
async function gcDryRun(flags: { all?: boolean; engines?: string }, io: CliIo): Promise<number> {
  const collected = await collectGarbage({ all: flags.all, engines: flags.engines, env: io.env, dryRun: true });
  let containers = 0;
  const folders = new Set<string>();
  const unreachable: string[] = [];
  for (const engine of collected.engines) {
    if (engine.unreachable !== undefined) {
      unreachable.push(engine.name);
      io.stderr(`would skip ${terminalLine(engine.name)}: ${terminalLine(engine.unreachable)}\n`);
      continue;
    }
    const on = collected.engines.length > 1 || engine.name !== "local" ? ` on ${terminalLine(engine.name)}` : "";
    for (const r of engine.removed) {
      const judge = r.wouldJudge ? "; its trees would be judged first (its controller died before judging them)" : "";
      io.stderr(
        `would remove ${terminalLine(r.id.slice(0, 12))}${on} (run ${terminalLine(r.runId ?? "?")}): ${terminalLine(r.reason)}${judge}\n`,
      );
      for (const root of r.wouldHandBack ?? [])
        io.stderr(`would hand back ${terminalLine(root)} (run ${terminalLine(r.runId ?? "?")})\n`);
      // Its folder goes once its trees are back (the listing below counts it when nothing holds it).
      if (r.runDir && !collected.runDirs.includes(r.runDir) && !folders.has(r.runDir)) {
        folders.add(r.runDir);
        io.stderr(`would remove ${terminalLine(r.runDir)} (its run's folder)\n`);
      }
    }
    for (const run of engine.handedBack ?? []) {
      if (run.wouldJudge)
        io.stderr(`would judge run ${terminalLine(run.runId)}'s trees${on} (never judged by its controller)\n`);
      for (const root of run.roots)
        io.stderr(`would hand back ${terminalLine(root)} (run ${terminalLine(run.runId)})\n`);
    }
    containers += engine.removed.length;
  }
  for (const dir of [...collected.runDirs, ...collected.holds])
    io.stderr(`would remove ${terminalLine(dir)} (its controller is gone)\n`);
  io.stderr(
    `dry run: ${containers} container(s), ${collected.runDirs.length + folders.size} run folder(s) and ${collected.holds.length} tree hold(s) would be removed; nothing was changed\n`,
  );
  keptPackLines(collected.keptPacks, io);
  for (const a of collected.undoneApplies) if (a.wouldUndo) io.stderr(`${terminalLine(a.sentence)}\n`);
  if (unreachable.length === 0) return EXIT.ok;
  io.stderr(`sandbox-run: not looked at (engine not reachable): ${terminalLine(unreachable.join(", "))}\n`);
  return EXIT.unavailable;
}

/**
 * The folders of packs ended runs set aside unchecked (their host's git could not start), which gc
 * keeps: each named with what it holds and what to do, since nothing else will remove them.
 */
function keptPackLines(kept: CollectedGarbage["keptPacks"], io: CliIo): void {
  for (const k of kept) {
    const mib = (k.bytes / 1024 / 1024).toFixed(1);
    io.stderr(
      `kept ${terminalLine(k.dir)} (${k.files} file(s), ${mib} MiB): git packs a run set aside because this host could not check them\n`,
    );
  }
  if (kept.length > 0)
    io.stderr(
      "  check each pack with `git index-pack --verify <pack>` once git runs here, then move it and its .idx back into the repository's .git/objects/pack/, or delete the folder\n",
    );
}

/**
 * Copy-mode applies dead controllers left half done, one line each: undone (the tree as it was
 * before the run), or what could not be put back and where the originals wait. False when any
 * could not be undone whole (the user must put paths back by hand).
 */
function undoneApplyLines(applies: CollectedGarbage["undoneApplies"], io: CliIo): boolean {
  for (const a of applies) io.stderr(`${terminalLine(a.sentence)}\n`);
  return applies.every((a) => a.undone);
}

/**
 * What judging a run its controller died before judging found and did; false when its trees may
 * still hold what the sandbox was not allowed to leave (it could not be judged, or not all put back).
 */
function judgedLines(judged: JudgedDeadRun, io: CliIo): boolean {
  const trees = judged.trees.map(terminalLine).join(", ") || "(no writable tree)";
  if (judged.judgedBy !== undefined) {
    io.stderr(
      `not judged: run ${terminalLine(judged.runId)} (never judged by its controller: ${trees}) is being judged now by another sandbox-run gc (pid ${judged.judgedBy}); run gc again once that one ends\n`,
    );
    return false;
  }
  io.stderr(`judged run ${terminalLine(judged.runId)} (never judged by its controller): ${trees}\n`);
  for (const why of judged.gone) io.stderr(`  nothing left to judge: ${terminalLine(why)}\n`);
  const before = judged.foundBefore;
  if (before && before.violationCount > 0) {
    // The tree may look cleaner now: its controller had begun putting back what it found.
    io.stderr(
      `  its controller, which died while putting things back, had found ${before.violationCount} change(s) it was not allowed to make:\n`,
    );
    for (const v of before.violations) io.stderr(`    ${terminalLine(v)}\n`);
  }
  const hostRun = [...new Set([...(before?.hostRunFiles ?? []), ...(judged.hostRunFiles ?? [])])];
  if (hostRun.length > 0) {
    io.stderr(
      "  it changed files a tool on this machine reads or runs (review them before you build or open the tree):\n",
    );
    for (const h of hostRun) io.stderr(`    ${terminalLine(h)}\n`);
  }
  if (judged.failed !== undefined) {
    io.stderr(`  could not judge it: ${terminalLine(judged.failed)}\n`);
    return false;
  }
  if (judged.gone.length === judged.trees.length) return true;
  if (judged.violationCount === 0) io.stderr("  nothing it was not allowed to change\n");
  else io.stderr(`  ${judged.violationCount} change(s) it was not allowed to make\n`);
  for (const v of judged.violations) io.stderr(`  refused ${terminalLine(v)}\n`);
  for (const p of judged.restored) io.stderr(`  put back ${terminalLine(p)}\n`);
  for (const p of judged.notRestored) io.stderr(`  NOT put back ${terminalLine(p)}\n`);
  return judged.notRestored.length === 0;
}
