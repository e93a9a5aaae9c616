// Every `sandbox-run` call pays for what the program loads before it looks at its arguments, so the
// program (program.ts) loads only commander and what --help and --version show. A command's work
// lives in its own module, loaded when that command runs:
//
//   program.command("show <record-dir>").description("...").option(...)
//     .action(lazy(ctx, () => import("./show-command.js")));
//
// The module's default export (or the export named as the third argument) takes the context, then
// commander's arguments (operands, the flags, the Command) and returns the exit code. Write the
// import with a literal path: the CLI is bundled (scripts/bundle-cli.mjs) and each such import
// becomes a chunk that loads when its command runs.
// tests/unit/cli-start-up.test.ts fails when a module that --help, --version or --dry-run do not
// need is loaded again at start-up.
import type { CliIo } from "./cli-io.js";

/** What each command's action needs: the io, the signals to stop on, the raw arguments, and where its exit code goes. */
export interface CommandContext {
  io: CliIo;
  signals?: NodeJS.EventEmitter;
  /** The arguments as given (after the program name): e.g. whether `--` forced a prompt. */
  argv: readonly string[];
  exit(code: number): void;
}

/** A command's action: the context, then commander's arguments; returns the exit code (0 when nothing). */
// biome-ignore lint/suspicious/noExplicitAny: each module declares the commander arguments it takes.
type CommandAction = (ctx: CommandContext, ...args: any[]) => Promise<number | undefined> | number | undefined;

/** A commander action that loads `load()`'s module when the command runs, and calls its `name` export. */
export function lazy<M>(
  ctx: CommandContext,
  load: () => Promise<M>,
  name: keyof M & string = "default" as keyof M & string,
): (...args: unknown[]) => Promise<void> {
  return async (...args) => {
    const action = (await load())[name] as CommandAction;
    const code = await action(ctx, ...args);
    if (typeof code === "number") ctx.exit(code);
  };
}
