// `sandbox-run gc`: remove what dead controllers left behind on every engine of the pool (their
// containers, handing lent trees back) and the run folders of this host. One engine that is down
// must not keep the others dirty: it is reported, and gc fails.
import { reapContainers } from "../run/reap-orphans.js";
import { reapRunDirs } from "../run/run-dirs.js";
import type { Command } from "commander";
import type { CliIo } from "./cli-io.js";
import { enginePoolFor } from "./engines-option.js";
import { EXIT } from "./exit-codes.js";
import type { CommandContext } from "./lazy-command.js";

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
  const pool = enginePoolFor(flags.engines, io.env);
  let removed = 0;
  const unreachable: string[] = [];
  try {
    for (const engine of pool.engines) {
      const on = pool.engines.length > 1 || engine.name !== "local" ? ` on ${engine.name}` : "";
      try {
        await engine.ping();
      } catch (error) {
        if (pool.engines.length === 1) throw error;
        unreachable.push(engine.name);
        io.stderr(`skipped ${engine.name}: ${(error as Error).message.split("\n")[0]}\n`);
        continue;
      }
      const reaped = await reapContainers(engine, { all: flags.all });
      for (const r of reaped) {
        io.stderr(`removed ${r.id.slice(0, 12)}${on} (run ${r.runId ?? "?"}): ${r.reason}\n`);
        for (const problem of r.notHandedBack ?? []) io.stderr(`  could not hand back ${problem}\n`);
      }
      removed += reaped.length;
    }
  } finally {
    pool.close();
  }
  const dirs = reapRunDirs();
  for (const dir of dirs) io.stderr(`removed ${dir} (its controller is gone)\n`);
  io.stderr(`${removed} container(s) and ${dirs.length} run folder(s) removed\n`);
  if (unreachable.length === 0) return EXIT.ok;
  io.stderr(
    `sandbox-run: not cleaned (engine not reachable): ${unreachable.join(", ")}; run gc again once they answer\n`,
  );
  return EXIT.unavailable;
}
