// Which resolved addresses the egress proxy refuses to connect to. An allowed name is only
// half the check: a name can resolve (or be re-pointed, DNS rebinding) to the host itself,
// its LAN, or a cloud metadata service. The proxy resolves on the host, checks every address
// here, and connects to the address it checked, never to the name.
//
// Refused: unspecified, loopback, private (RFC 1918 / unique-local), shared CGNAT space,
// link-local (169.254/16 holds the metadata services), multicast, reserved/broadcast, the
// host's own interface addresses, and every address on the networks those interfaces are on or
// its routing table reaches without a router (on-link-routes.ts). Cloud metadata endpoints
// outside 169.254/16: Azure's WireServer 168.63.129.16 is listed on its own; Alibaba's
// 100.100.100.200 (CGNAT), AWS's IPv6 fd00:ec2::254 (unique-local) and Oracle's 192.0.0.192 (IETF
// protocol assignments) fall in refused ranges already. IPv6 forms that embed an IPv4 address are judged by that address:
// IPv4-mapped (::ffff:0:0/96), IPv4-translated (::ffff:0:0:0/96), NAT64 (64:ff9b::/96), 6to4
// (2002::/16) and Teredo (2001::/32, both its server and its client address); the local-use
// NAT64 prefix 64:ff9b:1::/48 is refused outright (its translator is on the local network, and
// where the IPv4 address sits depends on a prefix length only that network knows).
// Documentation ranges (192.0.2/24, 203.0.113/24, ...) are deliberately not in the list: they
// are not the host's or its LAN's by definition, and some networks (this project's CI among
// them) answer public names with them.
//
// Why by hand: the refusal has to look inside IPv6 forms that carry an IPv4 address. ipaddr.js
// labels 6to4, Teredo and NAT64 addresses by range without judging the address inside, and Node's
// net.BlockList matches IPv4-mapped addresses but not 6to4 or Teredo: either would let a name that
// resolves to 2002:0a00:0001:: reach 10.0.0.1.
import net from "node:net";
import os from "node:os";
import { performance } from "node:perf_hooks";
import { classifyIpv4, ipv4ToInt, ipv6ToGroups } from "../util/ip-address.js";
import { onLinkRoutes } from "./on-link-routes.js";

/** Returns why an address is refused, or undefined when it may be connected to. */
export type AddressGuard = (address: string) => string | undefined;

function groupsToIpv4(high: number, low: number): number {
  return high * 65536 + low;
}

function classifyIpv6(g: number[]): string | undefined {
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = g;
  const upperZero = g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0;
  if (upperZero && g5 === 0 && g6 === 0 && g7 === 0) return "unspecified";
  if (upperZero && g5 === 0 && g6 === 0 && g7 === 1) return "loopback";
  // ::ffff:a.b.c.d (IPv4-mapped): the kernel connects to the IPv4 address.
  if (upperZero && g5 === 0xffff) return embedded(groupsToIpv4(g6, g7), "IPv4-mapped");
  // ::a.b.c.d (deprecated IPv4-compatible) and the rest of ::/96: nothing public lives there.
  if (upperZero && g5 === 0) return "IPv4-compatible / reserved";
  // ::ffff:0:a.b.c.d (IPv4-translated, SIIT): a translator forwards to the IPv4 address.
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0xffff && g5 === 0) {
    return embedded(groupsToIpv4(g6, g7), "IPv4-translated");
  }
  // 64:ff9b::/96 NAT64: a NAT64 gateway would forward to the embedded IPv4 address.
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) {
    return embedded(groupsToIpv4(g6, g7), "NAT64");
  }
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 1) return "local-use NAT64 (64:ff9b:1::/48)";
  // 2002::/16 6to4: the IPv4 address sits in the second and third groups.
  if (g0 === 0x2002) return embedded(groupsToIpv4(g1, g2), "6to4");
  // 2001:0::/32 Teredo: the server's IPv4 address in groups 2-3, the client's in the last
  // 32 bits, inverted; a relay delivers to the client.
  if (g0 === 0x2001 && g1 === 0) {
    return embedded(~groupsToIpv4(g6, g7) >>> 0, "Teredo client") ?? embedded(groupsToIpv4(g2, g3), "Teredo server");
  }
  if ((g0 & 0xfe00) === 0xfc00) return "private network (unique-local)";
  if ((g0 & 0xffc0) === 0xfe80) return "link-local";
  if ((g0 & 0xffc0) === 0xfec0) return "site-local";
  if ((g0 & 0xff00) === 0xff00) return "multicast";
  return undefined;
}

/**
 * The IPv4 addresses an IPv6 address carries for a translator or relay to reach (the forms
 * classifyIpv6 judges by them), as dotted text; none for other addresses.
 */
function embeddedIpv4Addresses(address: string): string[] {
  const g = ipv6ToGroups(address);
  if (!g) return [];
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = g;
  const found: number[] = [];
  const upperZero = g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0;
  if ((upperZero && g4 === 0 && g5 === 0xffff) || (upperZero && g4 === 0xffff && g5 === 0)) {
    found.push(groupsToIpv4(g6, g7));
  }
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) found.push(groupsToIpv4(g6, g7));
  if (g0 === 0x2002) found.push(groupsToIpv4(g1, g2));
  if (g0 === 0x2001 && g1 === 0) found.push(~groupsToIpv4(g6, g7) >>> 0, groupsToIpv4(g2, g3));
  return found.map((v4) => [v4 >>> 24, (v4 >>> 16) & 255, (v4 >>> 8) & 255, v4 & 255].join("."));
}

function embedded(v4: number, form: string): string | undefined {
  const inner = classifyIpv4(v4);
  return inner ? `${inner} (${form})` : undefined;
}

/** Why an address belongs to a refused range, or undefined for a public address. */
export function classifyAddress(address: string): string | undefined {
  const v4 = ipv4ToInt(address);
  if (v4 !== undefined) return classifyIpv4(v4);
  const groups = ipv6ToGroups(address);
  if (groups) return classifyIpv6(groups);
  return "not an IP address";
}

/** A canonical text form, so "::ffff:192.0.2.2" and "192.0.2.2" compare equal. */
export function canonicalAddress(address: string): string {
  if (net.isIPv4(address)) return address;
  const g = ipv6ToGroups(address);
  if (!g) return address;
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) {
    const v4 = groupsToIpv4(g[6]!, g[7]!);
    return [v4 >>> 24, (v4 >>> 16) & 255, (v4 >>> 8) & 255, v4 & 255].join(".");
  }
  return g.map((x) => x.toString(16)).join(":");
}

/** Every address of this host's interfaces (a public address of the host is still the host). */
function hostInterfaceAddresses(): string[] {
  return Object.values(os.networkInterfaces())
    .flat()
    .filter((i): i is os.NetworkInterfaceInfo => Boolean(i))
    .map((i) => i.address);
}

/**
 * The networks this host's interfaces are on (`192.0.2.0/24`, a docker bridge's global IPv6
 * /64): their other addresses are the host's LAN, VPC neighbours, its router and its containers,
 * public or not. Loopback is refused as a range already.
 */
function hostInterfaceNetworks(): string[] {
  return Object.values(os.networkInterfaces())
    .flat()
    .filter((i): i is os.NetworkInterfaceInfo => Boolean(i) && !i!.internal && Boolean(i!.cidr))
    .map((i) => i.cidr!);
}

/** The address as 128 bits (IPv4 as IPv4-mapped), or undefined. */
function bitsOf(address: string): bigint | undefined {
  const v4 = ipv4ToInt(address);
  if (v4 !== undefined) return (0xffffn << 32n) | BigInt(v4);
  const groups = ipv6ToGroups(address);
  return groups?.reduce((acc, g) => (acc << 16n) | BigInt(g), 0n);
}

interface Network {
  cidr: string;
  base: bigint;
  mask: bigint;
}

function networkOf(cidr: string): Network | undefined {
  const [address = "", length = ""] = cidr.split("/");
  const bits = bitsOf(address);
  const prefix = Number(length) + (net.isIPv4(address) ? 96 : 0);
  if (bits === undefined || !Number.isInteger(prefix) || prefix < 0 || prefix > 128) return undefined;
  const mask = prefix === 0 ? 0n : ((1n << 128n) - 1n) ^ ((1n << BigInt(128 - prefix)) - 1n);
  return { cidr, base: bits & mask, mask };
}

/** How long the host's addresses and routes, read once, stand for them (they change: a VPN comes up). */
const HOST_VIEW_TTL_MS = 1_000;

interface HostView {
  own: Set<string>;
  networks: Network[];
}

function hostView(addresses: readonly string[], cidrs: readonly string[]): HostView {
  return {
    own: new Set(addresses.map(canonicalAddress)),
    networks: cidrs.map(networkOf).filter((n): n is Network => n !== undefined),
  };
}

/**
 * The default guard: refused ranges, this host's own addresses, and the networks it is on (its
 * interfaces' and its on-link routes'), read again when a second has passed (a view taken when
 * the run's proxy started missed an address the host gained during the run: review, session 45).
 */
export function createAddressGuard(
  options: { hostAddresses?: readonly string[]; hostNetworks?: readonly string[]; procRoot?: string } = {},
): AddressGuard {
  const fixed = options.hostAddresses !== undefined && options.hostNetworks !== undefined;
  const read = () =>
    hostView(options.hostAddresses ?? hostInterfaceAddresses(), [
      ...(options.hostNetworks ?? [...hostInterfaceNetworks(), ...onLinkRoutes(options.procRoot)]),
    ]);
  let view = read();
  let readAt = performance.now();
  const current = (): HostView => {
    if (!fixed && performance.now() - readAt > HOST_VIEW_TTL_MS) {
      view = read();
      readAt = performance.now();
    }
    return view;
  };
  const ownOrOnLink = (canonical: string): string | undefined => {
    const { own, networks } = current();
    if (own.has(canonical)) return "an address of this host";
    const bits = bitsOf(canonical);
    const onLink = bits === undefined ? undefined : networks.find((n) => (bits & n.mask) === n.base);
    return onLink ? `on a network of this host (${onLink.cidr})` : undefined;
  };
  return (address) => {
    const range = classifyAddress(address);
    if (range) return range;
    const direct = ownOrOnLink(canonicalAddress(address));
    if (direct) return direct;
    // A form that carries an IPv4 address (NAT64, 6to4, SIIT, Teredo) is judged by it as well.
    for (const v4 of embeddedIpv4Addresses(address)) {
      const why = ownOrOnLink(v4);
      if (why) return `${why}, inside ${address}`;
    }
    return undefined;
  };
}
