// File names are bytes; the host's code keys trees by strings. Node decodes a name that is not
// UTF-8 with U+FFFD in place of each bad byte, and a real name may hold U+FFFD itself: a sandbox's
// `report_\xff.txt` and a user's `report_\u{FFFD}.txt` were then one path, and restoring the first
// removed the second; a returned tar's valid U+FFFD name was taken for a bad one and left out,
// which the apply read as a deletion (review, session 29). Here each byte that is not part of valid
// UTF-8 becomes a lone low surrogate U+DC80-U+DCFF (Python's "surrogateescape"): no valid name
// decodes to one, so the string is unique to its bytes, and nameBytes() gives the bytes back.

/** The name as a string unique to its bytes; `exact` when the bytes are valid UTF-8. */
export function decodeName(raw: Uint8Array, start = 0, end = raw.length): { name: string; exact: boolean } {
  const buffer = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  const plain = buffer.toString("utf8", start, end);
  // Node's decoding is exact when it replaced nothing (or what it "replaced" was a real U+FFFD).
  if (!plain.includes("\uFFFD") || Buffer.from(plain, "utf8").equals(buffer.subarray(start, end)))
    return { name: plain, exact: true };
  let name = "";
  for (let i = start; i < end; ) {
    const length = sequenceLength(buffer, i, end);
    if (length === 0) {
      name += String.fromCharCode(0xdc00 + buffer[i]!);
      i++;
    } else {
      name += buffer.toString("utf8", i, i + length);
      i += length;
    }
  }
  return { name, exact: false };
}

/** Whether a string holds a byte decodeName() could not decode (a lone U+DC80-U+DCFF). */
export function hasUndecodedBytes(name: string): boolean {
  return LONE_ESCAPE.test(name);
}

/** The bytes a decodeName() string stands for: the string itself when it holds no escaped byte. */
export function nameBytes(name: string): string | Buffer {
  if (!hasUndecodedBytes(name)) return name;
  const parts: Buffer[] = [];
  let run = 0;
  for (let i = 0; i < name.length; i++) {
    const unit = name.charCodeAt(i);
    const lone = unit >= 0xdc80 && unit <= 0xdcff && !(i > 0 && isHigh(name.charCodeAt(i - 1)));
    if (!lone) continue;
    parts.push(Buffer.from(name.slice(run, i), "utf8"), Buffer.of(unit - 0xdc00));
    run = i + 1;
  }
  parts.push(Buffer.from(name.slice(run), "utf8"));
  return Buffer.concat(parts);
}

const LONE_ESCAPE = /(?<![\uD800-\uDBFF])[\uDC80-\uDCFF]/;
const isHigh = (unit: number) => unit >= 0xd800 && unit <= 0xdbff;

/** The length of the valid UTF-8 sequence at `i` (RFC 3629: no overlong form, surrogate or > U+10FFFF), 0 if none. */
function sequenceLength(bytes: Buffer, i: number, end: number): number {
  const lead = bytes[i]!;
  if (lead < 0x80) return 1;
  const length =
    lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
  if (length === 0 || i + length > end) return 0;
  let point = lead & (0xff >> (length + 1));
  for (let k = 1; k < length; k++) {
    const next = bytes[i + k]!;
    if ((next & 0xc0) !== 0x80) return 0;
    point = (point << 6) | (next & 0x3f);
  }
  if (length === 3 && (point < 0x800 || (point >= 0xd800 && point <= 0xdfff))) return 0;
  if (length === 4 && (point < 0x10000 || point > 0x10ffff)) return 0;
  return length;
}
