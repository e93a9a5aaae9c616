// The controller's watch on its own HTTP/2 output (src/relay/goaway-watch.ts): frames pass through
// unchanged, and a GOAWAY's error code is reported however the bytes are split into chunks.
import { describe, expect, it } from "vitest";
import { watchOutgoingGoaway } from "../../src/relay/goaway-watch.js";

function frame(type: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  return Buffer.concat([header, payload]);
}

const goaway = (code: number) => {
  const payload = Buffer.alloc(8 + 5);
  payload.writeUInt32BE(3, 0);
  payload.writeUInt32BE(code, 4);
  payload.write("debug", 8);
  return frame(0x7, payload);
};

/** Writes `bytes` in chunks of `size`; resolves with the codes reported and the bytes passed on. */
async function feed(bytes: Buffer, size: number): Promise<{ codes: number[]; out: Buffer }> {
  const codes: number[] = [];
  const watch = watchOutgoingGoaway((code) => codes.push(code));
  const out: Buffer[] = [];
  watch.on("data", (chunk: Buffer) => out.push(chunk));
  for (let at = 0; at < bytes.length; at += size) watch.write(bytes.subarray(at, at + size));
  watch.end();
  await new Promise((resolve) => watch.once("end", resolve));
  return { codes, out: Buffer.concat(out) };
}

describe("watchOutgoingGoaway", () => {
  // A GOAWAY's bytes inside a DATA frame's payload are data, not a frame.
  const stream = Buffer.concat([
    frame(0x4, Buffer.alloc(6)),
    frame(0x0, goaway(9)),
    frame(0x8, Buffer.alloc(4)),
    frame(0x0, Buffer.alloc(0)),
    goaway(6),
    frame(0x6, Buffer.alloc(8)),
  ]);

  it.each([1, 2, 7, 9, 17, stream.length])("reports each GOAWAY's code once, in chunks of %i bytes", async (size) => {
    const { codes, out } = await feed(stream, size);
    expect(codes).toEqual([6]);
    expect(out.equals(stream)).toBe(true);
  });

  it("reports nothing for a stream without a GOAWAY", async () => {
    const { codes } = await feed(Buffer.concat([frame(0x4, Buffer.alloc(0)), frame(0x1, Buffer.alloc(30))]), 5);
    expect(codes).toEqual([]);
  });
});
