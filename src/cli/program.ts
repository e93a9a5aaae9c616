// The sandbox-run command line: the commands and their flags, each a thin call into the library,
// and one exit code. No logic of its own beyond presenting results (stdout) and
// progress/diagnostics (stderr).
//
// Start-up is paid by every call, so this file loads commander and what --help and --version
// show, nothing more: each action is a module loaded when its command runs (lazy-command.ts):
//
//   .action(lazy(ctx, () => import("./show-command.js")))
//
// Shell completion (completion.ts) is generated from these definitions.
import { Command } from "commander";
import { usageError } from "../errors.js";
import { runnerImageSpec } from "../operations.js";
import { sandboxRunVersion } from "../util/package-version.js";
import type { CliIo } from "./cli-io.js";
import { closestCommand } from "./command-typos.js";
import { EXIT } from "./exit-codes.js";
import { type CommandContext, lazy } from "./lazy-command.js";
import { PLATFORM_FLAG, platformFlag, RUN_PLATFORM_HELP } from "./platform-flag.js";
import { reportError, usageErrorOf } from "./report-error.js";
import { usageEnvelope } from "./result-envelope.js";
import { jsonText } from "./terminal-text.js";

const collect = (value: string, previous: string[] = []) => [...previous, value];

const ENGINES_FLAG_HELP =
  "engines file (JSON or YAML): runs go to the least-loaded engine (or set SANDBOX_RUN_ENGINES)";

export async function runCli(argv: string[], io: CliIo, signals?: NodeJS.EventEmitter): Promise<number> {
  let exitCode: number = EXIT.ok;
  const program = cliProgram({ io, signals, argv, exit: (code) => (exitCode = code) });
  try {
    refuseHelpOfUnknownCommand(argv, program);
    await program.parseAsync(helpOfSubcommand(argv), { from: "user" });
    return exitCode;
  } catch (error) {
    // Commander's own (a missing argument, an unknown option) in the house's words, with what to do.
    const failure = commanderUsage(error, argv, program) ?? error;
    const code = reportError(failure, io);
    // --json promises one envelope on stdout, usage errors included (they print their message on stderr too).
    const usage = code === EXIT.usage ? usageErrorOf(failure) : undefined;
    if (usage && wantsJson(argv)) {
      io.stdout(`${jsonText(usageEnvelope(usage.message, usage.hint, code), 2)}\n`);
    }
    return code;
  }
}

/** The program with every command and flag defined (and no action run): what help and completion read. */
function cliProgram(ctx: CommandContext): Command {
  const { io } = ctx;
  const program = new Command()
    .name("sandbox-run")
    .description("Run the Pi coding agent in a disposable, hardened container")
    .exitOverride()
    // Its errors are said by runCli (commanderUsage), as every other error is: never a bare "error: ...".
    .configureOutput({ writeOut: (s) => io.stdout(s), writeErr: (s) => io.stderr(s), outputError: () => {} })
    .showSuggestionAfterError()
    .helpCommand("help [command]", "show help for a command")
    // The line reads and hashes the image's files: made only when it is asked for.
    .version(
      asksForVersion(ctx.argv) ? versionLine() : "",
      "-V, --version",
      "print the versions of sandbox-run, its runner image's Pi and Node",
    );
  for (const define of [
    defineRun,
    defineReplay,
    defineShow,
    defineBatch,
    defineImage,
    defineDoctor,
    defineGc,
    defineDemo,
    definePolicy,
    defineCompletion,
  ]) {
    define(program, ctx);
  }
  refuseRunFlagsElsewhere(program);
  return program;
}

/** replay reads every run flag as its own (parseRunFlags, refusing the ones the record decides). */
const READS_RUN_FLAGS = new Set(["replay"]);

/** Where a run's flag a subcommand does not take belongs instead, said in the refusal. */
const ELSEWHERE: Record<string, string> = {
  batch:
    " A task's own settings (schema, writable folders, policy, model, timeout) go in its line of the tasks file; `--policy read-only` sets every task's sandbox.",
};

/**
 * commander takes the run's flags after any subcommand, and a subcommand that does not read them
 * ignored them: `gc --dry-run` ran a real gc (review, session 32), and `batch --dry-run` or `batch
 * --sandbox read-only` ran every task in full, its changes applied (review, session 43: batch was let
 * through whole, though it reads only the run flags it has itself). Such a flag is refused, unless
 * the subcommand has a flag of that name itself (subcommand-flags.ts reads it from either place).
 */
function refuseRunFlagsElsewhere(program: Command): void {
  program.hook("preAction", (_root, action) => {
    if (action === program || READS_RUN_FLAGS.has(action.name())) return;
    // A flag the subcommand has too is its own (it reads the root's as a fallback: gc's --engines).
    const own = new Set(action.options.map((o) => o.long));
    const given = program.options.find(
      (o) => program.getOptionValueSource(o.attributeName()) === "cli" && !own.has(o.long),
    );
    if (!given) return;
    const names: string[] = [];
    for (let c: Command | null = action; c && c !== program; c = c.parent) names.unshift(c.name());
    const path = names.join(" ");
    throw usageError(
      `${given.long ?? given.flags} is an option of a run, not of \`sandbox-run ${path}\`.`,
      `\`sandbox-run ${path} --help\` lists the options it takes.${ELSEWHERE[path] ?? ""}`,
    );
  });
}

/**
 * `help image build` as `image build --help`: commander's help command looks one level down only,
 * and printed the help of `image`, without `build`'s options (review, session 27).
 */
function helpOfSubcommand(argv: string[]): string[] {
  if (argv[0] !== "help" || argv.length < 3 || argv.slice(1).some((a) => a.startsWith("-"))) return argv;
  return [...argv.slice(1), "--help"];
}

/**
 * `help nope` (and `help image nope`): commander's help command printed the whole help (or
 * `image`'s) with exit 0 (review, session 27), as if `nope` were a command. A usage error naming
 * the command probably meant, if any.
 */
function refuseHelpOfUnknownCommand(argv: readonly string[], program: Command): void {
  if (argv[0] !== "help") return;
  let parent = program;
  const path: string[] = [];
  for (const name of argv.slice(1)) {
    if (name.startsWith("-")) return;
    const names = [
      ...parent.commands.flatMap((c) => [c.name(), ...c.aliases()]),
      ...(parent === program ? ["help"] : []),
    ];
    // `help completion bash`: an operand, not a subcommand.
    if (parent !== program && parent.commands.length === 0) return;
    const found = parent.commands.find((c) => c.name() === name || c.aliases().includes(name));
    if (!found && !names.includes(name)) {
      const meant = closestCommand(name, names);
      const shown = [...path, name].join(" ");
      throw usageError(
        `Unknown command "${shown}"${meant ? `; did you mean \`sandbox-run help ${[...path, meant].join(" ")}\`?` : "."}`,
        `\`sandbox-run help${path.length ? ` ${path.join(" ")}` : ""}\` lists the commands.`,
      );
    }
    if (!found) return;
    path.push(name);
    parent = found;
  }
}

/**
 * A usage error of commander's own (a missing argument, an unknown option or command, a bad value)
 * as a SandboxRunError "usage" that names the command's help: it printed `error: missing required
 * argument 'shell'`, with no `sandbox-run:` and nothing to do next (newcomer review, session 37).
 * Undefined for anything else (help and version shown are commander's too, and not errors).
 */
function commanderUsage(error: unknown, argv: readonly string[], program: Command): Error | undefined {
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code !== "string" || !code.startsWith("commander.") || typeof message !== "string") return undefined;
  if (["commander.helpDisplayed", "commander.version", "commander.help"].includes(code)) return undefined;
  const names: string[] = [];
  let parent = program;
  for (const arg of argv) {
    if (arg === "--") break;
    if (arg.startsWith("-")) continue;
    const found = parent.commands.find((c) => c.name() === arg || c.aliases().includes(arg));
    if (!found) break;
    names.push(found.name());
    parent = found;
  }
  const help = ["sandbox-run", ...names, "--help"].join(" ");
  // "unknown option '--dry-ru'\n(Did you mean --dry-run?)": one sentence.
  const text = message
    .replace(/^error: /, "")
    .replace(/\s*\n\(Did you mean (.*)\?\)\s*$/, "; did you mean $1?")
    .trim();
  const sentence = `${text.charAt(0).toUpperCase()}${text.slice(1)}${/[.?]$/.test(text) ? "" : "."}`;
  return usageError(sentence, `\`${help}\` lists what it takes.`);
}

/** `--json` given as a flag (not inside the prompt after `--`). */
function wantsJson(argv: readonly string[]): boolean {
  const end = argv.indexOf("--");
  return (end === -1 ? argv : argv.slice(0, end)).includes("--json");
}

/** -V or --version among the flags (also in a group of short flags, -qV), before any `--`. */
function asksForVersion(argv: readonly string[]): boolean {
  const end = argv.indexOf("--");
  return (end === -1 ? argv : argv.slice(0, end)).some((a) => a === "--version" || /^-[A-Za-z]*V[A-Za-z]*$/.test(a));
}

function versionLine(): string {
  const image = runnerImageSpec();
  return `sandbox-run ${sandboxRunVersion()} (Pi ${image.piVersion}, Node ${image.nodeVersion} in ${image.tag})`;
}

/** The run itself (the root command): flags in, one exit code out (run-command.ts). */
function defineRun(program: Command, ctx: CommandContext): void {
  program
    .argument("[prompt...]", "the task (read from stdin when omitted)")
    .option("--schema <file>", "JSON Schema file: print the validated JSON object instead of text")
    .option("--prompt-file <file>", "read the task from this file (instead of the argument or stdin)")
    .option("--cwd <dir>", "workspace directory (default: the current directory)")
    .option("--sandbox <mode>", "read-only | workspace-write | danger-full-access (default workspace-write)")
    .option("--policy <name|file>", "a built-in policy name or a policy file, JSON or YAML (overrides --sandbox)")
    .option("--writable <dir>", "extra writable directory (repeatable)", collect)
    .option("--model <provider/id>", "model to use (or set SANDBOX_RUN_MODEL)")
    .option("--models <file>", "Pi models.json with custom providers (keys stay on the host)")
    .option("--env <KEY=VALUE>", "variable for the sandbox; KEY alone passes the host's value (repeatable)", collect)
    .option("--timeout <seconds>", "wall-clock limit for the run")
    .option("--runtime <runtime>", "container runtime: runc or runsc (gVisor)")
    .option(PLATFORM_FLAG, RUN_PLATFORM_HELP)
    .option(
      "--workspace <mode>",
      "how the workspace reaches the sandbox: bind (mounted) or copy (copied in, changes checked then copied back)",
    )
    .option(
      "--hand-back <mode>",
      "what becomes of the workspace's changes: apply (default: written into it), branch (committed by your git onto sandbox-run/<run-id>; working tree and .git untouched) or patch (only a patch file); branch and patch run in copy mode",
    )
    .option("--patch-file <file>", "with --hand-back patch: write the patch here (a path outside the workspace)")
    .option("--image <tag>", "runner image to use, e.g. one from `image build --apt` (or set SANDBOX_RUN_IMAGE)")
    .option("--engines <file>", ENGINES_FLAG_HELP)
    .option("--context-files", "load AGENTS.md/CLAUDE.md from the workspace (off by default: prompt injection)")
    .option("--max-turns <n>", "stop the run after this many model responses (default: the policy's limits.maxTurns)")
    .option("--max-cost <usd>", "stop the run when the cost Pi reports passes this many US dollars")
    .option("--events <file>", "write the run's events (Pi's and the sandbox's) as JSONL while they arrive")
    .option(
      "--json",
      "print one JSON result envelope on stdout (ok, result, error, usage, ...) instead of the bare result",
    )
    .option(
      "--record <dir>",
      "write a run record (policy, image, prompt, events, result, workspace patch) to this new folder",
    )
    .option("--dry-run", "print the run plan (mounts, argv, env names, limits) and start nothing")
    .option(
      "--refuse-workspace-config",
      "refuse a schema or prompt file inside the workspace or a writable root too (strict CI mode; or SANDBOX_RUN_REFUSE_WORKSPACE_CONFIG=1)",
    )
    .option(
      "--allow-workspace-config",
      "accept a policy, models or engines file inside the workspace or a writable root, with a warning (refused by default: the tree under test would choose the boundary; or SANDBOX_RUN_ALLOW_WORKSPACE_CONFIG=1)",
    )
    .option("--no-build", "fail instead of building the runner image when it is missing")
    .option("-q, --quiet", "no progress on stderr")
    .action(lazy(ctx, () => import("./run-command.js")));
}

/** A recorded call again, the model answered from the recording (replay-command.ts). */
function defineReplay(program: Command, ctx: CommandContext): void {
  program
    .command("replay <record-dir>")
    .description(
      "run a recorded call again in a fresh sandbox, the model answered from the recording (no provider, no key)",
    )
    .option(
      "--replay-mode <mode>",
      "strict (default): stop at the first request that differs; lenient: report and go on",
    )
    .option("--replay-speed <speed>", "fast (default), or recorded: keep the recorded timing of the replies")
    .option("--cwd <dir>", "workspace directory (default: the current directory)")
    .option(
      "--workspace-path <path>",
      "where the workspace appears inside the sandbox (default: where the recording saw it)",
    )
    .option(
      "--policy <name|file>",
      "the policy to replay under (default: workspace-write); the record's is compared, never applied",
    )
    .option("--image <tag>", "the runner image to replay with (default: this version's); the record's is compared")
    .option("--runtime <runtime>", "container runtime: runc or runsc (gVisor)")
    .option("--writable <dir>", "extra writable directory (repeatable)", collect)
    .option("--env <KEY=VALUE>", "variable for the sandbox; KEY alone passes the host's value (repeatable)", collect)
    .option("--timeout <seconds>", "wall-clock limit (default: the policy's, or the recorded one when shorter)")
    .option("--events <file>", "write the run's events as JSONL while they arrive")
    .option("--json", "print one JSON result envelope on stdout, with a `replay` field")
    .option("--record <dir>", "write a run record of the replay to this new folder")
    .option("--dry-run", "print the run plan and start nothing")
    .option("--refuse-workspace-config", "refuse a record that lies inside the workspace (strict CI mode)")
    .option("--no-build", "fail instead of building the runner image when it is missing")
    .option("-q, --quiet", "no progress on stderr")
    .action(lazy(ctx, () => import("./replay-command.js")));
}

/** A run record as one self-contained page, or a Markdown summary (show-command.ts). */
function defineShow(program: Command, ctx: CommandContext): void {
  program
    .command("show <record-dir>")
    .description("turn a run record into one self-contained HTML page (or a Markdown summary with --format md)")
    .option("-o, --output <file>", "where to write it (default: run.html in the record's folder; - for stdout)")
    .option("--open", "open the page in the system's browser")
    .option("--format <format>", "html (default): the page; md: a Markdown summary on stdout, for CI logs")
    .action(lazy(ctx, () => import("./show-command.js")));
}

/** Many calls from a JSONL file, each in its own sandbox, warm sandboxes kept ready (batch-command.ts, loaded on use). */
function defineBatch(program: Command, ctx: CommandContext): void {
  program
    .command("batch <tasks.jsonl>")
    .description(
      "run one call per line of a JSONL file (- reads stdin) ({id, prompt, cwd, schema?, policy?, model?, writable?, timeout?}), each in its own sandbox; one --json envelope per task on stdout",
    )
    .option("--model <provider/id>", "model of every task without its own (or set SANDBOX_RUN_MODEL)")
    .option("--models <file>", "Pi models.json with custom providers (keys stay on the host)")
    .option("--policy <name|file>", "policy of every task without its own")
    .option("--concurrency <n>", "tasks running at once (default 1)")
    .option(
      "--warm <n>",
      "warm sandboxes kept ready, made before the tasks need them (default: --concurrency + 1; 0: none)",
    )
    .option("--runtime <runtime>", "container runtime: runc or runsc (gVisor)")
    .option("--timeout <seconds>", "wall-clock limit of every task without its own")
    .option("--image <tag>", "runner image to use (or set SANDBOX_RUN_IMAGE)")
    .option("--env <KEY=VALUE>", "variable for every sandbox; KEY alone passes the host's value (repeatable)", collect)
    .option("--engines <file>", ENGINES_FLAG_HELP)
    .option("--record-dir <dir>", "write each task's run record to <dir>/<id>")
    .option(
      "--resume <results.jsonl>",
      "skip the tasks an earlier batch's stdout (appended to this file: >> results.jsonl) reports as succeeded",
    )
    .option("--max-failures <n>", "start no more tasks once this many have failed (the running ones finish)")
    .option(
      "--allow-workspace-config",
      "accept a policy, models or engines file inside a task's workspace, with a warning (refused by default)",
    )
    .option("--refuse-workspace-config", "refuse a schema or prompt file inside a task's workspace too")
    .option("--no-build", "fail instead of building the runner image when it is missing")
    .option("-q, --quiet", "no progress on stderr")
    .action(lazy(ctx, () => import("./batch-command.js")));
}

/** The runner image: build, tag, prune. */
function defineImage(program: Command, ctx: CommandContext): void {
  const { io } = ctx;
  const image = program.command("image").description("manage the runner image");
  image
    .command("build")
    .description("build the runner image (Pi and Node pinned; offline base when no registry is reachable)")
    .option("--base <image>", "base image: auto, node:24-bookworm-slim, or any Debian bookworm image", "auto")
    .option(
      "--apt <packages>",
      "also build an image with these Debian packages added (e.g. python3,make); prints its tag",
      collect,
    )
    .option(
      PLATFORM_FLAG,
      "linux/amd64 or linux/arm64 (default: the engine's own; another one is built under emulation)",
    )
    .action(lazy(ctx, () => import("./image-command.js"), "build"));
  image
    .command("tag")
    .description("print the tag of the runner image this version uses")
    .option(PLATFORM_FLAG, "the tag for this platform (default: this machine's)")
    .action((flags: { platform?: string }) => {
      // The root command's own --platform takes the flag wherever it is written.
      const platform = platformFlag(flags.platform ?? program.opts().platform, io.env);
      io.stdout(`${runnerImageSpec(platform).tag}\n`);
    });
  image
    .command("load <tar>")
    .description("load the runner image from a `docker save` tar (a cache's), refusing one that tags anything else")
    .option("--tag <tag>", "the one tag the tar may carry (default: this version's runner image)")
    .action(lazy(ctx, () => import("./image-command.js"), "load"));
  image
    .command("prune")
    .description("remove runner images (and --apt images) of other sandbox-run versions; prints each removed tag")
    .action(lazy(ctx, () => import("./image-command.js"), "prune"));
}

/** What a run needs, checked one by one (doctor-command.ts). */
function defineDoctor(program: Command, ctx: CommandContext): void {
  program
    .command("doctor")
    .description("check the Docker engine, the runner image, runtimes and provider credentials")
    .option("--model <provider/id>", "also check the credentials this model needs")
    .option(
      "--models <file>",
      "also check the custom providers of this Pi models.json: each baseUrl answers from this host, each key resolves (never printed)",
    )
    .option("--policy <name|file>", "also check the secrets this policy gives its runs (names and hosts, never values)")
    .option("--engines <file>", "check every engine of this engines file (or SANDBOX_RUN_ENGINES)")
    .action(lazy(ctx, () => import("./doctor-command.js")));
}

/** What dead controllers left behind (gc-command.ts). */
function defineGc(program: Command, ctx: CommandContext): void {
  program
    .command("gc")
    .description(
      "remove containers a dead controller left behind (on every engine of --engines); judge a bind-mode run it died before judging",
    )
    .option("--all", "remove every sandbox-run container, even of live controllers")
    .option("--engines <file>", "clean every engine of this engines file (or SANDBOX_RUN_ENGINES)")
    .option("--dry-run", "say what would be removed, judged and handed back; change nothing")
    .action(lazy(ctx, () => import("./gc-command.js")));
}

/** The whole pipeline against a bundled scripted model. */
function defineDemo(program: Command, ctx: CommandContext): void {
  program
    .command("demo")
    .description("run the whole pipeline against a bundled scripted model (no provider key needed)")
    .option("--runtime <runtime>", "container runtime: runc or runsc (gVisor)")
    .option("--image <tag>", "runner image to use, e.g. one from `image build --apt` (or set SANDBOX_RUN_IMAGE)")
    .option("-q, --quiet", "no progress on stderr")
    .action(lazy(ctx, () => import("./demo-command.js")));
}

/** The built-in policies and the effective one. */
function definePolicy(program: Command, ctx: CommandContext): void {
  const policy = program.command("policy").description("inspect policies");
  policy
    .command("list")
    .description(
      "list the policies --policy takes by name (the built-ins and the shipped examples) and what each is for",
    )
    .action(lazy(ctx, () => import("./policy-command.js"), "list"));
  policy
    .command("show <name|file>")
    .description("print the effective policy (built-in name or file)")
    .option("--yaml", "print it as YAML, a starting point for a policy file with comments")
    .action(lazy(ctx, () => import("./policy-command.js"), "show"));
}

/** Shell completion, generated from the definitions above. */
function defineCompletion(program: Command, ctx: CommandContext): void {
  program
    .command("completion <shell>")
    .description("print a completion script for bash, zsh or fish (e.g. `source <(sandbox-run completion bash)`)")
    .action(lazy(ctx, () => import("./completion.js")));
}
