// `sandbox-run gc`: remove what dead controllers left behind on every engine of the pool (their
// containers, handing lent trees back) and the run folders of this host (collectGarbage). One
// engine that is down must not keep the others dirty: it is reported, and gc fails. What the engine
// said (ids, run ids from labels, its errors) reaches the terminal with control characters escaped.
import type { Command } from "commander";
import { collectGarbage } from "../operations.js";
import type { CliIo } from "./cli-io.js";
import { EXIT } from "./exit-codes.js";
import type { CommandContext } from "./lazy-command.js";
import { terminalLine } from "./terminal-text.js";

/** `sandbox-run gc`'s action (the root's --engines counts wherever it is written). */
export default function gcAction(
  { io }: CommandContext,
  flags: { all?: boolean; engines?: string },
  command: Command,
): Promise<number> {
  const engines = flags.engines ?? command.parent?.opts<{ engines?: string }>().engines;
  return gcCommand({ all: flags.all, engines }, io);
}

export async function gcCommand(flags: { all?: boolean; engines?: string }, io: CliIo): Promise<number> {
  const collected = await collectGarbage({ all: flags.all, engines: flags.engines, env: io.env });
  let removed = 0;
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
      for (const problem of r.notHandedBack ?? []) io.stderr(`  could not hand back ${terminalLine(problem)}\n`);
    }
    for (const run of engine.handedBack ?? []) {
      io.stderr(`handed back run ${terminalLine(run.runId)}'s trees${on} (its container is gone)\n`);
      for (const problem of run.notHandedBack ?? []) io.stderr(`  could not hand back ${terminalLine(problem)}\n`);
    }
    removed += engine.removed.length;
  }
  for (const dir of collected.runDirs) io.stderr(`removed ${terminalLine(dir)} (its controller is gone)\n`);
  io.stderr(`${removed} container(s) and ${collected.runDirs.length} run folder(s) removed\n`);
  if (unreachable.length === 0) return EXIT.ok;
  io.stderr(
    `sandbox-run: not cleaned (engine not reachable): ${terminalLine(unreachable.join(", "))}; run gc again once they answer\n`,
  );
  return EXIT.unavailable;
}
