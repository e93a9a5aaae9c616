// The replay section of `npm run bench`: what a whole CLI call costs live, live with `--record`,
// and replayed from a record (no upstream: the gateway answers from the recording), interleaved.
// Same 2-turn task as the other sections, through the CLI in this process (`runCli`), runc.
import fs from "node:fs";
import path from "node:path";
import type { CliIo } from "../src/cli/cli-io.js";
import { runCli } from "../src/cli/program.js";
import { benchModelsJson, PROVIDER, TASK_MODEL, TASK_PROMPT, TASK_SCHEMA } from "./bench-task.js";
import { interleave, type VariantResult } from "./interleave.js";
import { round, seconds, table } from "./stats.js";
import type { Scratch, Variant } from "./variants.js";

const quiet: CliIo = {
  stdout: () => {},
  stderr: () => {},
  readStdin: async () => undefined,
  env: { PATH: process.env.PATH ?? "" },
  stderrIsTty: false,
};

async function cli(argv: string[]): Promise<void> {
  const code = await runCli(argv, quiet);
  if (code !== 0) throw new Error(`sandbox-run ${argv.slice(0, 2).join(" ")} ... exited ${code}`);
}

/** Bytes of every file under a record folder. */
function recordBytes(dir: string): number {
  let bytes = 0;
  for (const name of fs.readdirSync(dir, { recursive: true }) as string[]) {
    const stat = fs.statSync(path.join(dir, name));
    if (stat.isFile()) bytes += stat.size;
  }
  return bytes;
}

export async function runReplaySection(input: {
  baseUrl: string;
  image: string;
  runs: number;
  scratch: Scratch;
  progress: (line: string) => void;
}): Promise<{ results: unknown; text: string }> {
  const { scratch, progress } = input;
  const dir = scratch.dir("replay");
  const modelsFile = path.join(dir, "models.json");
  fs.writeFileSync(modelsFile, JSON.stringify(benchModelsJson(input.baseUrl)));
  const schemaFile = path.join(dir, "schema.json");
  fs.writeFileSync(schemaFile, JSON.stringify(TASK_SCHEMA));
  const call = (cwd: string) => [
    "-q",
    "--image",
    input.image,
    "--cwd",
    cwd,
    "--models",
    modelsFile,
    "--model",
    `${PROVIDER}/${TASK_MODEL}`,
    "--schema",
    schemaFile,
  ];
  // Each call gets a fresh workspace, so no run sees what another left.
  let made = 0;
  const workspace = () => fs.mkdtempSync(path.join(dir, `ws-${made++}-`));
  const source = path.join(dir, "source-record");
  progress("Replay: recording the run the replays play back ...");
  await cli([...call(workspace()), "--record", source, TASK_PROMPT]);
  let recorded = 0;
  const timed = (key: string, label: string, argv: () => string[]): Variant => ({
    key,
    label,
    async run() {
      const args = argv();
      const started = performance.now();
      await cli(args);
      return { ms: performance.now() - started };
    },
  });
  const results = await interleave(
    [
      timed("live", "live (the scripted model server)", () => [...call(workspace()), TASK_PROMPT]),
      timed("record", "live, with --record", () => [
        ...call(workspace()),
        "--record",
        path.join(dir, `record-${recorded++}`),
        TASK_PROMPT,
      ]),
      timed("replay", "replay of the record (no upstream)", () => ["replay", source, "-q", "--cwd", workspace()]),
    ],
    { warmup: 1, runs: input.runs, progress },
  );
  const bytes = recordBytes(source);
  return { results: { recordBytes: bytes, variants: results }, text: replayTable(results, bytes) };
}

function replayTable(results: VariantResult[], bytes: number): string {
  const live = results.find((r) => r.key === "live");
  const rows = results.map((r) => [
    r.label,
    r.runs,
    seconds(r.medianMs),
    seconds(r.p90Ms),
    live && r.key !== "live" ? round(r.medianMs - live.medianMs) : "-",
    r.failures ? `${r.failures}: ${r.errors[0]?.split("\n")[0]}` : 0,
  ]);
  return `${table(["CLI call (runc)", "runs", "median s", "p90 s", "ms over live", "failures"], rows)}\nrecord size: ${round(bytes / 1024)} KB`;
}
