// IP addresses as text: parsed into numbers (IPv4 as one unsigned 32-bit value, IPv6 as eight
// 16-bit groups) and IPv6 written back in its one canonical form. Shared by the egress proxy's
// address guard and the canonical spelling of hosts (host-name.ts).
import net from "node:net";

/** Parses dotted-quad IPv4 into an unsigned 32-bit number; undefined when it is not one. */
export function ipv4ToInt(address: string): number | undefined {
  if (!net.isIPv4(address)) return undefined;
  return address.split(".").reduce((acc, part) => acc * 256 + Number(part), 0);
}

/** Parses IPv6 (with `::` and an optional dotted-quad tail) into eight 16-bit groups. */
export function ipv6ToGroups(address: string): number[] | undefined {
  const bare = address.replace(/^\[|\]$/g, "").replace(/%.*$/, ""); // brackets, zone id
  if (!net.isIPv6(bare)) return undefined;
  let text = bare;
  const lastColon = text.lastIndexOf(":");
  const tail = text.slice(lastColon + 1);
  if (tail.includes(".")) {
    const v4 = ipv4ToInt(tail);
    if (v4 === undefined) return undefined;
    text = `${text.slice(0, lastColon + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const [head, rest] = text.includes("::") ? text.split("::") : [text, undefined];
  const parse = (s: string | undefined) => (s ? s.split(":").map((g) => parseInt(g, 16)) : []);
  const left = parse(head);
  const right = parse(rest);
  const fill = rest === undefined ? [] : new Array<number>(8 - left.length - right.length).fill(0);
  const groups = [...left, ...fill, ...right];
  return groups.length === 8 ? groups : undefined;
}

/** Eight 16-bit groups in RFC 5952 form: lower-case hex, the longest run of 2+ zero groups as `::`. */
export function formatIpv6(groups: readonly number[]): string {
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLength).join(":")}`;
}

interface Range4 {
  base: number;
  bits: number;
  name: string;
}

const IPV4_RANGES: Range4[] = [
  ["0.0.0.0", 8, "unspecified (this network)"],
  ["168.63.129.16", 32, "Azure WireServer (metadata)"],
  ["10.0.0.0", 8, "private network"],
  ["100.64.0.0", 10, "shared address space (CGNAT)"],
  ["127.0.0.0", 8, "loopback"],
  ["169.254.0.0", 16, "link-local (metadata services)"],
  ["172.16.0.0", 12, "private network"],
  ["192.0.0.0", 24, "IETF protocol assignments"],
  ["192.168.0.0", 16, "private network"],
  ["198.18.0.0", 15, "benchmarking network"],
  ["224.0.0.0", 4, "multicast"],
  ["240.0.0.0", 4, "reserved / broadcast"],
].map(([base, bits, name]) => ({ base: ipv4ToInt(base as string)!, bits: bits as number, name: name as string }));

function inRange4(value: number, range: Range4): boolean {
  const size = 2 ** (32 - range.bits);
  return value >= range.base && value < range.base + size;
}

/**
 * Which refused range an IPv4 address (as ipv4ToInt gives it) is in: the egress proxy never connects
 * there (proxy/address-guard.ts), and a policy that lists such an address is refused as it loads.
 */
export function classifyIpv4(value: number): string | undefined {
  return IPV4_RANGES.find((r) => inRange4(value, r))?.name;
}
