// The engines section of `npm run bench`: what a call costs when the workspace is bind-mounted
// (local engine), copied in and out (local engine), and copied to an engine on "another machine"
// reached over TCP with mutual TLS, side by side in interleaved rounds, for a 10-file workspace
// and a 20,000-file / 200 MB one (a node_modules-like tree).
//
// The remote engine is the first engine of `--remote=<engines file>` that does not share this
// machine's files, else the second dockerd of tests/support/second-engine.ts (CI's, or one this
// run starts and stops). Copy mode is chosen per call with the run option `workspace: "copy"`;
// where it is not available the variant's failures and first error are reported, not hidden.
import fs from "node:fs";
import path from "node:path";
import { ContainerPiAgent } from "../src/container-pi-agent.js";
import type { Engine } from "../src/engine/engine.js";
import { EnginePool } from "../src/engine/engine-pool.js";
import { ensureRunnerImage } from "../src/image/ensure-runner-image.js";
import {
  readSharedState,
  remoteEngine,
  type SecondEngineState,
  startSecondEngine,
  stopSecondEngine,
} from "../tests/support/second-engine.js";
import { benchModelsJson, PROVIDER, TASK_MODEL, TASK_SCHEMA } from "./bench-task.js";
import { workspaceVariant } from "./copy-mode.js";
import { interleave, type VariantResult } from "./interleave.js";
import { round, seconds, table } from "./stats.js";
import type { Scratch } from "./variants.js";

export const ENGINE_TARGETS = { localCopyOverBindMs: 50, remoteCopyOverLocalBindMs: 250 };

export interface WorkspaceShape {
  key: string;
  label: string;
  files: number;
  bytesPerFile: number;
}

export const WORKSPACES: WorkspaceShape[] = [
  { key: "small", label: "10 files", files: 10, bytesPerFile: 1024 },
  { key: "large", label: "20,000 files / 200 MB", files: 20_000, bytesPerFile: 10 * 1024 },
];

/** A tree like a node_modules folder: 100 files per folder, two levels deep. */
export function makeWorkspace(dir: string, shape: WorkspaceShape): void {
  const content = Buffer.alloc(shape.bytesPerFile, "x");
  for (let i = 0; i < shape.files; i++) {
    const folder = path.join(dir, `pkg-${Math.floor(i / 1000)}`, `mod-${Math.floor(i / 100) % 10}`);
    if (i % 100 === 0) fs.mkdirSync(folder, { recursive: true });
    fs.writeFileSync(path.join(folder, `file-${i}.js`), content);
  }
}

interface RemoteEngine {
  engine: Engine;
  release: () => Promise<void>;
}

async function remote(enginesFile: string | undefined, progress: (line: string) => void): Promise<RemoteEngine> {
  if (enginesFile) {
    const pool = EnginePool.fromFile(enginesFile);
    const engine = pool.engines.find((e) => !e.sharesHostFilesystem);
    if (!engine) throw new Error(`${enginesFile} lists no engine on another machine (sharesHostFilesystem false)`);
    return { engine, release: async () => pool.close() };
  }
  let state: SecondEngineState | undefined = readSharedState();
  let own = false;
  if (!state) {
    progress("Starting a second engine (own network and mount namespace, mutual TLS) ...");
    state = await startSecondEngine(`bench-${process.pid}`);
    own = true;
  }
  const started = state;
  return { engine: remoteEngine(started), release: async () => (own ? stopSecondEngine(started) : undefined) };
}

function agentOn(engine: Engine, baseUrl: string, image: string): ContainerPiAgent {
  return new ContainerPiAgent({
    engine,
    model: `${PROVIDER}/${TASK_MODEL}`,
    models: benchModelsJson(baseUrl),
    schema: TASK_SCHEMA,
    runtime: "runc",
    image,
    reapOrphans: false,
  });
}

export async function runEnginesSection(input: {
  local: Engine;
  baseUrl: string;
  image: string;
  runs: number;
  scratch: Scratch;
  progress: (line: string) => void;
  enginesFile?: string;
}): Promise<{ results: unknown; text: string }> {
  const { local, baseUrl, image, scratch, progress } = input;
  const far = await remote(input.enginesFile, progress);
  try {
    progress(`Engines: the runner image on ${far.engine.name} (loaded from the local engine when missing) ...`);
    await ensureRunnerImage(far.engine, { image, sources: [local], progress });
    const localAgent = agentOn(local, baseUrl, image);
    const remoteAgent = agentOn(far.engine, baseUrl, image);
    const sections: Array<{ shape: WorkspaceShape; results: VariantResult[] }> = [];
    for (const shape of WORKSPACES) {
      const made = performance.now();
      const workspace = scratch.dir(`engines-${shape.key}`);
      makeWorkspace(workspace, shape);
      progress(`Engines, ${shape.label} (made in ${seconds(performance.now() - made)} s) ...`);
      const runs = shape.key === "large" ? Math.max(1, Math.min(input.runs, 4)) : input.runs;
      const results = await interleave(
        [
          workspaceVariant("bind", "bind mount, local engine", localAgent, workspace, "bind"),
          workspaceVariant("copy-local", "copy mode, local engine", localAgent, workspace, "copy"),
          workspaceVariant(
            "copy-remote",
            `copy mode, remote engine over TLS (${far.engine.name})`,
            remoteAgent,
            workspace,
            "copy",
          ),
        ],
        { warmup: 1, runs, progress },
      );
      sections.push({ shape, results });
    }
    return { results: { remote: far.engine.address, targets: ENGINE_TARGETS, sections }, text: enginesTable(sections) };
  } finally {
    await far.release();
  }
}

function enginesTable(sections: Array<{ shape: WorkspaceShape; results: VariantResult[] }>): string {
  const rows: Array<Array<string | number>> = [];
  for (const { shape, results } of sections) {
    const bind = results.find((r) => r.key === "bind");
    for (const r of results) {
      const over = bind && r.key !== "bind" && r.runs > 0 ? `${round(r.medianMs - bind.medianMs)}` : "-";
      rows.push([
        shape.label,
        r.label,
        r.runs,
        seconds(r.medianMs),
        seconds(r.p90Ms),
        over,
        phase(r, "copyIn"),
        phase(r, "copyOut"),
        r.failures ? `${r.failures}: ${r.errors[0]?.split("\n")[0]}` : 0,
      ]);
    }
  }
  return table(
    [
      "workspace",
      "engines: where the run goes",
      "runs",
      "median s",
      "p90 s",
      "ms over bind",
      "copy in ms",
      "copy out ms",
      "failures",
    ],
    rows,
  );
}

/** A copy mode phase's median, "-" for bind mode (which has none). */
function phase(result: VariantResult, name: string): string | number {
  const ms = result.phasesMedianMs?.[name];
  return ms === undefined || Number.isNaN(ms) ? "-" : ms;
}

/** The engines targets (issue 12) against a run's results: each line's verdict and text. */
export function engineTargets(results: unknown): Array<{ ok: boolean; text: string }> {
  const small = (
    results as { sections?: Array<{ shape: WorkspaceShape; results: VariantResult[] }> } | undefined
  )?.sections?.find((s) => s.shape.key === "small")?.results;
  const median = (key: string) => small?.find((r) => r.key === key && r.runs > 0)?.medianMs;
  const [bind, local, far] = [median("bind"), median("copy-local"), median("copy-remote")];
  if (bind === undefined) return [];
  const lines: Array<{ ok: boolean; text: string }> = [];
  if (local !== undefined) {
    const over = round(local - bind);
    lines.push({
      ok: over <= ENGINE_TARGETS.localCopyOverBindMs,
      text: `local copy mode over bind mode, 10 files <= ${ENGINE_TARGETS.localCopyOverBindMs} ms: ${over} ms`,
    });
  }
  if (far !== undefined) {
    const over = round(far - bind);
    lines.push({
      ok: over <= ENGINE_TARGETS.remoteCopyOverLocalBindMs,
      text: `remote (TLS) copy mode over local bind mode, 10 files <= ${ENGINE_TARGETS.remoteCopyOverLocalBindMs} ms: ${over} ms`,
    });
  }
  return lines;
}
