// `sandbox-run doctor`: the engines of --engines (or SANDBOX_RUN_ENGINES, or DOCKER_HOST's), then
// doctor.ts's checks.
import type { Command } from "commander";
import { runDoctor } from "./doctor.js";
import { enginePoolFor } from "./engines-option.js";
import type { CommandContext } from "./lazy-command.js";

interface DoctorFlags {
  model?: string;
  models?: string;
  policy?: string;
  engines?: string;
}

export default async function doctorAction(
  { io }: CommandContext,
  flags: DoctorFlags,
  command: Command,
): Promise<number> {
  // The root command's own --policy, --models and --engines take the flags wherever they are written.
  const root = command.parent?.opts<DoctorFlags>() ?? {};
  const pool = enginePoolFor(flags.engines ?? root.engines, io.env);
  try {
    return await runDoctor(io, {
      model: flags.model ?? root.model,
      models: flags.models ?? root.models,
      policy: flags.policy ?? root.policy,
      engines: pool.engines,
    });
  } finally {
    pool.close();
  }
}
