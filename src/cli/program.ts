// The sandbox-run command line: parse -> library call -> exit code. No logic of its own
// beyond presenting results (stdout) and progress/diagnostics (stderr).
import fs from "node:fs";
import { Command } from "commander";
import { ContainerPiAgent } from "../container-pi-agent.js";
import { createDockerClient, pingDocker } from "../docker/docker-engine.js";
import { reapContainers, reapRunDirs } from "../docker/reaper.js";
import { isSandboxRunError, SandboxRunError, usageError } from "../errors.js";
import { buildRunnerImage } from "../image/build-runner-image.js";
import { runnerImageSpec } from "../image/runner-image.js";
import { RunRecorder } from "../record/run-record.js";
import type { RunDetails } from "../run/execute-run.js";
import { BUILT_IN_POLICIES, loadPolicy } from "../policy/load-policy.js";
import { resolveRun } from "../run/resolve-options.js";
import type { RunEvent } from "../run/run-events.js";
import type { CliIo } from "./cli-io.js";
import { runDoctor } from "./doctor.js";
import { EXIT, exitCodeFor } from "./exit-codes.js";
import { parseRunFlags, type RunFlags } from "./parse-run-args.js";
import { createLiveStatus } from "./live-status.js";
import { createProgressReporter } from "./progress-reporter.js";

interface RunCommandFlags extends RunFlags {
  image?: string;
  events?: string;
  json?: boolean;
  record?: string;
  quiet?: boolean;
  build?: boolean;
  dryRun?: boolean;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

export async function runCli(argv: string[], io: CliIo, signals?: NodeJS.EventEmitter): Promise<number> {
  let exitCode: number = EXIT.ok;
  const program = new Command()
    .name("sandbox-run")
    .description("Run the Pi coding agent in a disposable, hardened container")
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout(s), writeErr: (s) => io.stderr(s) })
    .showSuggestionAfterError()
    .version(versionLine(), "-V, --version", "print the versions of sandbox-run, its runner image's Pi and Node");

  program
    .argument("[prompt...]", "the task (read from stdin when omitted)")
    .option("--schema <file>", "JSON Schema file: print the validated JSON object instead of text")
    .option("--cwd <dir>", "workspace directory (default: the current directory)")
    .option("--sandbox <mode>", "read-only | workspace-write | danger-full-access (default workspace-write)")
    .option("--policy <name|file>", "a built-in policy name or a policy file, JSON or YAML (overrides --sandbox)")
    .option("--writable <dir>", "extra writable directory (repeatable)", collect)
    .option("--model <provider/id>", "model to use (or set SANDBOX_RUN_MODEL)")
    .option("--models <file>", "Pi models.json with custom providers (keys stay on the host)")
    .option("--env <KEY=VALUE>", "variable for the sandbox; KEY alone passes the host's value (repeatable)", collect)
    .option("--timeout <seconds>", "wall-clock limit for the run")
    .option("--runtime <runtime>", "container runtime: runc or runsc (gVisor)")
    .option("--image <tag>", "runner image to use, e.g. one from `image build --apt` (or set SANDBOX_RUN_IMAGE)")
    .option("--context-files", "load AGENTS.md/CLAUDE.md from the workspace (off by default: prompt injection)")
    .option("--max-turns <n>", "stop the run when the agent starts more turns than this")
    .option("--max-cost <usd>", "stop the run when the cost Pi reports passes this many US dollars")
    .option("--events <file>", "write the run's events (Pi's and the sandbox's) as JSONL while they arrive")
    .option("--json", "print one JSON result envelope on stdout (ok, result, error, usage, ...) instead of the bare result")
    .option("--record <dir>", "write a run record (policy, image, prompt, events, result, workspace patch) to this new folder")
    .option("--dry-run", "print the run plan (mounts, argv, env names, limits) and start nothing")
    .option("--no-build", "fail instead of building the runner image when it is missing")
    .option("-q, --quiet", "no progress on stderr")
    .action(async (promptParts: string[], flags: RunCommandFlags) => {
      exitCode = await runCommand(promptParts, flags, io, signals);
    });

  const image = program.command("image").description("manage the runner image");
  image
    .command("build")
    .description("build the runner image (Pi and Node pinned; offline base when no registry is reachable)")
    .option("--base <image>", "base image: auto, node:24-bookworm-slim, or any Debian bookworm image", "auto")
    .option("--apt <packages>", "also build an image with these Debian packages added (e.g. python3,make); prints its tag", collect)
    .action(async (flags: { base: string; apt?: string[] }) => {
      const { parseAptPackages, buildDerivedImage } = await import("../image/derived-image.js");
      const packages = flags.apt ? parseAptPackages(flags.apt) : undefined; // usage errors before any work
      const docker = createDockerClient();
      await pingDocker(docker);
      const progress = (l: string) => io.stderr(`${l}\n`);
      const runner = runnerImageSpec().tag;
      const present = await docker.getImage(runner).inspect().then(() => true, () => false);
      const built = present && packages ? { tag: runner } : await buildRunnerImage(docker, { base: flags.base, progress });
      if (!packages) return io.stdout(`${built.tag}\n`);
      const derived = await buildDerivedImage(docker, { aptPackages: packages, progress });
      io.stdout(`${derived.tag}\n`);
      io.stderr(`sandbox-run: run with --image ${derived.tag} (or SANDBOX_RUN_IMAGE=${derived.tag})\n`);
    });
  image
    .command("tag")
    .description("print the tag of the runner image this version uses")
    .action(() => io.stdout(`${runnerImageSpec().tag}\n`));
  image
    .command("prune")
    .description("remove runner images (and --apt images) of other sandbox-run versions; prints each removed tag")
    .action(async () => {
      const docker = createDockerClient();
      await pingDocker(docker);
      const { pruneRunnerImages } = await import("../image/prune-images.js");
      const current = runnerImageSpec().tag;
      const { removed, kept } = await pruneRunnerImages(docker, current);
      for (const tag of removed) io.stdout(`${tag}\n`);
      for (const { tag, reason } of kept) io.stderr(`sandbox-run: kept ${tag}: ${reason}\n`);
      io.stderr(`sandbox-run: removed ${removed.length} old runner image tag(s); kept ${current} (this version's)${kept.length ? ` and ${kept.length} in use` : ""}.\n`);
    });

  program
    .command("doctor")
    .description("check the Docker engine, the runner image, runtimes and provider credentials")
    .option("--model <provider/id>", "also check the credentials this model needs")
    .action(async (flags: { model?: string }) => {
      exitCode = await runDoctor(io, flags.model);
    });

  program
    .command("gc")
    .description("remove containers a dead controller left behind")
    .option("--all", "remove every sandbox-run container, even of live controllers")
    .action(async (flags: { all?: boolean }) => {
      const docker = createDockerClient();
      await pingDocker(docker);
      const reaped = await reapContainers(docker, { all: flags.all });
      for (const r of reaped) io.stderr(`removed ${r.id.slice(0, 12)} (run ${r.runId ?? "?"}): ${r.reason}\n`);
      const dirs = reapRunDirs();
      for (const dir of dirs) io.stderr(`removed ${dir} (its controller is gone)\n`);
      io.stderr(`${reaped.length} container(s) and ${dirs.length} run folder(s) removed\n`);
    });

  program
    .command("demo")
    .description("run the whole pipeline against a bundled scripted model (no provider key needed)")
    .option("--runtime <runtime>", "container runtime: runc or runsc (gVisor)")
    .option("--image <tag>", "runner image to use, e.g. one from `image build --apt` (or set SANDBOX_RUN_IMAGE)")
    .option("-q, --quiet", "no progress on stderr")
    .action(async (flags: { runtime?: string; quiet?: boolean }) => {
      const { runDemo } = await import("./demo.js");
      if (flags.runtime && flags.runtime !== "runc" && flags.runtime !== "runsc") throw usageError(`--runtime must be runc or runsc, not "${flags.runtime}".`);
      exitCode = await runDemo(io, { quiet: flags.quiet, runtime: flags.runtime as "runc" | "runsc" | undefined });
    });

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

  try {
    await program.parseAsync(argv, { from: "user" });
    return exitCode;
  } catch (error) {
    return reportError(error, io);
  }
}

async function runCommand(promptParts: string[], flags: RunCommandFlags, io: CliIo, signals?: NodeJS.EventEmitter): Promise<number> {
  let prompt = promptParts.join(" ");
  if (!prompt) prompt = (await io.readStdin()) ?? "";
  if (!prompt.trim()) throw usageError("No prompt given.", 'Pass it as an argument (sandbox-run "fix the tests") or on stdin.');
  const options = parseRunFlags(flags, io.env);
  const image = flags.image ?? (io.env.SANDBOX_RUN_IMAGE || undefined);

  if (flags.dryRun) {
    // Resolve exactly as a run would, then print the plan the run would follow.
    const { printDryRun } = await import("./dry-run.js");
    await printDryRun(prompt, options, io, image);
    return EXIT.ok;
  }

  const events = flags.events ? openEventsFile(flags.events) : undefined;
  const live = !flags.quiet && io.stderrIsTty ? createLiveStatus(io.stderr, { color: !io.env.NO_COLOR, columns: process.stderr.columns }) : undefined;
  const progress = flags.quiet ? undefined : (live?.onEvent ?? createProgressReporter((line) => io.stderr(`${line}\n`)));
  const recorder = flags.record ? startRecord(flags.record, prompt, options, io) : undefined;
  const onEvent = (event: RunEvent) => {
    events?.write(`${JSON.stringify(event)}\n`);
    recorder?.onEvent(event);
    progress?.(event);
  };

  const controller = new AbortController();
  let interruptedBy: "SIGINT" | "SIGTERM" | undefined;
  const onSignal = (name: "SIGINT" | "SIGTERM") => () => {
    interruptedBy ??= name;
    io.stderr(`\nsandbox-run: ${name} received, stopping the sandbox ...\n`);
    controller.abort(new SandboxRunError("aborted", `Interrupted by ${name}; the sandbox was stopped and removed.`));
  };
  const onInt = onSignal("SIGINT");
  const onTerm = onSignal("SIGTERM");
  signals?.on("SIGINT", onInt);
  signals?.on("SIGTERM", onTerm);

  const agent = new ContainerPiAgent({
    hostEnv: io.env,
    image,
    autoBuildImage: flags.build !== false,
    onProgress: flags.quiet ? undefined : (line) => io.stderr(`${line}\n`),
  });
  try {
    const details = await agent.runDetailed(prompt, { ...options, onEvent, onPlan: recorder?.onPlan, signal: controller.signal });
    const result = details.result;
    live?.stop();
    await recorder?.finish({ ok: true, result, meta: { ...details, result: undefined } });
    if (flags.json) io.stdout(`${JSON.stringify(envelope({ ok: true, details, exitCode: EXIT.ok }), null, 2)}\n`);
    else io.stdout(typeof result === "string" ? (result.endsWith("\n") ? result : `${result}\n`) : `${JSON.stringify(result, null, 2)}\n`);
    if (!flags.quiet) {
      const cost = details.usage.cost ? `, $${details.usage.cost.toFixed(4)}` : "";
      io.stderr(`sandbox-run: done in ${(details.durationMs / 1000).toFixed(2)}s, ${details.turns} turn(s), ${details.usage.totalTokens} tokens${cost}\n`);
    }
    return EXIT.ok;
  } catch (error) {
    live?.stop();
    const code = interruptedBy
      ? interruptedBy === "SIGTERM" ? EXIT.terminated : EXIT.interrupted
      : isSandboxRunError(error) ? exitCodeFor(error.code) : EXIT.agentFailed;
    if (recorder) {
      await recorder.finish({ ok: false, error: errorSummary(error), meta: { exitCode: code, runId: (error as SandboxRunError)?.runId, usage: (error as SandboxRunError)?.usage } });
    }
    if (flags.json) io.stdout(`${JSON.stringify(envelope({ ok: false, error, exitCode: code, model: options.model }), null, 2)}\n`);
    if (interruptedBy || flags.json) {
      reportError(error, io);
      return code;
    }
    throw error;
  } finally {
    signals?.off("SIGINT", onInt);
    signals?.off("SIGTERM", onTerm);
    if (events) await new Promise<void>((resolve) => events.end(resolve));
  }
}

function versionLine(): string {
  const own = JSON.parse(fs.readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
  const image = runnerImageSpec();
  return `sandbox-run ${own.version} (Pi ${image.piVersion}, Node ${image.nodeVersion} in ${image.tag})`;
}

/** Opens the --events file now, so a bad path is a usage error before anything starts. */
function openEventsFile(file: string): fs.WriteStream {
  let fd: number;
  try {
    fd = fs.openSync(file, "w");
  } catch (error) {
    throw usageError(`Cannot write the events file ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}.`, "Pass --events a path in a writable folder.");
  }
  const stream = fs.createWriteStream("", { fd });
  stream.on("error", () => {}); // a full disk must not crash the run; the file just ends early
  return stream;
}

function startRecord(dir: string, prompt: string, options: ReturnType<typeof parseRunFlags>, io: CliIo): RunRecorder {
  const resolved = resolveRun(prompt, {}, options, io.env);
  try {
    return new RunRecorder({ dir, prompt, schema: resolved.schema, policy: resolved.policy, workspace: resolved.cwd });
  } catch (error) {
    throw usageError(`Cannot write the run record: ${(error as Error).message}.`, "Pass --record a new or empty folder.");
  }
}

function errorSummary(error: unknown) {
  if (isSandboxRunError(error)) {
    return { code: error.code, message: error.shortMessage, hint: error.hint, limit: error.limit, exitCode: error.exitCode, stderrTail: error.stderrTail };
  }
  return { code: "internal", message: (error as Error)?.message ?? String(error) };
}

/** The --json result envelope: the same shape whether the run succeeded or not. */
function envelope(input: { ok: boolean; details?: RunDetails; error?: unknown; exitCode: number; model?: string }) {
  const d = input.details;
  const e = isSandboxRunError(input.error) ? input.error : undefined;
  return {
    ok: input.ok,
    result: d ? d.result : null,
    error: input.ok ? null : errorSummary(input.error),
    exitCode: input.exitCode,
    runId: d?.runId ?? e?.runId ?? null,
    usage: d?.usage ?? e?.usage ?? null,
    durationMs: d?.durationMs ?? e?.durationMs ?? null,
    model: d?.model ?? input.model ?? null,
    piVersion: d?.piVersion ?? null,
    image: d?.image ?? null,
    policy: d?.policy ?? null,
    changedFiles: (d as { changedFiles?: unknown } | undefined)?.changedFiles ?? null,
  };
}

function reportError(error: unknown, io: CliIo): number {
  const commanderCode = (error as { code?: string })?.code;
  if (typeof commanderCode === "string" && commanderCode.startsWith("commander.")) {
    // Commander already printed its message (or the help); map to our exit codes.
    const helpShown = commanderCode === "commander.helpDisplayed" || commanderCode === "commander.version" || commanderCode === "commander.help";
    return helpShown ? EXIT.ok : EXIT.usage;
  }
  if (isSandboxRunError(error)) {
    io.stderr(`sandbox-run: ${error.shortMessage}\n`);
    if (error.stderrTail && (error.code === "agent-crashed" || error.code === "limit")) {
      const tail = error.stderrTail.split("\n").slice(-15).join("\n");
      io.stderr(`--- last lines Pi wrote to stderr ---\n${tail}\n---\n`);
    }
    if (error.hint) io.stderr(`  ${error.hint}\n`);
    return exitCodeFor(error.code);
  }
  const message = (error as Error)?.message ?? String(error);
  io.stderr(`sandbox-run: unexpected error: ${message}\n`);
  io.stderr("  This is a bug in sandbox-run; set SANDBOX_RUN_DEBUG=1 for details and report it.\n");
  if (io.env.SANDBOX_RUN_DEBUG) io.stderr(`${(error as Error)?.stack ?? ""}\n`);
  return EXIT.agentFailed;
}

/** Exposed for --dry-run: resolve options exactly as a run would. */
export { resolveRun };
