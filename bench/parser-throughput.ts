// JSONL parsing throughput and memory: a 200 MB stream of Pi-like records (streamed message
// updates, growing tool output, an occasional large tool result) fed in 64 KiB chunks, cut
// anywhere, to JsonlReader + parsePiRecord, exactly as execute-run wires them. Runs in a child
// process (`runParserBench`) so its memory peak is its own and not the controller's.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { JsonlReader } from "../src/pi/jsonl-reader.js";
import { parsePiRecord } from "../src/pi/pi-events.js";
import { round } from "./stats.js";

export interface ParserResult {
  streamMb: number;
  chunkKb: number;
  seconds: number;
  mbPerSecond: number;
  records: number;
  badRecords: number;
  rssBeforeMb: number;
  /** RSS after the first 10% of the stream and at the end: equal when memory is flat. */
  rssAt10PercentMb: number;
  rssAtEndMb: number;
  rssPeakMb: number;
  heapPeakMb: number;
}

const MB = 1024 * 1024;
const CHUNK = 64 * 1024;

/** About 1 MiB of records in the shapes Pi writes; repeated to make the stream. */
function template(): Buffer {
  const lines: string[] = [];
  const word = 'lorem ipsum dolor sit amet, "quoted" \\ unicode é 漢字 \u2028 ';
  let text = "";
  let size = 0;
  for (let i = 0; size < MB; i++) {
    let record: object;
    if (i % 50 === 49) {
      // A large tool result (a file read, a long build log).
      record = {
        type: "tool_execution_end",
        toolCallId: `call_${i}`,
        toolName: "read",
        result: { content: [{ type: "text", text: word.repeat(1500) }] },
        isError: false,
      };
    } else if (i % 5 === 0) {
      text = text.length > 6000 ? "" : text + word;
      record = {
        type: "tool_execution_update",
        toolCallId: `call_${i}`,
        toolName: "bash",
        args: { command: "npm test" },
        partialResult: { content: [{ type: "text", text }] },
      };
    } else {
      text = text.length > 3000 ? "" : text + word;
      record = {
        type: "message_update",
        assistantMessageEvent: { type: "text_delta", contentIndex: 0, delta: word },
        message: {
          role: "assistant",
          content: [{ type: "text", text }],
          api: "openai-completions",
          provider: "scripted",
          model: "bench",
          usage: { input: 100, output: i, cacheRead: 0, cacheWrite: 0, totalTokens: 100 + i, cost: { total: 0 } },
          stopReason: "stop",
          timestamp: 1_700_000_000_000 + i,
        },
      };
    }
    const line = `${JSON.stringify(record)}\n`;
    lines.push(line);
    size += Buffer.byteLength(line);
  }
  return Buffer.from(lines.join(""));
}

export async function measureParser(totalMb: number): Promise<ParserResult> {
  const block = template();
  const total = totalMb * MB;
  let records = 0;
  let badRecords = 0;
  const reader = new JsonlReader({
    maxLineBytes: 16 * MB,
    onLine: (line) => {
      const parsed = parsePiRecord(line);
      if (parsed.ok) records++;
      else badRecords++;
    },
    onOversizeLine: () => badRecords++,
  });
  global.gc?.();
  const rssBefore = process.memoryUsage.rss();
  let rssPeak = rssBefore;
  let heapPeak = 0;
  let rssAt10 = 0;
  const sample = () => {
    const m = process.memoryUsage();
    rssPeak = Math.max(rssPeak, m.rss);
    heapPeak = Math.max(heapPeak, m.heapUsed);
    return m.rss;
  };
  const started = performance.now();
  let fed = 0;
  let offset = 0;
  while (fed < total || offset !== 0) {
    // Chunks are cut at fixed sizes, so lines straddle chunk boundaries as they do on a socket.
    const end = Math.min(offset + CHUNK, block.length);
    const chunk = block.subarray(offset, end);
    reader.push(chunk);
    fed += chunk.length;
    offset = end === block.length ? 0 : end;
    if (fed % (4 * MB) < CHUNK) {
      const rss = sample();
      if (!rssAt10 && fed >= total / 10) rssAt10 = rss;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  reader.end();
  const seconds = (performance.now() - started) / 1000;
  const rssEnd = sample();
  return {
    streamMb: round(fed / MB),
    chunkKb: CHUNK / 1024,
    seconds: round(seconds, 3),
    mbPerSecond: round(fed / MB / seconds),
    records,
    badRecords,
    rssBeforeMb: round(rssBefore / MB),
    rssAt10PercentMb: round(rssAt10 / MB),
    rssAtEndMb: round(rssEnd / MB),
    rssPeakMb: round(rssPeak / MB),
    heapPeakMb: round(heapPeak / MB),
  };
}

/** Runs measureParser in a fresh Node process and returns its report. */
export function runParserBench(totalMb: number): Promise<ParserResult> {
  const self = fileURLToPath(import.meta.url);
  const child = spawn(process.execPath, ["--import", "tsx", "--expose-gc", self, String(totalMb)], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString("utf8")));
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => {
      if (code !== 0) return reject(new Error(`parser benchmark exited with ${code}`));
      resolve(JSON.parse(out) as ParserResult);
    });
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const result = await measureParser(Number(process.argv[2] ?? 200));
  process.stdout.write(JSON.stringify(result));
}
