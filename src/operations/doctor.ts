// `sandbox-run doctor` as a library operation: checks what a run needs, one by one, and says how to
// fix what is missing. Each finding goes to the caller's report (the CLI prints it); values of
// credentials are never reported.

import { randomBytes } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import https from "node:https";
import path from "node:path";
import type { AnswerLimits } from "../engine/answer-limits.js";
import type { Engine } from "../engine/engine.js";
import { ownPlatformOf } from "../engine/engine-kind.js";
import { missingLimits } from "../engine/engine-limits.js";
import { checkContainerStart } from "../engine/start-check.js";
import { isSandboxRunError } from "../errors.js";
import { configValueEnvNames, isCommandConfigValue, resolveConfigValue } from "../gateway/config-value.js";
import { configValuesOf, parseModelsJson } from "../gateway/models-json-schema.js";
import { planProviderRouting } from "../gateway/provider-routes.js";
import { runnerImageProblem } from "../image/ensure-runner-image.js";
import { runnerImageSpec } from "../image/runner-image.js";
import { loadPolicy } from "../policy/load-policy.js";
import type { Policy } from "../policy/policy-schema.js";
import { summarizeSecrets } from "../proxy/secret-bindings.js";
import {
  GATEWAY_PORT,
  HOST_CA_BUNDLE,
  IMAGE_LABEL_NODE_VERSION,
  IMAGE_LABEL_PI_VERSION,
  LABEL_MANAGED,
  LABEL_RUN_ID,
} from "../sandbox-contract.js";
import { readConfigJson } from "../util/config-file.js";
import { controllerContainer } from "../util/controller-container.js";
import type { RunnerPlatform } from "../util/platform.js";
import { untilAborted } from "../util/until-aborted.js";
import {
  checkControllerHost,
  checkPerUserLimits,
  checkPlatformImages,
  describeEngineKind,
} from "./doctor-platforms.js";
import { chosenEnginePool, pingWithin } from "./engine-choice.js";

/** Where doctor's findings go, as they are made. */
export interface DoctorReport {
  /** A check that passed. */
  ok(what: string): void;
  /** A check that failed, and how to fix it. */
  bad(what: string, fix: string): void;
  /** Worth knowing, not a failure; with advice when there is some. */
  note(what: string, advice?: string): void;
  /** The findings that follow are of this engine (said when there are several, or it is not the local one). */
  engine?(name: string, address: string | undefined): void;
}

export interface DoctorOptions {
  /** An engines file: check each of its engines (default: SANDBOX_RUN_ENGINES, else DOCKER_HOST's engine). */
  engines?: string;
  /** The host environment (default process.env): provider keys, SANDBOX_RUN_IMAGE, the engines file. */
  env?: Record<string, string | undefined>;
  /** The platform runs will ask for (default: each engine's own). */
  platform?: RunnerPlatform;
  /** Also check the credentials this model needs. */
  model?: string;
  /** Also check this Pi models.json's custom providers (reachable from the host, keys resolvable). */
  models?: string;
  /** Also check the secrets this policy gives its runs. */
  policy?: string;
  report: DoctorReport;
  /**
   * Stops the checks (the CLI's Ctrl-C): a container a check started is removed first, then doctor
   * rejects with the signal's reason.
   */
  signal?: AbortSignal;
  /** @internal What each engine request may take (tests make the deadline short). */
  answers?: AnswerLimits;
}

/** Runs every check; `ok` is false when one failed (the report says which and how to fix it). */
export async function doctor(options: DoctorOptions): Promise<{ ok: boolean }> {
  const env = options.env ?? process.env;
  const pool = chosenEnginePool(options.engines, env, options.answers);
  try {
    return await checkAll(pool.engines, env, options);
  } finally {
    pool.close();
  }
}

async function checkAll(
  engines: readonly Engine[],
  env: Record<string, string | undefined>,
  options: DoctorOptions,
): Promise<{ ok: boolean }> {
  const { model, models, policy: policyName, platform, signal } = options;
  let failed = false;
  const { ok, note } = options.report;
  const bad = (what: string, fix: string) => {
    failed = true;
    options.report.bad(what, fix);
  };
  const report = { ok, bad, note };
  checkControllerHost(report);
  checkPerUserLimits(report);

  // Which engines hold the image runs use: an engine without it loads it from one of these.
  const chosen = env.SANDBOX_RUN_IMAGE || runnerImageSpec(platform).tag;
  const holders: string[] = [];
  for (const engine of engines) {
    signal?.throwIfAborted();
    if (engines.length > 1 || engine.name !== "local") options.report.engine?.(engine.name, engine.address);
    try {
      if (await checkEngine(engine, chosen, engines.length > 1, report, platform, signal)) holders.push(engine.name);
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      bad(
        isSandboxRunError(error) ? error.shortMessage : String(error),
        isSandboxRunError(error) ? (error.hint ?? "") : "",
      );
    }
  }
  if (engines.length > 1) {
    if (holders.length > 0)
      ok(`runner image ${chosen} is on ${holders.join(", ")}; the others load it from there on first use`);
    else
      bad(
        `no engine has the runner image ${chosen}`,
        "Build it on one of them (`sandbox-run image build`); runs load it onto the others.",
      );
  }

  for (const name of ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]) {
    const provider = name.startsWith("ANTHROPIC") ? "anthropic" : "openai";
    if (env[name]) ok(`${name} is set on the host (it stays there; the sandbox sees a placeholder)`);
    // With --model of that provider, the model's own check below says what is missing.
    else if (!model?.startsWith(`${provider}/`)) note(`${name} is not set (needed only for ${provider}/* models)`);
  }
  let modelsJson: unknown;
  let unresolved: ReadonlySet<string> = new Set();
  signal?.throwIfAborted();
  if (models) ({ value: modelsJson, unresolved } = await checkModelsFile(models, env, report, signal));
  if (model) {
    try {
      planProviderRouting({ model, modelsJson, env, gatewayBaseUrl: `http://127.0.0.1:${GATEWAY_PORT}` });
      ok(`credentials for ${model} are available`);
    } catch (error) {
      const message = isSandboxRunError(error) ? error.shortMessage : String(error);
      // A value of the models file already reported as failing above: one failure, one line.
      if (![...unresolved].some((where) => message.includes(where)))
        bad(message, isSandboxRunError(error) ? (error.hint ?? "") : "");
    }
  }
  signal?.throwIfAborted();
  if (policyName) checkPolicySecrets(policyName, env, report);
  if (fs.existsSync(HOST_CA_BUNDLE))
    ok("host CA bundle found (used for upstream HTTPS and by policies with trustHostCaBundle)");
  return { ok: !failed };
}

type Report = Omit<DoctorReport, "engine">;

/** One engine: ping, runtimes, seccomp, the image, and a container that starts. True when it holds the image. */
async function checkEngine(
  engine: Engine,
  chosen: string,
  pooled: boolean,
  { ok, bad, note }: Report,
  platform?: RunnerPlatform,
  signal?: AbortSignal,
) {
  await untilAborted(pingWithin(engine), signal);
  const info = await untilAborted(engine.info(signal), signal);
  ok(`engine ${info.version} (API ${info.apiVersion}${info.cgroupVersion ? `, cgroup v${info.cgroupVersion}` : ""})`);
  describeEngineKind(info, { ok, note });
  if (!engine.sharesHostFilesystem) note("on another machine: runs here copy the workspace in and out (copy mode)");
  else {
    const container = controllerContainer();
    if (container)
      note(
        `sandbox-run runs in a container (${container}): this engine mounts folders of its own host, so runs copy the workspace in and out (copy mode) unless --workspace bind is given`,
        "Give --workspace bind only where the workspace and TMPDIR are mounted into this container at the same paths they have on the engine's host.",
      );
  }
  const runsc = runscCheck(info.runtimes);
  if (runsc.level === "ok") ok(runsc.message);
  else note(runsc.message, runsc.fix);
  const unenforced = info.limits ? missingLimits(info.limits, false) : [];
  if (unenforced.length > 0)
    bad(
      `the engine cannot enforce the sandbox's ${unenforced.join(", ")} limits (runs there are refused: it would drop them)`,
      "Enable those cgroup controllers on the engine's host (for memory on some kernels: cgroup_enable=memory on the kernel command line), or use another engine.",
    );
  else if (info.limits) ok("the engine enforces the sandbox's memory and pids limits");
  if (info.limits && !info.limits.swap)
    note(
      "the engine has no swap accounting: a sandbox's memory past limits.memoryMb may go to the host's swap",
      "On cgroup v1, boot the host with swapaccount=1 (or use cgroup v2).",
    );
  if (info.limits && !info.limits.cpu)
    note("the engine cannot enforce CPU limits: runs whose policy sets limits.cpus are refused there");
  if (info.securityOptions.some((o) => o.includes("seccomp"))) ok("seccomp is enabled in the engine");
  else bad("seccomp is not enabled in the engine", "Use an engine built with seccomp support.");
  await untilAborted(checkPlatformImages(engine, info, { ok, note }), signal);
  const spec = runnerImageSpec(platform);
  // SANDBOX_RUN_PLATFORM another than the engine's own: its containers start under emulation (runc only).
  const emulated = platform !== undefined && platform !== ownPlatformOf(info);
  const labels = await untilAborted(engine.imageLabels(chosen, signal), signal);
  const problem = labels && runnerImageProblem(chosen, labels);
  if (!labels) {
    // In a pool, another engine may hold it (judged once all are checked).
    if (pooled) note(`runner image ${chosen} is not on this engine`);
    else
      bad(
        `runner image ${chosen} is not built`,
        chosen === spec.tag
          ? `Run \`sandbox-run image build${platform ? ` --platform ${platform}` : ""}\` (or let the first run build it).`
          : "Build it, or unset SANDBOX_RUN_IMAGE.",
      );
    return false;
  }
  if (problem) {
    bad(problem.shortMessage, problem.hint ?? "");
    return false;
  }
  ok(`runner image ${chosen} (Pi ${labels[IMAGE_LABEL_PI_VERSION]}, Node ${labels[IMAGE_LABEL_NODE_VERSION] ?? "?"})`);
  // Registered is not the same as working: start a container that only runs `true`.
  for (const runtime of runsc.level === "ok" && !emulated ? ["runc", "runsc"] : ["runc"]) {
    const check = await containerStartCheck(engine, chosen, runtime, platform, signal);
    if (check.ok) ok(`a hardened container starts and exits on ${runtime} (${check.seconds.toFixed(2)} s)`);
    else if (runtime === "runc")
      bad(
        `containers do not start on runc: ${check.reason}`,
        "See the engine's log (journalctl -u docker, or /var/log/dockerd.log).",
      );
    else
      note(
        `--runtime runsc will fail: ${check.reason}`,
        "Check `runsc --version` and the runsc runtimeArgs in /etc/docker/daemon.json (a --platform that does not work on this machine hangs).",
      );
  }
  return true;
}

/**
 * checkContainerStart, stopped by `signal` without leaving its container behind: the check's
 * container (found by the run id it is given here) is removed at once, so a hung `true` ends, then
 * again once the check has let go of it, in case it was made only after the first removal.
 */
async function containerStartCheck(
  engine: Engine,
  image: string,
  runtime: string,
  platform: RunnerPlatform | undefined,
  signal: AbortSignal | undefined,
): Promise<Awaited<ReturnType<typeof checkContainerStart>>> {
  signal?.throwIfAborted();
  // A run id of this check's own: what an abort removes is this container and nothing else (review,
  // session 27: by owner pid and host it also removed this process's runs and warm sandboxes, and
  // another controller's whose pid and host name were the same in its own namespace).
  const runId = `doctor-${runtime}-${randomBytes(6).toString("hex")}`;
  const check = checkContainerStart(engine, image, runtime, undefined, platform, runId);
  if (!signal) return check;
  try {
    return await untilAborted(check, signal);
  } catch (error) {
    if (!signal.aborted) throw error;
    await removeCheckContainer(engine, runId);
    await check.catch(() => {});
    await removeCheckContainer(engine, runId);
    throw signal.reason;
  }
}

/** Removes the start check's container (by its run id label); best effort. */
async function removeCheckContainer(engine: Engine, runId: string): Promise<void> {
  try {
    const own = await engine.listContainers([`${LABEL_MANAGED}=true`, `${LABEL_RUN_ID}=${runId}`]);
    await Promise.all(own.map((c) => engine.removeContainer(c.id).catch(() => {})));
  } catch {
    // The engine gone: the container carries its owner's labels, and `sandbox-run gc` removes it.
  }
}

const REACH_TIMEOUT_MS = 5_000;

/**
 * A models.json's custom providers: each baseUrl answers from this host (where the gateway calls it
 * from; any HTTP status counts, no key is sent), and each key source resolves (a variable is set, a
 * command prints something). Values are never printed. Like a run, doctor runs no `!command` of a
 * models file inside the current directory (a run's workspace by default). Returns the parsed file.
 */
/** The file's parsed value, and where its values that do not resolve are (`providers.acme.apiKey`). */
async function checkModelsFile(
  file: string,
  env: Record<string, string | undefined>,
  say: Report,
  signal?: AbortSignal,
): Promise<{ value: unknown; unresolved: ReadonlySet<string> }> {
  const unresolved = new Set<string>();
  let value: unknown;
  let providers: ReturnType<typeof parseModelsJson>;
  try {
    value = readConfigJson(file, "models", "Pass the path of a Pi models.json file.");
    providers = parseModelsJson(value);
  } catch (error) {
    say.bad(
      isSandboxRunError(error) ? error.shortMessage : String(error),
      isSandboxRunError(error) ? (error.hint ?? "") : "",
    );
    return { value: undefined, unresolved };
  }
  const insideCwd = isInside(file, process.cwd());
  const custom = Object.entries(providers).filter(([, p]) => p.baseUrl !== undefined);
  if (custom.length === 0) say.note(`${file} defines no custom provider (no baseUrl)`);
  for (const [id, provider] of custom) {
    const baseUrl = provider.baseUrl!;
    const reached = await untilAborted(reach(baseUrl), signal);
    if (reached.ok) say.ok(`provider ${id}: ${baseUrl} answers from this host (HTTP ${reached.status})`);
    else
      say.bad(
        `provider ${id}: ${baseUrl} does not answer from this host (${reached.reason})`,
        "Start the model server or fix baseUrl; the model gateway calls it from this host, never from the sandbox.",
      );
    const values = configValuesOf({ [id]: provider });
    if (!values.some((v) => v.where.endsWith(".apiKey")))
      say.note(
        `provider ${id}: no apiKey (Pi needs one for a custom provider; a placeholder works for a server that takes none)`,
      );
    for (const { where, value: config } of values) {
      const names = configValueEnvNames(config);
      const source = isCommandConfigValue(config)
        ? "a command"
        : names.length > 0
          ? names.map((name) => `$${name}`).join(", ")
          : "a literal in the file";
      if (isCommandConfigValue(config) && insideCwd) {
        say.bad(
          `${where} comes from a command, and ${file} lies inside the current directory: runs here refuse it and doctor does not run it`,
          "Keep the models file outside the workspace, or use $VARIABLE references instead of commands.",
        );
        unresolved.add(where);
        continue;
      }
      const resolved = resolveConfigValue(config, { env, runCommands: true });
      if (resolved.ok) say.ok(`${where} resolves (from ${source}; the value stays on the host and is not shown)`);
      else {
        say.bad(`${where} does not resolve: ${resolved.reason}`, "Set the variable on the host, or fix the command.");
        unresolved.add(where);
      }
    }
  }
  return { value, unresolved };
}

function isInside(file: string, dir: string): boolean {
  const real = (p: string) => {
    try {
      return fs.realpathSync(p);
    } catch {
      return path.resolve(p);
    }
  };
  const relative = path.relative(real(dir), real(file));
  return !relative.startsWith("..") && !path.isAbsolute(relative);
}

/** One GET of the URL without credentials: any HTTP answer means the server is there. */
function reach(url: string): Promise<{ ok: true; status: number } | { ok: false; reason: string }> {
  return new Promise((resolve) => {
    const client = url.startsWith("https:") ? https : http;
    const request = client.get(url, { timeout: REACH_TIMEOUT_MS }, (response) => {
      response.resume();
      resolve({ ok: true, status: response.statusCode ?? 0 });
      request.destroy();
    });
    request.on("timeout", () =>
      request.destroy(Object.assign(new Error("timeout"), { code: `no answer within ${REACH_TIMEOUT_MS / 1000} s` })),
    );
    request.on("error", (error: NodeJS.ErrnoException) => resolve({ ok: false, reason: error.code ?? error.message }));
  });
}

/** The secrets a policy gives its runs: by name, hosts and source, and whether each is set; never a value. */
function checkPolicySecrets(policyName: string, env: Record<string, string | undefined>, say: Report): void {
  let policy: Policy;
  try {
    policy = loadPolicy(policyName);
  } catch (error) {
    say.bad(
      isSandboxRunError(error) ? error.shortMessage : String(error),
      isSandboxRunError(error) ? (error.hint ?? "") : "",
    );
    return;
  }
  const secrets = summarizeSecrets(policy.secrets, env);
  if (secrets.length === 0) say.note(`policy ${policy.name} gives its runs no secrets`);
  for (const s of secrets) {
    const what = `secret ${s.name} for ${s.hosts.join(", ")} (${s.inject.join(", ")}), from the ${s.source}`;
    if (s.problem) say.bad(`${what}: ${s.problem}`, "Set it on the host; the sandbox only ever sees a placeholder.");
    else say.ok(`${what}: set (the sandbox gets a placeholder; the egress proxy adds the value for these hosts)`);
  }
}

interface RuntimeInfo {
  path?: string;
  runtimeArgs?: string[];
}

/** The runtime arguments sandbox-run registers runsc with (scripts/setup-host.sh). */
export const RUNSC_ARGS = ["--network=none", "--host-uds=open", "--oci-seccomp"];
const RUNSC_REGISTRATION = JSON.stringify({ runtimes: { runsc: { path: "/usr/bin/runsc", runtimeArgs: RUNSC_ARGS } } });

/**
 * Whether gVisor is registered the way sandbox-run needs it: the sandbox reaches the model gateway
 * (and the egress proxy) through host unix sockets bind-mounted in, which gVisor only allows with
 * --host-uds=open (or all); --network=none keeps gVisor's own network stack off; --oci-seccomp makes
 * gVisor apply Docker's seccomp profile inside the sandbox, which it ignores otherwise.
 */
export function runscCheck(runtimes: Record<string, RuntimeInfo>): {
  level: "ok" | "note";
  message: string;
  fix?: string;
} {
  const runsc = runtimes.runsc;
  const register = `apt-get install runsc (Debian/Ubuntu), add ${RUNSC_REGISTRATION} to /etc/docker/daemon.json and restart dockerd (scripts/setup-host.sh does this)`;
  if (!runsc) {
    return {
      level: "note",
      message: "gVisor (runsc) is not registered: --runtime runsc is unavailable",
      fix: `For a stronger boundary: ${register}.`,
    };
  }
  const args = runsc.runtimeArgs ?? [];
  const fix = `Set "runtimeArgs": ${JSON.stringify(RUNSC_ARGS)} for runsc in /etc/docker/daemon.json and restart dockerd (scripts/setup-host.sh does this).`;
  if (!args.some((a) => /^--host-uds=(open|all)$/.test(a))) {
    return {
      level: "note",
      message: `gVisor (runsc) is registered without --host-uds=open (args: ${args.join(" ") || "none"}): runs with --runtime runsc cannot reach the model gateway and will fail`,
      fix,
    };
  }
  if (!args.some((a) => /^--oci-seccomp(=true)?$/.test(a))) {
    return {
      level: "note",
      message: `gVisor (runsc) is registered without --oci-seccomp (args: ${args.join(" ")}): runs on runsc get no seccomp filter inside the sandbox`,
      fix,
    };
  }
  return { level: "ok", message: `gVisor runtime runsc is registered (${runsc.path ?? "runsc"} ${args.join(" ")})` };
}
