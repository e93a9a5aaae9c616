import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { AttachDemuxer, demuxedStreams } from "../../src/engine/attach-demux.js";

/** One frame as the engine writes it: type, three zero bytes, big-endian length, payload. */
function frame(type: 0 | 1 | 2, payload: string | Buffer): Buffer {
  const body = typeof payload === "string" ? Buffer.from(payload) : payload;
  const header = Buffer.alloc(8);
  header[0] = type;
  header.writeUInt32BE(body.length, 4);
  return Buffer.concat([header, body]);
}

function demux(chunks: Buffer[]) {
  const out = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  const demuxer = new AttachDemuxer(
    (b) => out.stdout.push(b),
    (b) => out.stderr.push(b),
  );
  for (const chunk of chunks) demuxer.push(chunk);
  return { stdout: Buffer.concat(out.stdout).toString(), stderr: Buffer.concat(out.stderr).toString(), pieces: out };
}

describe("AttachDemuxer", () => {
  const stream = Buffer.concat([
    frame(1, '{"type":"agent_start"}\n'),
    frame(2, "warning: something\n"),
    frame(1, ""),
    frame(1, '{"type":"agent_end"}\n'),
    frame(0, "echo\n"),
    frame(2, "bye"),
  ]);

  it("splits stdout and stderr however the bytes are cut into two chunks", () => {
    for (let at = 0; at <= stream.length; at++) {
      const got = demux([stream.subarray(0, at), stream.subarray(at)]);
      expect(got.stdout, `cut at ${at}`).toBe('{"type":"agent_start"}\n{"type":"agent_end"}\necho\n');
      expect(got.stderr, `cut at ${at}`).toBe("warning: something\nbye");
    }
  });

  it("splits them when every byte arrives alone", () => {
    const got = demux([...stream].map((byte) => Buffer.from([byte])));
    expect(got.stdout).toBe('{"type":"agent_start"}\n{"type":"agent_end"}\necho\n');
    expect(got.stderr).toBe("warning: something\nbye");
  });

  it("hands payloads on as views of the chunk they arrived in, not copies", () => {
    const big = frame(1, Buffer.alloc(100_000, 0x78));
    const chunks = [Buffer.from(big.subarray(0, 65_536)), Buffer.from(big.subarray(65_536))];
    const got = demux(chunks);
    expect(got.stdout.length).toBe(100_000);
    expect(got.pieces.stdout[0]!.buffer).toBe(chunks[0]!.buffer);
    expect(got.pieces.stdout[1]!.buffer).toBe(chunks[1]!.buffer);
    expect(got.pieces.stdout.map((p) => p.length)).toEqual([65_536 - 8, 100_000 - (65_536 - 8)]);
  });
});

describe("demuxedStreams: each stream at its reader's pace (review, session 36)", () => {
  it("pauses the engine's stream while a reader does not read, resumes once it drains, and holds no more than about one read meanwhile", async () => {
    const engine = new PassThrough();
    const { stdout, stderr } = demuxedStreams(engine);
    stderr.resume();
    const chunk = frame(1, Buffer.alloc(64 * 1024, 1));
    // 64 MiB offered while nobody reads stdout (what the relay's exec delivered once the host had
    // stopped reading it: 3 GB grew the controller before).
    let frames = 0;
    const offer = () => {
      frames++;
      return engine.write(chunk);
    };
    while (frames < 1024 && offer()) {}
    while (frames < 1024) offer();
    await new Promise((resolve) => setImmediate(resolve));
    expect(engine.isPaused()).toBe(true);
    expect(stdout.readableLength + stdout.writableLength).toBeLessThan(1024 * 1024);
    // Read, and the rest comes through, whole.
    engine.end();
    let read = 0;
    for await (const piece of stdout) read += (piece as Buffer).length;
    expect(read).toBe(frames * 64 * 1024);
  });
});
