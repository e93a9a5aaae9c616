// The warm section of `npm run bench` (`--only=warm`): what a call costs when its sandbox was made
// before it (a warm sandbox, Pi loaded and waiting) against Pi on the host and a cold call,
// interleaved on the 2-turn task; how long a claim takes with 8 at once; how fast a pool refills;
// and `sandbox-run batch` against the same tasks as separate cold CLI calls.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ContainerPiAgent } from "../src/container-pi-agent.js";
import type { RunEvent } from "../src/run/run-events.js";
import { benchModelsJson, PROVIDER, TASK_MODEL, TASK_PROMPT, TASK_RESULT, TASK_SCHEMA } from "./bench-task.js";
import type { HostPi } from "./host-pi.js";
import { interleave, type VariantResult } from "./interleave.js";
import { median, percentile, round, seconds, table } from "./stats.js";
import { hostVariant, type Scratch, sandboxPhases, type Variant } from "./variants.js";

export const WARM_TARGETS = {
  warmRuncRatio: 1.0,
  warmRuncAim: 0.6,
  warmRunscRatio: 1.5,
  claimP50Ms: 100,
  claimP99Ms: 400,
  batchShare: 0.5,
};

const CLI = fileURLToPath(new URL("../dist/cli/main.js", import.meta.url));

interface WarmSectionInput {
  hostPi: HostPi;
  baseUrl: string;
  image: string;
  runs: number;
  runtimes: Array<"runc" | "runsc">;
  scratch: Scratch;
  progress: (line: string) => void;
}

function agentFor(input: WarmSectionInput, runtime: "runc" | "runsc", warm: number): ContainerPiAgent {
  return new ContainerPiAgent({
    model: `${PROVIDER}/${TASK_MODEL}`,
    models: benchModelsJson(input.baseUrl),
    schema: TASK_SCHEMA,
    runtime,
    image: input.image,
    reapOrphans: false,
    warm,
  });
}

/** Where a warm call's time went, from its own events (ms). */
function warmPhases(events: RunEvent[], total: number): Record<string, number> | undefined {
  const at = (type: string) => events.find((e) => e.type === type)?.time;
  const claimed = at("warm.claimed");
  const bound = at("workspace.copied-in");
  const piStart = at("agent_start");
  const piEnd = at("agent_end");
  const exited = at("container.exited");
  const removed = at("container.removed");
  if ([claimed, bound, piStart, piEnd, exited, removed].some((t) => t === undefined)) return undefined;
  return {
    setup: claimed!,
    claim: bound! - claimed!,
    piStart: piStart! - bound!,
    turns: piEnd! - piStart!,
    exit: exited! - piEnd!,
    remove: removed! - exited!,
    caller: total - removed!,
  };
}

function callVariant(key: string, label: string, agent: ContainerPiAgent, scratch: Scratch, warm: boolean): Variant {
  return {
    key,
    label,
    async run() {
      // A warm call finds its sandbox ready: the pool refills between calls, outside the time.
      if (warm) await agent.warmUp();
      const events: RunEvent[] = [];
      const cwd = scratch.dir(`${key}-ws`);
      const started = performance.now();
      const details = await agent.runDetailed(TASK_PROMPT, { cwd, onEvent: (e) => void events.push(e) });
      const ms = performance.now() - started;
      if (JSON.stringify(details.result) !== JSON.stringify(TASK_RESULT))
        throw new Error(`${key}: unexpected result ${JSON.stringify(details.result)}`);
      if (details.warm !== warm) throw new Error(`${key}: the call was ${details.warm ? "warm" : "cold"}`);
      return { ms, phases: warm ? warmPhases(events, ms) : sandboxPhases(events, ms) };
    },
  };
}

/** 8 calls at once on a pool of 8 ready sandboxes, `rounds` times: the claim's latency, and its parts. */
async function claimLatency(input: WarmSectionInput, rounds: number) {
  const agent = agentFor(input, "runc", 8);
  const claim: number[] = [];
  const take: number[] = [];
  const fill: number[] = [];
  try {
    for (let round_ = 0; round_ < rounds; round_++) {
      const filling = performance.now();
      await agent.warmUp();
      if (round_ > 0) fill.push(performance.now() - filling);
      const calls = Array.from({ length: 8 }, async (_, i) => {
        const events: RunEvent[] = [];
        const cwd = input.scratch.dir(`claim-${round_}-${i}`);
        fs.writeFileSync(path.join(cwd, "README.md"), "a small workspace\n");
        await agent.runDetailed(TASK_PROMPT, { cwd, onEvent: (e) => void events.push(e) });
        const claimed = events.find((e) => e.type === "warm.claimed");
        const bound = events.find((e) => e.type === "workspace.copied-in");
        if (!claimed || !bound) throw new Error("a call of the claim round was not warm");
        take.push(Number(claimed.data.waitedMs));
        claim.push(bound.time);
      });
      await Promise.all(calls);
      input.progress(`  claim round ${round_ + 1}/${rounds}`);
    }
  } finally {
    await agent.close();
  }
  return { claim, take, fill };
}

/** A pool of `size` filled from empty: sandboxes made per second, and what one took. */
async function refillRate(input: WarmSectionInput, runtime: "runc" | "runsc", size: number) {
  const agent = agentFor(input, runtime, size);
  try {
    const started = performance.now();
    await agent.warmUp();
    const ms = performance.now() - started;
    return { runtime, size, ms: round(ms), perSecond: round((size * 1000) / ms, 2) };
  } finally {
    await agent.close();
  }
}

/** Runs the built CLI as its own process (as a user's shell would), until it ends. */
function cliProcess(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (c: Buffer) => (stderr = (stderr + c.toString()).slice(-2000)));
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`sandbox-run ${args[0]} exited ${code}: ${stderr}`)),
    );
  });
}

/** `sandbox-run batch` of `tasks` tasks at concurrency 1 against the same tasks as separate cold CLI calls. */
function batchVariants(input: WarmSectionInput, tasks: number): Variant[] {
  const dir = input.scratch.dir("warm-batch");
  const modelsFile = path.join(dir, "models.json");
  fs.writeFileSync(modelsFile, JSON.stringify(benchModelsJson(input.baseUrl)));
  const schemaFile = path.join(dir, "schema.json");
  fs.writeFileSync(schemaFile, JSON.stringify(TASK_SCHEMA));
  const common = ["--image", input.image, "--models", modelsFile, "--model", `${PROVIDER}/${TASK_MODEL}`];
  let made = 0;
  const workspaces = () => Array.from({ length: tasks }, () => input.scratch.dir(`batch-${made++}`));
  return [
    {
      key: "batch",
      label: `\`sandbox-run batch\`, ${tasks} tasks, --concurrency 1 (default --warm: 2)`,
      async run() {
        const file = path.join(dir, `tasks-${made}.jsonl`);
        const lines = workspaces().map((cwd, i) =>
          JSON.stringify({ id: `t${i}`, prompt: TASK_PROMPT, cwd, schema: TASK_SCHEMA }),
        );
        fs.writeFileSync(file, `${lines.join("\n")}\n`);
        const started = performance.now();
        await cliProcess(["batch", file, "-q", "--concurrency", "1", ...common]);
        return { ms: performance.now() - started };
      },
    },
    {
      key: "cold-cli",
      label: `${tasks} separate \`sandbox-run\` calls, one after another`,
      async run() {
        const cwds = workspaces();
        const started = performance.now();
        for (const cwd of cwds) await cliProcess(["-q", "--cwd", cwd, "--schema", schemaFile, ...common, TASK_PROMPT]);
        return { ms: performance.now() - started };
      },
    },
  ];
}

export async function runWarmSection(
  input: WarmSectionInput,
): Promise<{ results: Record<string, unknown>; text: string }> {
  const { progress } = input;
  const agents = input.runtimes.flatMap((runtime) => [
    { runtime, warm: false, agent: agentFor(input, runtime, 0) },
    { runtime, warm: true, agent: agentFor(input, runtime, 1) },
  ]);
  let perCall: VariantResult[];
  try {
    progress(`Warm: per call, ${input.runs} interleaved rounds after 2 warm-up rounds ...`);
    perCall = await interleave(
      [
        hostVariant(input.hostPi, input.baseUrl, input.scratch),
        ...agents.map(({ runtime, warm, agent }) =>
          callVariant(
            `${warm ? "warm" : "cold"}-${runtime}`,
            `${warm ? "warm" : "cold"} ${runtime}${warm ? " (copy mode, sandbox made before the call)" : " (bind mode)"}`,
            agent,
            input.scratch,
            warm,
          ),
        ),
      ],
      { warmup: 2, runs: input.runs, progress },
    );
  } finally {
    await Promise.all(agents.map(({ agent }) => agent.close()));
  }
  const host = perCall.find((r) => r.key === "host")!;
  const rows = perCall.map((r) => ({ ...r, ratioToHost: round(r.medianMs / host.medianMs, 2) }));

  const rounds = Math.max(3, Math.ceil(input.runs / 2));
  progress(`Warm: claim latency, ${rounds} rounds of 8 calls at once on a pool of 8 ...`);
  const latency = await claimLatency(input, rounds);
  progress("Warm: pool refill from empty ...");
  const refill = [];
  for (const runtime of input.runtimes) refill.push(await refillRate(input, runtime, 4));
  progress("Warm: 6 tasks through `batch` against 6 cold CLI calls, interleaved ...");
  const batch = await interleave(batchVariants(input, 6), {
    warmup: 1,
    runs: Math.max(2, Math.ceil(input.runs / 4)),
    progress,
  });
  const batchShare = round(batch[0]!.medianMs / batch[1]!.medianMs, 2);

  const claim = {
    calls: latency.claim.length,
    p50Ms: round(percentile(latency.claim, 50)),
    p99Ms: round(percentile(latency.claim, 99)),
    takeP50Ms: round(percentile(latency.take, 50)),
    takeP99Ms: round(percentile(latency.take, 99)),
    refill8MedianMs: round(median(latency.fill)),
  };
  const results = { perCall: rows, claim, refill, batch: { variants: batch, share: batchShare } };
  return { results, text: warmText(rows, claim, refill, batch, batchShare) };
}

function warmText(
  rows: Array<VariantResult & { ratioToHost: number }>,
  claim: Record<string, number>,
  refill: Array<{ runtime: string; size: number; ms: number; perSecond: number }>,
  batch: VariantResult[],
  batchShare: number,
): string {
  const names = ["setup", "claim", "piStart", "start", "turns", "exit", "remove", "caller"];
  return [
    table(
      ["warm: per call (2-turn task)", "runs", "median s", "p90 s", "x host", "failures"],
      rows.map((r) => [r.label, r.runs, seconds(r.medianMs), seconds(r.p90Ms), r.ratioToHost.toFixed(2), r.failures]),
    ),
    "",
    `where the time goes (medians, ms)\n${table(
      ["variant", ...names],
      rows
        .filter((r) => r.phasesMedianMs)
        .map((r) => [
          r.key,
          ...names.map((n) => (r.phasesMedianMs![n] === undefined ? "-" : String(r.phasesMedianMs![n]))),
        ]),
    )}`,
    "",
    table(
      ["claim, 8 calls at once on a pool of 8 (runc)", "calls", "p50 ms", "p99 ms"],
      [
        ["call start -> sandbox bound (workspace in, Pi starting)", claim.calls!, claim.p50Ms!, claim.p99Ms!],
        ["the pool's claim: a ready sandbox taken and pinged", claim.calls!, claim.takeP50Ms!, claim.takeP99Ms!],
      ],
    ),
    `pool of 8 refilled after a round of 8 claims: median ${seconds(claim.refill8MedianMs)} s`,
    table(
      ["pool filled from empty", "sandboxes", "s", "sandboxes/s"],
      refill.map((r) => [r.runtime, r.size, seconds(r.ms), r.perSecond]),
    ),
    "",
    table(
      ["batch figure (runc, the built CLI)", "runs", "median s", "p90 s", "failures"],
      batch.map((r) => [r.label, r.runs, seconds(r.medianMs), seconds(r.p90Ms), r.failures]),
    ),
    `batch / separate cold calls: ${batchShare}`,
  ].join("\n");
}

/** The warm section's target lines. */
export function warmTargetLines(results: unknown): Array<{ ok: boolean | undefined; text: string }> {
  const warm = results as
    | {
        perCall: Array<{ key: string; ratioToHost: number }>;
        claim: { p50Ms: number; p99Ms: number; takeP50Ms: number; takeP99Ms: number };
        batch: { share: number };
      }
    | undefined;
  if (!warm) return [];
  const ratio = (key: string) => warm.perCall.find((r) => r.key === key)?.ratioToHost;
  const lines: Array<{ ok: boolean | undefined; text: string }> = [];
  const runc = ratio("warm-runc");
  const runsc = ratio("warm-runsc");
  lines.push({
    ok: runc === undefined ? undefined : runc <= WARM_TARGETS.warmRuncRatio,
    text: `warm runc <= ${WARM_TARGETS.warmRuncRatio}x host (aim ${WARM_TARGETS.warmRuncAim}x): ${runc ?? "-"}x`,
  });
  lines.push({
    ok: runsc === undefined ? undefined : runsc <= WARM_TARGETS.warmRunscRatio,
    text: `warm runsc <= ${WARM_TARGETS.warmRunscRatio}x host: ${runsc ?? "-"}x`,
  });
  // The claim of a ready sandbox (the pool's: taken, checked); binding it to the call (its run's
  // services, the workspace copied in, Pi starting) is the call's start, shown beside it.
  lines.push({
    ok: warm.claim.takeP50Ms <= WARM_TARGETS.claimP50Ms && warm.claim.takeP99Ms <= WARM_TARGETS.claimP99Ms,
    text: `claim of a ready sandbox, 8 at once: p50 <= ${WARM_TARGETS.claimP50Ms} ms, p99 <= ${WARM_TARGETS.claimP99Ms} ms: ${warm.claim.takeP50Ms} / ${warm.claim.takeP99Ms} ms (call start -> sandbox bound, workspace in: ${warm.claim.p50Ms} / ${warm.claim.p99Ms} ms)`,
  });
  lines.push({
    ok: warm.batch.share <= WARM_TARGETS.batchShare,
    text: `batch of 6 at concurrency 1 <= ${WARM_TARGETS.batchShare} of 6 cold CLI calls: ${warm.batch.share}`,
  });
  return lines;
}
