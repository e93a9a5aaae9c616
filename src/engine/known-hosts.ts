// Which public keys a known_hosts file accepts for a host, as OpenSSH reads it: plain and hashed
// (|1|salt|hmac) host names, [host]:port for ports other than 22, * and ? patterns, ! negations,
// and @revoked lines. The engine's host key is checked against these before any byte of the
// Engine API (root on that machine) is sent.
//
// Why by hand: ssh2 leaves host-key checking to its caller, and npm has no maintained known_hosts
// matcher (hashed names, negations, markers); one that reads a line differently from OpenSSH would
// accept a key the user's own ssh refuses. 70 lines, each form unit-tested (engine-known-hosts).
import crypto from "node:crypto";

export interface KnownHostKey {
  /** "ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa" ... */
  type: string;
  /** The raw public key blob, as the server presents it in the key exchange. */
  blob: Buffer;
}

interface KnownHostsMatch {
  accepted: KnownHostKey[];
  revoked: KnownHostKey[];
}

/** Parses "ssh-ed25519 AAAA... [comment]" (a known_hosts line without host names, or a .pub file). */
export function parsePublicKeyLine(line: string): KnownHostKey | undefined {
  const [type, data] = line.trim().split(/\s+/);
  if (!type || !data || !/^[A-Za-z0-9+/]+=*$/.test(data)) return undefined;
  const blob = Buffer.from(data, "base64");
  // The blob starts with its own type name: a key pasted under the wrong type is no match.
  const nameLength = blob.length >= 4 ? blob.readUInt32BE(0) : -1;
  if (nameLength < 0 || blob.subarray(4, 4 + nameLength).toString("latin1") !== type) return undefined;
  return { type, blob };
}

export function knownHostKeys(text: string, host: string, port: number): KnownHostsMatch {
  const name = port === 22 ? host : `[${host}]:${port}`;
  const result: KnownHostsMatch = { accepted: [], revoked: [] };
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const fields = line.split(/\s+/);
    const marker = fields[0]!.startsWith("@") ? fields.shift() : undefined;
    if (marker && marker !== "@revoked") continue; // @cert-authority: host certificates are not supported
    const patterns = fields.shift();
    const key = parsePublicKeyLine(fields.join(" "));
    if (!patterns || !key || !hostMatches(patterns, name)) continue;
    (marker === "@revoked" ? result.revoked : result.accepted).push(key);
  }
  return result;
}

function hostMatches(patterns: string, name: string): boolean {
  if (patterns.startsWith("|1|")) return hashedMatches(patterns, name);
  let matched = false;
  for (const pattern of patterns.split(",")) {
    const negated = pattern.startsWith("!");
    if (!globMatches(negated ? pattern.slice(1) : pattern, name)) continue;
    if (negated) return false;
    matched = true;
  }
  return matched;
}

function hashedMatches(entry: string, name: string): boolean {
  const [, , salt, hash] = entry.split("|");
  if (!salt || !hash) return false;
  const mac = crypto.createHmac("sha1", Buffer.from(salt, "base64")).update(name).digest();
  const expected = Buffer.from(hash, "base64");
  return expected.length === mac.length && crypto.timingSafeEqual(expected, mac);
}

function globMatches(pattern: string, name: string): boolean {
  const re = pattern
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${re}$`, "i").test(name);
}
