// `npm run bench`: the price of the boundary, measured side by side on this machine.
//   1. per call: Pi on the host vs ContainerPiAgent on runc / runsc vs the plain `docker run`
//      recipe, interleaved, plus the floor of any container call;
//   2. concurrency: 1, 4 and 8 calls at once;
//   3. streaming: event delivery delay, and JSONL parsing throughput on 200 MB;
//   4. engines: bind mode, local copy mode and remote (TLS) copy mode, 10 and 20,000 files;
//   5. copy: copy mode vs bind mode per call (10 files; 20,000 files / 200 MB, copy in and out
//      timed apart), and a gateway round trip through the relay vs the bind-mounted socket;
//   6. replay: a CLI call live, live with --record, and replayed from a record;
//   7. emulation: the per-call task on the other platform's image under qemu vs the engine's own
//      (a ratio), and both images' sizes (builds the other image when missing: about 10 minutes);
//   8. cli-start: the CLI's start-up CPU against a bare Node (no engine needed);
//   9. warm: host Pi, cold and warm calls on runc and runsc interleaved, claim latency with 8 at
//      once, pool refill, and `batch` against separate cold CLI calls (bench/warm.ts).
// Prints tables and writes bench/results.json. Options: --runs=N (default 12), --only=per-call,
// floor,concurrency,streaming,parser,engines,copy,replay,emulation,cli-start,warm (default all),
// --emulation-runs=N (default 5), --image=TAG (default: the runner
// image), --remote=<engines file> (the engines section's remote engine; default: a second local
// dockerd in its own namespaces, see tests/support/second-engine.ts), --large-runs=N (rounds on the
// 200 MB workspace, default 3).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { ContainerPiAgent } from "../src/container-pi-agent.js";
import { createDockerClient, type DockerClient } from "../src/engine/docker-connection.js";
import { DockerEngine } from "../src/engine/docker-engine.js";
import { buildRunnerImage } from "../src/image/build-runner-image.js";
import { runnerImageSpec } from "../src/image/runner-image.js";
import { type ScriptedModelServer, startScriptedModelServer } from "../src/scripted-model/scripted-model-server.js";
import { benchScripts, writePiHome } from "./bench-task.js";
import { runCliStartSection } from "./cli-start.js";
import { type ConcurrencyResult, ownContainers, runConcurrency, vmHwmMb } from "./concurrency.js";
import { fillWorkspace, gatewayRoundTrip, type RoundTrip, workspaceVariant } from "./copy-mode.js";
import { BENCH_LABEL, dockerRunTrue } from "./docker-recipe.js";
import { runEmulationSection } from "./emulation.js";
import { hardenedEngineTrue, hardenedTrueOptions, plainEngineTrue } from "./engine-floor.js";
import { engineTargets, runEnginesSection } from "./engines.js";
import { findHostPi } from "./host-pi.js";
import { interleave, type VariantResult } from "./interleave.js";
import { type ParserResult, runParserBench } from "./parser-throughput.js";
import { runReplaySection } from "./replay.js";
import { round, seconds, table } from "./stats.js";
import { type DelayResult, hostDelay, sandboxDelay } from "./streaming.js";
import { hostVariant, recipeVariant, Scratch, sandboxAgent, sandboxVariant, type Variant } from "./variants.js";
import { runWarmSection, warmTargetLines } from "./warm.js";

const SECTIONS = [
  "per-call",
  "floor",
  "concurrency",
  "streaming",
  "parser",
  "engines",
  "copy",
  "replay",
  "emulation",
  "cli-start",
  "warm",
] as const;
const TARGETS = {
  runcOverheadMs: 200,
  runscOverheadMs: 400,
  eventDelayMs: 50,
  parserMbPerSecond: 200,
  peakRssMb: 250,
  copyOverBindMs: 50,
};

const args = process.argv.slice(2);
const option = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.split("=")[1];
const RUNS = Math.max(1, Number(option("runs") ?? 12));
const LARGE_RUNS = Math.max(1, Number(option("large-runs") ?? 3));
const only = new Set((option("only") ?? SECTIONS.join(",")).split(","));
const progress = (line: string) => process.stderr.write(`${line}\n`);

async function machine(docker: DockerClient) {
  const version = await docker.version();
  const info = (await docker.info()) as { Runtimes?: Record<string, unknown>; Driver?: string; CgroupVersion?: string };
  return {
    date: new Date().toISOString(),
    nproc: os.availableParallelism(),
    cpu: os.cpus()[0]?.model ?? "unknown",
    memoryGb: round(os.totalmem() / 1024 ** 3, 1),
    kernel: `${os.type()} ${os.release()}`,
    docker: `${version.Version} (API ${version.ApiVersion})`,
    storageDriver: info.Driver,
    cgroupVersion: info.CgroupVersion,
    runtimes: Object.keys(info.Runtimes ?? {}),
    controllerNode: process.version,
    // Other work on the machine shows up as spread (p90); recorded so a run can be judged.
    loadAverageAtStart: os.loadavg().map((l) => round(l, 2)),
  };
}

/** Where containers on the default bridge reach the host: the bridge's gateway address. */
async function bridgeGateway(docker: DockerClient): Promise<string | undefined> {
  try {
    const bridge = (await docker.getNetwork("bridge").inspect()) as {
      IPAM?: { Config?: Array<{ Gateway?: string; Subnet?: string }> };
    };
    const config = bridge.IPAM?.Config?.find((c) => c.Gateway || c.Subnet?.includes("."));
    if (config?.Gateway) return config.Gateway;
    // The engine often leaves Gateway out; by default it is the subnet's first address (the
    // docker0 interface's own, which stays assigned even while no container is attached).
    const match = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(config?.Subnet ?? "");
    if (!match) return undefined;
    const [a, b, c, d, bits] = match.slice(1).map(Number) as [number, number, number, number, number];
    const network = ((a << 24) | (b << 16) | (c << 8) | d) & (bits === 0 ? 0 : ~0 << (32 - bits));
    const first = (network + 1) >>> 0;
    return [first >>> 24, (first >>> 16) & 255, (first >>> 8) & 255, first & 255].join(".");
  } catch {
    return undefined;
  }
}

async function ensureImage(engine: DockerEngine): Promise<string> {
  const tag = runnerImageSpec().tag;
  if (!(await engine.imageLabels(tag))) {
    progress(`Runner image ${tag} is missing; building it ...`);
    await buildRunnerImage(engine, { progress });
  }
  return tag;
}

/** The sections that need no engine, alone: `--only=cli-start`. */
async function mainWithoutEngine() {
  const scratch = new Scratch();
  const results: Record<string, unknown> = {
    machine: {
      date: new Date().toISOString(),
      nproc: os.availableParallelism(),
      cpu: os.cpus()[0]?.model ?? "unknown",
      controllerNode: process.version,
      loadAverageAtStart: os.loadavg().map((l) => round(l, 2)),
    },
  };
  try {
    const section = await runCliStartSection({ runs: option("runs") ? RUNS : 10, scratch, progress });
    results.cliStart = section.results;
    results.loadAverageAtEnd = os.loadavg().map((l) => round(l, 2));
    const lines = section.targets.map((t) => `  ${t.ok ? "met " : "MISS"} ${t.text}`);
    const file = path.join(path.dirname(fileURLToPath(import.meta.url)), "results.json");
    fs.writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
    console.log(
      `\n${section.text}\n\nload average (1/5/15 min) at start ${(results.machine as { loadAverageAtStart: number[] }).loadAverageAtStart.join(" / ")}, at end ${(results.loadAverageAtEnd as number[]).join(" / ")}\n\ntargets:\n${lines.join("\n")}\n\nWrote ${path.relative(process.cwd(), file)}`,
    );
    if (section.targets.some((t) => !t.ok)) process.exitCode = 1;
  } finally {
    scratch.cleanup();
  }
}

async function main() {
  if ([...only].every((section) => section === "cli-start")) return mainWithoutEngine();
  const docker = createDockerClient();
  const engine = new DockerEngine(docker);
  await engine.ping();
  const image = option("image") ?? (await ensureImage(engine));
  const info = await machine(docker);
  const hasRunsc = info.runtimes.includes("runsc");
  const gateway = await bridgeGateway(docker);
  const hostPi = await findHostPi(progress);
  // One scripted server for every variant: on the bridge's gateway address (host-local), so
  // the plain `docker run` container reaches it too; the host and the gateway connect there.
  const server = await startScriptedModelServer({ scripts: benchScripts(), host: gateway ?? "127.0.0.1", port: 0 });
  const scratch = new Scratch();
  const results: Record<string, unknown> = {
    machine: { ...info, image, piNode: hostPi.node },
    runs: RUNS,
    targets: TARGETS,
  };
  const out: string[] = [];
  const benchStarted = performance.now();

  const runc = sandboxAgent(server.baseUrl, "runc", image);
  const runsc = hasRunsc ? sandboxAgent(server.baseUrl, "runsc", image) : undefined;

  try {
    if (only.has("per-call")) {
      progress(`Per call: ${RUNS} interleaved rounds after 2 warm-up rounds ...`);
      const variants: Variant[] = [
        hostVariant(hostPi, server.baseUrl, scratch),
        sandboxVariant("runc", "ContainerPiAgent.run(), runc", runc, scratch),
        ...(runsc ? [sandboxVariant("runsc", "ContainerPiAgent.run(), runsc (gVisor)", runsc, scratch)] : []),
        ...(gateway ? [recipeVariant(image, server.baseUrl, scratch)] : []),
      ];
      const perCall = await interleave(variants, { warmup: 2, runs: RUNS, progress });
      const host = perCall.find((r) => r.key === "host")!;
      results.perCall = perCall.map((r) => ({
        ...r,
        ratioToHost: round(r.medianMs / host.medianMs, 2),
        overheadMs: round(r.medianMs - host.medianMs),
      }));
      out.push(perCallTable(perCall, host), "", phaseTable(perCall));
    }

    if (only.has("floor")) {
      progress(`Floor: ${RUNS} interleaved rounds ...`);
      const runDir = scratch.dir("floor-run");
      const hardened = hardenedTrueOptions(image, scratch.dir("floor-ws"), runDir);
      const variants: Variant[] = [
        {
          key: "docker-run-true",
          label: "`docker run --rm <image> true` (CLI)",
          run: async () => ({ ms: await dockerRunTrue(image) }),
        },
        {
          key: "engine-plain",
          label: "Engine API: create/attach/start/wait/remove, default options (bridge network)",
          run: async () => ({ ms: await plainEngineTrue(docker, image) }),
        },
        {
          key: "engine-plain-no-network",
          label: "Engine API, default options but --network none",
          run: async () => ({ ms: await plainEngineTrue(docker, image, "none") }),
        },
        {
          key: "engine-hardened-runc",
          label: "Engine API, sandbox-run's hardened options, runc",
          run: async () => ({ ms: await hardenedEngineTrue(engine, hardened) }),
        },
        ...(hasRunsc
          ? [
              {
                key: "engine-hardened-runsc",
                label: "Engine API, sandbox-run's hardened options, runsc",
                run: async () => ({
                  ms: await hardenedEngineTrue(engine, { ...hardened, runtime: "runsc" }),
                }),
              },
            ]
          : []),
      ];
      const floor = await interleave(variants, { warmup: 1, runs: RUNS, progress });
      results.floor = floor;
      out.push(
        "",
        table(
          ["floor: a container that runs `true`", "runs", "median s", "p90 s", "failures"],
          floor.map((r) => [r.label, r.runs, seconds(r.medianMs), seconds(r.p90Ms), r.failures]),
        ),
      );
    }

    if (only.has("concurrency")) {
      const levels: ConcurrencyResult[] = [];
      for (const [concurrency, calls] of [
        [1, 8],
        [4, 16],
        [8, 24],
      ] as const) {
        progress(`Concurrency ${concurrency}: ${calls} calls ...`);
        levels.push(await runConcurrency(runc, docker, scratch, concurrency, calls));
      }
      results.concurrency = { levels, vmHwmMb: vmHwmMb() };
      out.push(
        "",
        table(
          [
            "concurrent calls (runc)",
            "calls",
            "calls/s",
            "median s",
            "p90 s",
            "controller peak RSS MB",
            "failures",
            "containers left",
          ],
          levels.map((l) => [
            l.concurrency,
            l.calls,
            l.callsPerSecond,
            seconds(l.medianLatencyMs),
            seconds(l.p90LatencyMs),
            l.peakRssMb,
            l.failures,
            l.containersLeft,
          ]),
        ),
      );
    }

    if (only.has("streaming")) {
      progress("Streaming: event delivery delay ...");
      const home = writePiHome(scratch.dir("stream-home"), server.baseUrl, hostPi.finalToolModule);
      const delays: DelayResult[] = [await hostDelay(hostPi, home, scratch.dir("stream-ws"), 3)];
      delays.push(await sandboxDelay("runc", runc, scratch.dir("stream-ws"), 3));
      if (runsc) delays.push(await sandboxDelay("runsc", runsc, scratch.dir("stream-ws"), 3));
      results.eventDelay = delays;
      out.push(
        "",
        table(
          ["event delay: bash line printed -> onEvent", "runs", "samples", "median ms", "p90 ms", "max ms", "failures"],
          delays.map((d) => [d.key, d.runs, d.samples, d.medianMs, d.p90Ms, d.maxMs, d.failures]),
        ),
      );
    }

    if (only.has("parser")) {
      progress("Parser: 200 MB of JSONL in a child process ...");
      const parser: ParserResult = await runParserBench(200);
      results.parser = parser;
      out.push(
        "",
        table(
          [
            "JSONL parsing (JsonlReader + parsePiRecord)",
            "MB",
            "MB/s",
            "records",
            "RSS before / at 10% / end / peak MB",
            "heap peak MB",
          ],
          [
            [
              "64 KiB chunks",
              parser.streamMb,
              parser.mbPerSecond,
              parser.records,
              `${parser.rssBeforeMb} / ${parser.rssAt10PercentMb} / ${parser.rssAtEndMb} / ${parser.rssPeakMb}`,
              parser.heapPeakMb,
            ],
          ],
        ),
      );
    }

    if (only.has("engines")) {
      const engines = await runEnginesSection({
        local: engine,
        baseUrl: server.baseUrl,
        image,
        runs: RUNS,
        scratch,
        progress,
        enginesFile: option("remote"),
      });
      results.engines = engines.results;
      out.push("", engines.text);
    }

    if (only.has("copy")) await copySection(runc, server, scratch, results, out);

    if (only.has("emulation")) {
      const runs = Math.max(1, Number(option("emulation-runs") ?? 5));
      const emulation = await runEmulationSection({ engine, baseUrl: server.baseUrl, runs, scratch, progress });
      results.emulation = emulation.results;
      out.push("", emulation.text);
    }

    if (only.has("replay")) {
      const replay = await runReplaySection({ baseUrl: server.baseUrl, image, runs: RUNS, scratch, progress });
      results.replay = replay.results;
      out.push("", replay.text);
    }

    if (only.has("cli-start")) {
      const cliStart = await runCliStartSection({ runs: option("runs") ? RUNS : 10, scratch, progress });
      results.cliStart = cliStart.results;
      results.cliStartTargets = cliStart.targets;
      out.push("", cliStart.text);
    }

    if (only.has("warm")) {
      const warm = await runWarmSection({
        hostPi,
        baseUrl: server.baseUrl,
        image,
        runs: RUNS,
        runtimes: hasRunsc ? ["runc", "runsc"] : ["runc"],
        scratch,
        progress,
      });
      results.warm = warm.results;
      out.push("", warm.text);
    }
  } finally {
    await server.close();
    scratch.cleanup();
  }

  const left = await ownContainers(docker);
  const benchLeft = (await docker.listContainers({ all: true, filters: { label: [BENCH_LABEL] } })).length;
  results.containersLeft = { sandboxRun: left, dockerRunAndFloor: benchLeft };
  results.benchSeconds = round((performance.now() - benchStarted) / 1000);
  results.loadAverageAtEnd = os.loadavg().map((l) => round(l, 2));
  out.push(
    "",
    `containers left: ${left} (sandbox-run) + ${benchLeft} (docker run / floor); whole benchmark ${results.benchSeconds} s`,
  );
  out.push(
    `load average (1/5/15 min) at start ${info.loadAverageAtStart.join(" / ")}, at end ${(results.loadAverageAtEnd as number[]).join(" / ")}`,
  );
  out.push(...targetLines(results));

  const file = path.join(path.dirname(fileURLToPath(import.meta.url)), "results.json");
  fs.writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  console.log(`\n${out.join("\n")}\n\nWrote ${path.relative(process.cwd(), file)}`);
  const warmResults = results.warm as { perCall?: VariantResult[]; batch?: { variants: VariantResult[] } } | undefined;
  const failures =
    [
      results.perCall,
      results.floor,
      (results.copyMode as { perCall?: VariantResult[] } | undefined)?.perCall,
      warmResults?.perCall,
      warmResults?.batch?.variants,
    ]
      .flatMap((list) => (list as VariantResult[] | undefined) ?? [])
      .reduce((n, r) => n + r.failures, 0) +
    ((results.concurrency as { levels: ConcurrencyResult[] } | undefined)?.levels ?? []).reduce(
      (n, l) => n + l.failures,
      0,
    );
  if (failures > 0 || left > 0 || benchLeft > 0) process.exitCode = 1;
}

async function copySection(
  runc: ContainerPiAgent,
  server: ScriptedModelServer,
  scratch: Scratch,
  results: Record<string, unknown>,
  out: string[],
): Promise<void> {
  progress(`Copy mode, 10 files: ${RUNS} interleaved rounds after 2 warm-up rounds ...`);
  const small = scratch.dir("copy-small");
  fillWorkspace(small, 10, 10 * 1024);
  const smallRuns = await interleave(
    [
      workspaceVariant("bind-10", "bind mode, 10 files", runc, small, "bind"),
      workspaceVariant("copy-10", "copy mode, 10 files", runc, small, "copy"),
    ],
    { warmup: 2, runs: RUNS, progress },
  );
  progress("Copy mode, 20,000 files / 200 MB: writing the workspace ...");
  const large = scratch.dir("copy-large");
  fillWorkspace(large, 20_000, 200 * 1024 * 1024);
  progress(`Copy mode, 20,000 files / 200 MB: ${LARGE_RUNS} interleaved rounds after 1 warm-up round ...`);
  const largeRuns = await interleave(
    [
      workspaceVariant("bind-20k", "bind mode, 20,000 files / 200 MB", runc, large, "bind"),
      workspaceVariant("copy-20k", "copy mode, 20,000 files / 200 MB", runc, large, "copy"),
    ],
    { warmup: 1, runs: LARGE_RUNS, progress },
  );
  progress("Gateway round trips inside the sandbox: relay vs bind-mounted socket ...");
  const roundTrips: RoundTrip[] = [];
  for (const mode of ["bind", "copy"] as const) {
    roundTrips.push(await gatewayRoundTrip(runc, server, scratch.dir(`rtt-${mode}`), mode, 3));
  }
  const all = [...smallRuns, ...largeRuns];
  const bindOf = (key: string) => all.find((r) => r.key === key.replace("copy-", "bind-"));
  results.copyMode = {
    perCall: all.map((r) => ({ ...r, overBindMs: round(r.medianMs - (bindOf(r.key)?.medianMs ?? Number.NaN)) })),
    gatewayRoundTrips: roundTrips,
  };
  const phase = (r: VariantResult, name: string) => r.phasesMedianMs?.[name] ?? "-";
  out.push(
    "",
    table(
      [
        "copy vs bind, per call (runc)",
        "runs",
        "median s",
        "p90 s",
        "over bind ms",
        "copy in ms",
        "copy out ms",
        "apply ms",
        "snapshot ms",
        "failures",
      ],
      all.map((r) => [
        r.label,
        r.runs,
        seconds(r.medianMs),
        seconds(r.p90Ms),
        r.key.startsWith("copy") ? round(r.medianMs - (bindOf(r.key)?.medianMs ?? Number.NaN)) : "-",
        phase(r, "copyIn"),
        phase(r, "copyOut"),
        phase(r, "apply"),
        phase(r, "snapshot"),
        r.failures,
      ]),
    ),
    "",
    phaseTable(all),
    "",
    table(
      ["gateway round trip inside the sandbox (median of 3 runs' medians)", "keep-alive ms", "new connection ms"],
      roundTrips.map((r) => [
        r.mode === "bind" ? "bind-mounted socket" : "relay (HTTP/2 over exec stdio)",
        r.keepAliveMs,
        r.newConnectionMs,
      ]),
    ),
  );
}

function perCallTable(perCall: VariantResult[], host: VariantResult): string {
  return table(
    ["per call (2-turn task)", "runs", "median s", "p90 s", "x host", "overhead s", "failures"],
    perCall.map((r) => [
      r.label,
      r.runs,
      seconds(r.medianMs),
      seconds(r.p90Ms),
      (r.medianMs / host.medianMs).toFixed(2),
      seconds(r.medianMs - host.medianMs),
      r.failures,
    ]),
  );
}

function phaseTable(perCall: VariantResult[]): string {
  const names = ["setup", "start", "piStart", "turns", "exit", "remove", "caller"];
  const rows = perCall
    .filter((r) => r.phasesMedianMs)
    .map((r) => [
      r.key,
      ...names.map((n) => (r.phasesMedianMs![n] === undefined ? "-" : String(r.phasesMedianMs![n]))),
    ]);
  return `where the time goes (medians, ms)\n${table(["variant", ...names], rows)}`;
}

function targetLines(results: Record<string, unknown>): string[] {
  const lines = ["", "targets:"];
  const perCall = (results.perCall as Array<VariantResult & { overheadMs: number }> | undefined) ?? [];
  const over = (key: string) => perCall.find((r) => r.key === key)?.overheadMs;
  const mark = (ok: boolean | undefined) => (ok === undefined ? "n/a " : ok ? "met " : "MISS");
  const runcOver = over("runc");
  const runscOver = over("runsc");
  lines.push(
    `  ${mark(runcOver === undefined ? undefined : runcOver <= TARGETS.runcOverheadMs)} runc overhead over host <= ${TARGETS.runcOverheadMs} ms: ${runcOver ?? "-"} ms`,
  );
  lines.push(
    `  ${mark(runscOver === undefined ? undefined : runscOver <= TARGETS.runscOverheadMs)} runsc overhead over host <= ${TARGETS.runscOverheadMs} ms: ${runscOver ?? "-"} ms`,
  );
  const delays = (results.eventDelay as DelayResult[] | undefined) ?? [];
  for (const d of delays.filter((d) => d.key !== "host")) {
    lines.push(
      `  ${mark(d.medianMs < TARGETS.eventDelayMs)} event delay (${d.key}) median < ${TARGETS.eventDelayMs} ms: ${d.medianMs} ms`,
    );
  }
  const parser = results.parser as ParserResult | undefined;
  if (parser) {
    const flat = parser.rssAtEndMb - parser.rssAt10PercentMb < 16;
    lines.push(
      `  ${mark(parser.mbPerSecond >= TARGETS.parserMbPerSecond && flat)} parser >= ${TARGETS.parserMbPerSecond} MB/s, flat memory: ${parser.mbPerSecond} MB/s, RSS ${parser.rssAt10PercentMb} -> ${parser.rssAtEndMb} MB`,
    );
  }
  const copy = (results.copyMode as { perCall: Array<VariantResult & { overBindMs: number }> } | undefined)?.perCall;
  const copySmall = copy?.find((r) => r.key === "copy-10");
  if (copySmall) {
    lines.push(
      `  ${mark(copySmall.overBindMs <= TARGETS.copyOverBindMs)} copy mode over bind mode, 10 files <= ${TARGETS.copyOverBindMs} ms: ${copySmall.overBindMs} ms`,
    );
  }
  const eight = (results.concurrency as { levels: ConcurrencyResult[] } | undefined)?.levels.find(
    (l) => l.concurrency === 8,
  );
  if (eight) {
    lines.push(
      `  ${mark(eight.failures === 0 && eight.containersLeft === 0 && eight.peakRssMb < TARGETS.peakRssMb)} 8 concurrent: 0 failures, 0 left, peak RSS < ${TARGETS.peakRssMb} MB: ${eight.failures} failures, ${eight.containersLeft} left, ${eight.peakRssMb} MB`,
    );
  }
  for (const target of engineTargets(results.engines)) lines.push(`  ${mark(target.ok)} ${target.text}`);
  for (const target of (results.cliStartTargets as Array<{ ok: boolean; text: string }> | undefined) ?? [])
    lines.push(`  ${mark(target.ok)} ${target.text}`);
  for (const target of warmTargetLines(results.warm)) lines.push(`  ${mark(target.ok)} ${target.text}`);
  return lines;
}

main().catch((error) => {
  console.error(`bench failed: ${(error as Error)?.stack ?? error}`);
  process.exitCode = 1;
});
