// The sandbox-run command line: the commands and their flags, each a thin call into the library
// (the run itself: run-command.ts), and one exit code. No logic of its own beyond presenting
// results (stdout) and progress/diagnostics (stderr).
import { Command } from "commander";
import { DockerEngine } from "../engine/docker-engine.js";
import { usageError } from "../errors.js";
import { runnerImageSpec } from "../image/runner-image.js";
import { BUILT_IN_POLICIES, loadPolicy } from "../policy/load-policy.js";
import { sandboxRunVersion } from "../util/package-version.js";
import type { CliIo } from "./cli-io.js";
import { runDoctor } from "./doctor.js";
import { ENGINES_FLAG_HELP, enginePoolFor } from "./engines-option.js";
import { EXIT } from "./exit-codes.js";
import { gcCommand } from "./gc-command.js";
import { type ReplayCommandFlags, replayCommand } from "./replay-command.js";
import { reportError } from "./report-error.js";
import { runCommand, type RunCommandFlags } from "./run-command.js";

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** What each command's action needs: the io, the signals to stop on, and where its exit code goes. */
interface CommandContext {
  io: CliIo;
  signals?: NodeJS.EventEmitter;
  exit(code: number): void;
}

export async function runCli(argv: string[], io: CliIo, signals?: NodeJS.EventEmitter): Promise<number> {
  let exitCode: number = EXIT.ok;
  const program = new Command()
    .name("sandbox-run")
    .description("Run the Pi coding agent in a disposable, hardened container")
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout(s), writeErr: (s) => io.stderr(s) })
    .showSuggestionAfterError()
    .version(versionLine(), "-V, --version", "print the versions of sandbox-run, its runner image's Pi and Node");
  const ctx: CommandContext = { io, signals, exit: (code) => (exitCode = code) };
  for (const define of [
    defineRun,
    defineReplay,
    defineBatch,
    defineImage,
    defineDoctor,
    defineGc,
    defineDemo,
    definePolicy,
  ]) {
    define(program, ctx);
  }
  try {
    await program.parseAsync(argv, { from: "user" });
    return exitCode;
  } catch (error) {
    return reportError(error, io);
  }
}

function definedOnly<T extends object>(flags: T): T {
  return Object.fromEntries(Object.entries(flags).filter(([, value]) => value !== undefined)) as T;
}

function versionLine(): string {
  const image = runnerImageSpec();
  return `sandbox-run ${sandboxRunVersion()} (Pi ${image.piVersion}, Node ${image.nodeVersion} in ${image.tag})`;
}

/** The run itself (the root command): flags in, one exit code out (run-command.ts). */
function defineRun(program: Command, ctx: CommandContext): void {
  const { io } = ctx;
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
    .option(
      "--workspace <mode>",
      "how the workspace reaches the sandbox: bind (mounted) or copy (copied in, changes checked then copied back)",
    )
    .option("--image <tag>", "runner image to use, e.g. one from `image build --apt` (or set SANDBOX_RUN_IMAGE)")
    .option("--engines <file>", ENGINES_FLAG_HELP)
    .option("--context-files", "load AGENTS.md/CLAUDE.md from the workspace (off by default: prompt injection)")
    .option("--max-turns <n>", "stop the run when the agent starts more turns than this")
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
      "refuse a policy, models, schema or prompt file inside the workspace or a writable root (strict CI mode; or SANDBOX_RUN_REFUSE_WORKSPACE_CONFIG=1)",
    )
    .option("--no-build", "fail instead of building the runner image when it is missing")
    .option("-q, --quiet", "no progress on stderr")
    .action(async (promptParts: string[], flags: RunCommandFlags) => {
      ctx.exit(await runCommand(promptParts, flags, io, ctx.signals));
    });
}

/** A recorded call again, the model answered from the recording (replay-command.ts). */
function defineReplay(program: Command, ctx: CommandContext): void {
  const { io } = ctx;
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
    .option("--policy <name|file>", "try another policy than the recorded one")
    .option("--image <tag>", "try another runner image than the recorded one")
    .option("--runtime <runtime>", "container runtime: runc or runsc (gVisor)")
    .option("--writable <dir>", "extra writable directory (repeatable)", collect)
    .option("--env <KEY=VALUE>", "variable for the sandbox; KEY alone passes the host's value (repeatable)", collect)
    .option("--timeout <seconds>", "wall-clock limit (default: the recorded one)")
    .option("--events <file>", "write the run's events as JSONL while they arrive")
    .option("--json", "print one JSON result envelope on stdout, with a `replay` field")
    .option("--record <dir>", "write a run record of the replay to this new folder")
    .option("--dry-run", "print the run plan and start nothing")
    .option("--refuse-workspace-config", "refuse a record that lies inside the workspace (strict CI mode)")
    .option("--no-build", "fail instead of building the runner image when it is missing")
    .option("-q, --quiet", "no progress on stderr")
    .action(async (recordDir: string, flags: ReplayCommandFlags) => {
      // commander gives the root command every flag it also has, wherever it is written.
      const root = program.opts<ReplayCommandFlags>();
      const merged = {
        ...definedOnly(root),
        ...definedOnly(flags),
        build: root.build !== false && flags.build !== false,
      };
      ctx.exit(await replayCommand(recordDir, merged, io, ctx.signals));
    });
}

/** Many calls from a JSONL file, each in its own sandbox, warm sandboxes kept ready (batch-command.ts, loaded on use). */
function defineBatch(program: Command, ctx: CommandContext): void {
  program
    .command("batch <tasks.jsonl>")
    .description(
      "run one call per line of a JSONL file ({id, prompt, cwd, schema?, policy?, model?, writable?, timeout?}), each in its own sandbox; one --json envelope per task on stdout",
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
    .option("--no-build", "fail instead of building the runner image when it is missing")
    .option("-q, --quiet", "no progress on stderr")
    .action(async (file: string, flags: Record<string, unknown>) => {
      // commander gives the root command every flag it also has, wherever it is written.
      const root = program.opts<Record<string, unknown>>();
      const merged = {
        ...definedOnly(root),
        ...definedOnly(flags),
        build: root.build !== false && flags.build !== false,
      };
      const { batchCommand } = await import("./batch-command.js");
      ctx.exit(await batchCommand(file, merged, ctx.io, ctx.signals));
    });
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
    .action(async (flags: { base: string; apt?: string[] }) => {
      const { buildImages } = await import("../image/build-images.js");
      const engine = new DockerEngine();
      await engine.ping();
      const built = await buildImages(engine, {
        base: flags.base,
        apt: flags.apt,
        progress: (l) => io.stderr(`${l}\n`),
      });
      io.stdout(`${built.derived ?? built.runner}\n`);
      if (built.derived) {
        io.stderr(`sandbox-run: run with --image ${built.derived} (or SANDBOX_RUN_IMAGE=${built.derived})\n`);
      }
    });
  image
    .command("tag")
    .description("print the tag of the runner image this version uses")
    .action(() => io.stdout(`${runnerImageSpec().tag}\n`));
  image
    .command("prune")
    .description("remove runner images (and --apt images) of other sandbox-run versions; prints each removed tag")
    .action(async () => {
      const engine = new DockerEngine();
      await engine.ping();
      const { pruneRunnerImages } = await import("../image/prune-images.js");
      const current = runnerImageSpec().tag;
      const { removed, kept } = await pruneRunnerImages(engine, current);
      for (const tag of removed) io.stdout(`${tag}\n`);
      for (const { tag, reason } of kept) io.stderr(`sandbox-run: kept ${tag}: ${reason}\n`);
      io.stderr(
        `sandbox-run: removed ${removed.length} old runner image tag(s); kept ${current} (this version's)${kept.length ? ` and ${kept.length} in use` : ""}.\n`,
      );
    });
}

/** What a run needs, checked one by one (doctor.ts). */
function defineDoctor(program: Command, ctx: CommandContext): void {
  const { io } = ctx;
  program
    .command("doctor")
    .description("check the Docker engine, the runner image, runtimes and provider credentials")
    .option("--model <provider/id>", "also check the credentials this model needs")
    .option("--policy <name|file>", "also check the secrets this policy gives its runs (names and hosts, never values)")
    .option("--engines <file>", "check every engine of this engines file (or SANDBOX_RUN_ENGINES)")
    .action(async (flags: { model?: string; policy?: string; engines?: string }) => {
      // The root command's own --policy and --engines take the flags wherever they are written.
      const root = program.opts<{ policy?: string; engines?: string }>();
      const pool = enginePoolFor(flags.engines ?? root.engines, io.env);
      try {
        ctx.exit(await runDoctor(io, flags.model, flags.policy ?? root.policy, pool.engines));
      } finally {
        pool.close();
      }
    });
}

/** What dead controllers left behind (gc-command.ts). */
function defineGc(program: Command, ctx: CommandContext): void {
  const { io } = ctx;
  program
    .command("gc")
    .description("remove containers a dead controller left behind (on every engine of --engines)")
    .option("--all", "remove every sandbox-run container, even of live controllers")
    .option("--engines <file>", "clean every engine of this engines file (or SANDBOX_RUN_ENGINES)")
    .action(async (flags: { all?: boolean; engines?: string }) => {
      ctx.exit(await gcCommand({ all: flags.all, engines: flags.engines ?? program.opts().engines }, io));
    });
}

/** The whole pipeline against a bundled scripted model. */
function defineDemo(program: Command, ctx: CommandContext): void {
  const { io } = ctx;
  program
    .command("demo")
    .description("run the whole pipeline against a bundled scripted model (no provider key needed)")
    .option("--runtime <runtime>", "container runtime: runc or runsc (gVisor)")
    .option("--image <tag>", "runner image to use, e.g. one from `image build --apt` (or set SANDBOX_RUN_IMAGE)")
    .option("-q, --quiet", "no progress on stderr")
    .action(async (flags: { runtime?: string; quiet?: boolean }) => {
      const { runDemo } = await import("./demo.js");
      if (flags.runtime && flags.runtime !== "runc" && flags.runtime !== "runsc")
        throw usageError(`--runtime must be runc or runsc, not "${flags.runtime}".`);
      ctx.exit(await runDemo(io, { quiet: flags.quiet, runtime: flags.runtime as "runc" | "runsc" | undefined }));
    });
}

/** The built-in policies and the effective one. */
function definePolicy(program: Command, ctx: CommandContext): void {
  const { io } = ctx;
  const policy = program.command("policy").description("inspect policies");
  policy
    .command("list")
    .description("list the built-in policies and what each is for")
    .action(() => {
      const width = Math.max(...BUILT_IN_POLICIES.map((name) => name.length));
      for (const name of BUILT_IN_POLICIES) {
        io.stdout(`${name.padEnd(width)}  ${loadPolicy(name).description ?? ""}\n`);
      }
    });
  policy
    .command("show <name|file>")
    .description("print the effective policy (built-in name or file)")
    .option("--yaml", "print it as YAML, a starting point for a policy file with comments")
    .action(async (name: string, flags: { yaml?: boolean }) => {
      const policy = loadPolicy(name);
      if (!flags.yaml) return io.stdout(`${JSON.stringify(policy, null, 2)}\n`);
      const { stringify } = await import("yaml");
      io.stdout(`# sandbox-run policy (from ${name}); load it with --policy <file>.yaml\n${stringify(policy)}`);
    });
}
