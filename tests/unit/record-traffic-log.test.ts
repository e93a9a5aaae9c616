// exchanges.jsonl as the record writes it: bytes kept exactly (text or base64), bounded per exchange
// and in total (past the cap an exchange is listed without its bytes), and no credential value the
// gateway adds in any form, even when an upstream echoes it back split across chunks.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { GatewayExchange } from "../../src/gateway/model-gateway.js";
import { SCRUBBED } from "../../src/record/credential-scrubber.js";
import { loadBytes, type RecordedExchange } from "../../src/record/record-format.js";
import { DEFAULT_TRAFFIC_LIMITS, TrafficLog } from "../../src/record/traffic-log.js";
import { HostDir } from "../../src/util/host-dir.js";

/** A stream on a new file, as the recorder makes them (exclusive, no link followed). */
function newStream(file: string): fs.WriteStream {
  const dir = HostDir.open(path.dirname(file));
  try {
    return dir.newWriteStream(path.basename(file));
  } finally {
    dir.close();
  }
}

const CANARY = "sk-canary-7d1e0f9a3b5c4e2d";
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sr-traffic-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function exchange(seq: number, chunks: Buffer[], extra: Partial<GatewayExchange> = {}): GatewayExchange {
  return {
    seq,
    routeId: "p",
    api: "openai-completions",
    path: "/p/chat/completions",
    request: { api: "openai-completions", model: "m", stream: true, system: "", messages: [], tools: [], settings: {} },
    status: 200,
    relay: "complete",
    startedMs: 10 * seq,
    headersMs: 1,
    durationMs: 5,
    recording: {
      request: {
        method: "POST",
        target: "/p/chat/completions",
        headers: { "content-type": "application/json" },
        body: Buffer.from(`{"model":"m","n":${seq}}`),
        bodyTruncated: false,
      },
      response: {
        status: 200,
        headers: { "content-type": "text/event-stream" },
        chunks: chunks.map((data, i) => ({ atMs: i + 0.5, data })),
        bodyTruncated: false,
      },
    },
    ...extra,
  };
}

async function written(log: TrafficLog, file: string) {
  const end = await log.end();
  const text = fs.readFileSync(file, "utf8");
  const lines = text
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as RecordedExchange);
  return { ...end, text, lines };
}

describe("record: model traffic (exchanges.jsonl)", () => {
  it("keeps every chunk's bytes and time; a chunk that is not whole UTF-8 is stored as base64", async () => {
    const file = path.join(dir, "bytes.jsonl");
    const log = new TrafficLog(newStream(file));
    const euro = Buffer.from("data: €\n\n");
    // The euro sign's three bytes split across two chunks, as a socket may deliver them.
    const chunks = [euro.subarray(0, 7), euro.subarray(7), Buffer.from("data: [DONE]\n\n")];
    log.add(exchange(1, chunks));
    const { lines, summary } = await written(log, file);

    const response = lines[0]!.response!;
    expect(response.chunks.map((c) => "base64" in c)).toEqual([true, true, false]);
    expect(Buffer.concat(response.chunks.map(loadBytes))).toEqual(Buffer.concat(chunks));
    expect(response.chunks.map((c) => c.atMs)).toEqual([0.5, 1.5, 2.5]);
    expect(loadBytes(lines[0]!.request!.body).toString()).toBe('{"model":"m","n":1}');
    expect(summary).toMatchObject({ exchanges: 1, omitted: 0, scrubbed: 0 });
  });

  it("writes each exchange as one line for every line reader: line separators, C1 controls and bidi overrides escaped, the bytes kept (red-team review, round 3, session 41)", async () => {
    const file = path.join(dir, "lines.jsonl");
    const log = new TrafficLog(newStream(file));
    const hostile = Buffer.from("data: a\u2028b\u0085c\u009b2Jd\u202ee\n\n");
    log.add(exchange(1, [hostile]));
    log.add(exchange(2, [Buffer.from("data: [DONE]\n\n")]));
    const { text, lines } = await written(log, file);
    expect(text).not.toMatch(/[\u0085\u009b\u2028\u202e]/);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the boundaries Python's splitlines() cuts at
    expect(text.split(/\r\n|[\n\r\v\f\u001c-\u001e\u0085\u2028\u2029]/).filter((l) => l !== "")).toHaveLength(2);
    expect(Buffer.concat(lines[0]!.response!.chunks.map(loadBytes))).toEqual(hostile);
  });

  it("never writes a credential value: not echoed in a split response, not in base64, not in the target", async () => {
    const file = path.join(dir, "canary.jsonl");
    const log = new TrafficLog(newStream(file));
    log.forbid([`Bearer ${CANARY}`]);
    const body = Buffer.from(`{"error":{"message":"Incorrect API key provided: ${CANARY}"}}`);
    const cut = body.indexOf(CANARY) + 5;
    log.add(
      exchange(1, [body.subarray(0, cut), body.subarray(cut)], {
        status: 401,
        reply: { text: "", textBlocks: [], toolCalls: [], complete: true, error: `bad key ${CANARY}` },
      }),
    );
    // A non-UTF-8 chunk carrying the value: base64 would hide it from a plain text search.
    log.add(exchange(2, [Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(CANARY)])]));
    const third = exchange(3, [Buffer.from("ok")]);
    third.recording!.request.target = `/p/chat/completions?key=${CANARY}`;
    log.add(third);
    const { text, lines, summary } = await written(log, file);

    expect(text).not.toContain(CANARY);
    expect(text).not.toContain(Buffer.from(CANARY).toString("base64").slice(0, 16));
    for (const line of lines) {
      const bytes = Buffer.concat((line.response?.chunks ?? []).map(loadBytes));
      expect(bytes.includes(CANARY)).toBe(false);
      expect(line.scrubbed).toBe(true);
    }
    expect(Buffer.concat(lines[0]!.response!.chunks.map(loadBytes)).toString()).toContain(SCRUBBED);
    expect(summary.scrubbed).toBe(3);
  });

  it("past the total cap, exchanges are listed without their bytes and counted as omitted", async () => {
    const file = path.join(dir, "cap.jsonl");
    const log = new TrafficLog(newStream(file), { ...DEFAULT_TRAFFIC_LIMITS, maxTotalBytes: 3000 });
    const big = Buffer.alloc(900, "x");
    for (let seq = 1; seq <= 4; seq++) log.add(exchange(seq, [big]));
    const { lines, summary } = await written(log, file);

    expect(lines.map((l) => l.seq)).toEqual([1, 2, 3, 4]);
    expect(lines.map((l) => l.omitted === undefined)).toEqual([true, true, false, false]);
    expect(lines[2]!.omitted).toContain("cap of 3000 bytes");
    expect(lines[2]!.response).toBeUndefined();
    expect(summary).toMatchObject({ exchanges: 4, omitted: 2 });
    // The bytes kept stay under the cap; each exchange past it still takes one short line.
    const kept = lines.filter((l) => !l.omitted).map((l) => JSON.stringify(l).length + 1);
    expect(kept.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(3000);
    expect(Math.max(...lines.filter((l) => l.omitted).map((l) => JSON.stringify(l).length))).toBeLessThan(400);
  });

  it("an exchange the gateway kept no bytes of is listed as omitted", async () => {
    const file = path.join(dir, "none.jsonl");
    const log = new TrafficLog(newStream(file));
    log.add(exchange(1, [], { recording: undefined }));
    const { lines } = await written(log, file);
    expect(lines[0]!.omitted).toContain("kept no bytes");
  });
});
