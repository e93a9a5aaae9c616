// The few ASN.1 DER encodings an X.509 certificate needs, and nothing else. Node's crypto
// makes the keys, the SubjectPublicKeyInfo and the signatures; only the certificate's own
// structure is written here. Every function returns one complete TLV.
//
// Why by hand: this only writes (it never parses anything the sandbox sent), and a certificate
// library costs more than what it would replace: node-forge alone takes ~45 ms of CPU to load (a run
// with secrets makes its CA in less) and brings its own crypto and ASN.1 parser; @peculiar/x509
// needs an ASN.1 schema stack and reflect-metadata.

function tlv(tag: number, content: Buffer): Buffer {
  const n = content.length;
  let length: Buffer;
  if (n < 0x80) length = Buffer.from([n]);
  else {
    const bytes: number[] = [];
    for (let rest = n; rest > 0; rest = Math.floor(rest / 256)) bytes.unshift(rest & 0xff);
    length = Buffer.from([0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([Buffer.from([tag]), length, content]);
}

export const sequence = (...items: Buffer[]): Buffer => tlv(0x30, Buffer.concat(items));
export const set = (...items: Buffer[]): Buffer => tlv(0x31, Buffer.concat(items));
export const boolean = (value: boolean): Buffer => tlv(0x01, Buffer.from([value ? 0xff : 0x00]));
export const octetString = (bytes: Buffer): Buffer => tlv(0x04, bytes);
export const utf8String = (text: string): Buffer => tlv(0x0c, Buffer.from(text, "utf8"));
/** BIT STRING with no unused bits (signatures, key identifiers). */
export const bitString = (bytes: Buffer): Buffer => tlv(0x03, Buffer.concat([Buffer.from([0]), bytes]));
/** [n] EXPLICIT: a constructed context tag around one complete element. */
export const explicit = (n: number, inner: Buffer): Buffer => tlv(0xa0 | n, inner);
/** [n] IMPLICIT over a primitive value (e.g. a GeneralName's dNSName, IA5String content). */
export const implicitPrimitive = (n: number, content: Buffer): Buffer => tlv(0x80 | n, content);
/** [n] IMPLICIT over a constructed value (e.g. nameConstraints' permittedSubtrees). */
export const implicitConstructed = (n: number, ...items: Buffer[]): Buffer => tlv(0xa0 | n, Buffer.concat(items));

/** A non-negative INTEGER from big-endian bytes, in its minimal two's-complement form. */
export function unsignedInteger(bytes: Buffer): Buffer {
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start++;
  const trimmed = bytes.subarray(start);
  return tlv(0x02, trimmed[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), trimmed]) : trimmed);
}

export const smallInteger = (value: number): Buffer => unsignedInteger(Buffer.from([value]));

export function objectIdentifier(dotted: string): Buffer {
  const parts = dotted.split(".").map(Number);
  const bytes: number[] = [parts[0]! * 40 + parts[1]!];
  for (const part of parts.slice(2)) {
    const base128: number[] = [part & 0x7f];
    for (let rest = Math.floor(part / 128); rest > 0; rest = Math.floor(rest / 128))
      base128.unshift((rest & 0x7f) | 0x80);
    bytes.push(...base128);
  }
  return tlv(0x06, Buffer.from(bytes));
}

/** X.509 Time: UTCTime through 2049, GeneralizedTime after (RFC 5280 4.1.2.5). */
export function time(date: Date): Buffer {
  const iso = date.toISOString(); // 2026-11-30T12:34:56.789Z
  const digits = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`;
  return date.getUTCFullYear() < 2050
    ? tlv(0x17, Buffer.from(digits.slice(2), "ascii"))
    : tlv(0x18, Buffer.from(digits, "ascii"));
}
