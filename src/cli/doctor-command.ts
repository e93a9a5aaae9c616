// `sandbox-run doctor`: the checks of the library's doctor() on the engines of --engines (or
// SANDBOX_RUN_ENGINES, or DOCKER_HOST's), printed one per line on stderr; exit 3 when one failed.
import type { Command } from "commander";
import { doctor } from "../operations.js";
import { EXIT } from "./exit-codes.js";
import type { CommandContext } from "./lazy-command.js";
import { platformFlag } from "./platform-flag.js";
import { interruptible } from "./stop-signals.js";
import { terminalLine } from "./terminal-text.js";

interface DoctorFlags {
  model?: string;
  models?: string;
  policy?: string;
  engines?: string;
}

export default async function doctorAction(
  { io, signals }: CommandContext,
  flags: DoctorFlags,
  command: Command,
): Promise<number> {
  // The root command's own --policy, --models and --engines take the flags wherever they are written.
  const root = command.parent?.opts<DoctorFlags>() ?? {};
  // Ctrl-C stops the checks: a container one of them started is removed before doctor exits.
  const words = { announce: "stopping the checks", stopped: "the checks were stopped and their containers removed" };
  return interruptible(signals, io, words, async (signal) => {
    const { ok } = await doctor({
      engines: flags.engines ?? root.engines,
      env: io.env,
      platform: platformFlag(undefined, io.env),
      model: flags.model ?? root.model,
      models: flags.models ?? root.models,
      policy: flags.policy ?? root.policy,
      // Checks quote what engines answered (versions, paths, errors): control characters escaped.
      report: {
        ok: (what) => io.stderr(`  ok    ${terminalLine(what)}\n`),
        bad: (what, fix) => io.stderr(`  FAIL  ${terminalLine(what)}\n        ${terminalLine(fix)}\n`),
        note: (what, advice) =>
          io.stderr(`  note  ${terminalLine(what)}\n${advice ? `        ${terminalLine(advice)}\n` : ""}`),
        engine: (name, address) => io.stderr(`engine ${terminalLine(name)} (${terminalLine(address ?? "?")})\n`),
      },
      signal,
    });
    io.stderr(ok ? "Ready.\n" : "Some checks failed; fix them and run `sandbox-run doctor` again.\n");
    return ok ? EXIT.ok : EXIT.unavailable;
  });
}
