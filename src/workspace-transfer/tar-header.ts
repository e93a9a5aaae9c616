// Writes ustar headers (with a pax extended header in front where ustar cannot say it: long or
// non-ASCII names and link targets, sizes of 8 GiB and more, our own records). A few buffer
// writes per entry: packing a tree costs its reads, not a stream machinery per file.

/**
 * The pax record on a returned file entry that says its status has not changed since the copy-in
 * (header only, no content): images/pi/relay.mjs writes it, returned-tar.ts reads it.
 */
export const UNCHANGED_PAX_KEY = "SANDBOXRUN.unchanged";

interface TarHeader {
  name: string;
  type: "file" | "directory" | "symlink";
  mode: number;
  size?: number;
  mtimeMs?: number;
  linkname?: string;
  /** Extra pax records (e.g. UNCHANGED_PAX_KEY). */
  pax?: Record<string, string>;
}

const TYPE_FLAG = { file: "0", directory: "5", symlink: "2" } as const;
const USTAR_MAX_SIZE = 8 * 1024 ** 3;
const BLOCK = 512;

/** The header block(s) of one entry: a pax header where needed, then the ustar header. */
export function tarHeader(header: TarHeader): Buffer {
  const size = header.size ?? 0;
  const records: Record<string, string> = { ...header.pax };
  const linkname = header.linkname ?? "";
  if (!fitsUstar(header.name)) records.path = header.name;
  if (!fitsUstar(linkname)) records.linkpath = linkname;
  if (size >= USTAR_MAX_SIZE) records.size = String(size);
  const ustar = ustarBlock(
    ascii(header.name),
    header.type,
    header.mode,
    size >= USTAR_MAX_SIZE ? 0 : size,
    header.mtimeMs,
    ascii(linkname),
  );
  if (Object.keys(records).length === 0) return ustar;
  const body = Buffer.from(
    Object.entries(records)
      .map(([k, v]) => paxRecord(k, v))
      .join(""),
    "utf8",
  );
  const paxHeader = ustarBlock("././@PaxHeader", "x", 0o644, body.length, header.mtimeMs, "");
  return Buffer.concat([paxHeader, body, padding(body.length), ustar]);
}

/** Zeros up to the next 512-byte boundary after `size` bytes of content. */
export function padding(size: number): Buffer {
  return Buffer.alloc((BLOCK - (size % BLOCK)) % BLOCK);
}

/** The end of an archive: two zero blocks. */
export const END_OF_ARCHIVE = Buffer.alloc(2 * BLOCK);

function fitsUstar(text: string): boolean {
  // ASCII within the 100-byte field (a NUL terminator is optional at exactly 100).
  return text.length <= 100 && /^[\x20-\x7e]*$/.test(text);
}

/** The ustar field's value (the pax record, if any, carries the real one). */
function ascii(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, "_").slice(0, 100);
}

function ustarBlock(
  name: string,
  type: TarHeader["type"] | "x",
  mode: number,
  size: number,
  mtimeMs: number | undefined,
  linkname: string,
): Buffer {
  const block = Buffer.alloc(BLOCK);
  block.write(name, 0, 100, "ascii");
  block.write(octal(mode & 0o7777, 7), 100);
  block.write(octal(0, 7), 108);
  block.write(octal(0, 7), 116);
  block.write(octal(size, 11), 124);
  block.write(octal(Math.max(0, Math.floor((mtimeMs ?? 0) / 1000)), 11), 136);
  block.write(type === "x" ? "x" : TYPE_FLAG[type], 156);
  block.write(linkname, 157, 100, "ascii");
  block.write("ustar\0", 257);
  block.write("00", 263);
  block.fill(" ", 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${octal(sum, 6)} `, 148);
  return block;
}

function octal(value: number, digits: number): string {
  return `${value.toString(8).padStart(digits, "0")}\0`;
}

/** "<length> <key>=<value>\n", where the length counts itself. */
function paxRecord(key: string, value: string): string {
  const rest = ` ${key}=${value}\n`;
  const restBytes = Buffer.byteLength(rest);
  let length = restBytes + 1;
  while (String(length).length + restBytes !== length) length = String(length).length + restBytes;
  return `${length}${rest}`;
}
