// Reads Pi's JSON-mode stdout the way sandbox-run does (JsonlReader + parsePiRecord +
// ResultCollector), for the variants that start Pi themselves: a run only counts when Pi
// really delivered the final tool's result.
import type { Readable } from "node:stream";
import { JsonlReader } from "../src/pi/jsonl-reader.js";
import { FINAL_TOOL_NAME } from "../src/pi/pi-args.js";
import { type PiEvent, parsePiRecord } from "../src/pi/pi-events.js";
import { type Outcome, ResultCollector } from "../src/pi/result-collector.js";

export function collectPiOutput(stdout: Readable, onEvent?: (event: PiEvent) => void): Promise<Outcome> {
  const collector = new ResultCollector({ finalToolName: FINAL_TOOL_NAME });
  const reader = new JsonlReader({
    maxLineBytes: 16 * 1024 * 1024,
    onLine: (line) => {
      const parsed = parsePiRecord(line);
      if (!parsed.ok) return;
      collector.observe(parsed.event);
      onEvent?.(parsed.event);
    },
    onOversizeLine: () => {},
  });
  return new Promise((resolve, reject) => {
    stdout.on("data", (chunk: Buffer) => reader.push(chunk));
    stdout.on("error", reject);
    stdout.on("end", () => {
      reader.end();
      resolve(collector.outcome());
    });
  });
}

/** Throws unless the outcome is the structured result the task asks for. */
export function expectResult(outcome: Outcome, expected: unknown, what: string): void {
  if (outcome.kind !== "structured" || JSON.stringify(outcome.value) !== JSON.stringify(expected)) {
    throw new Error(`${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(outcome).slice(0, 300)}`);
  }
}
