// The networks this host reaches without a router, as its routing table says (Linux's
// /proc/net/route and /proc/net/ipv6_route). An interface's own prefix is not all of them: an
// address given as a /32 or a /128 (DHCPv6 on a cloud VPC, point-to-point links) comes with an
// on-link route for the real network, and a VPN adds routes for the networks behind it. Their
// addresses are the host's neighbours, public or not (review, session 45: a /128 host reached a
// neighbour on its /64 through the proxy).
//
// Not counted: default routes, and on-link routes shorter than /8 (IPv4) or /32 (IPv6): that is a
// tunnel's way to the whole internet (WireGuard's `0.0.0.0/1` and `128.0.0.0/1`), not a network
// beside the host. IPv4's file lists the main table only: an on-link route kept in another table
// (policy routing) is not seen (documented in security.md; IPv6's file lists every table). Routes through a gateway are the internet's (or a VPN's: its private ranges
// are refused as ranges). Where the files cannot be read (not Linux), there is nothing to add.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { readAll } from "../util/read-fd.js";

const RTF_UP = 0x1;
const RTF_GATEWAY = 0x2;
const RTF_REJECT = 0x200;
const MIN_IPV4_PREFIX = 8;
const MIN_IPV6_PREFIX = 32;
/** The most of a routing file read, every second (~7,000 routes; a host with a full BGP table is not a sandbox-run host). */
const MAX_ROUTE_FILE_BYTES = 1024 * 1024;

/** The on-link networks of this host's routing tables, as CIDR text. */
export function onLinkRoutes(procRoot = "/proc"): string[] {
  return [
    ...ipv4Routes(read(path.join(procRoot, "net/route"))),
    ...ipv6Routes(read(path.join(procRoot, "net/ipv6_route"))),
  ];
}

function read(file: string): string {
  try {
    const fd = fs.openSync(file, "r");
    try {
      return readAll(fd, MAX_ROUTE_FILE_BYTES).toString("latin1");
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return "";
  }
}

const onLink = (flags: number) => (flags & RTF_UP) !== 0 && (flags & (RTF_GATEWAY | RTF_REJECT)) === 0;

/** "Iface Destination Gateway Flags RefCnt Use Metric Mask ...": addresses as the host's u32, in hex. */
function ipv4Routes(text: string): string[] {
  const routes: string[] = [];
  for (const line of text.split("\n").slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (fields.length < 8) continue;
    const [, destination = "", , flags = "", , , , mask = ""] = fields;
    if (!/^[0-9A-Fa-f]{8}$/.test(destination) || !/^[0-9A-Fa-f]{8}$/.test(mask)) continue;
    if (!onLink(Number.parseInt(flags, 16))) continue;
    const prefix = countBits(Number.parseInt(mask, 16));
    if (prefix < MIN_IPV4_PREFIX) continue;
    routes.push(`${ipv4Text(Number.parseInt(destination, 16))}/${prefix}`);
  }
  return routes;
}

/** "dest prefix src prefix nexthop metric refcnt use flags iface", all hex. */
function ipv6Routes(text: string): string[] {
  const routes: string[] = [];
  for (const line of text.split("\n")) {
    const fields = line.trim().split(/\s+/);
    if (fields.length < 10 || !/^[0-9a-f]{32}$/.test(fields[0]!)) continue;
    const prefix = Number.parseInt(fields[1]!, 16);
    if (!onLink(Number.parseInt(fields[8]!, 16)) || !/^0{32}$/.test(fields[4]!)) continue;
    if (!(prefix >= MIN_IPV6_PREFIX && prefix <= 128)) continue;
    routes.push(`${fields[0]!.match(/.{4}/g)!.join(":")}/${prefix}`);
  }
  return routes;
}

/** The kernel prints a network-order address as a u32 of this host's byte order. */
function ipv4Text(value: number): string {
  const bytes = [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255];
  return (os.endianness() === "LE" ? bytes.reverse() : bytes).join(".");
}

function countBits(value: number): number {
  let bits = 0;
  for (let v = value >>> 0; v !== 0; v >>>= 1) bits += v & 1;
  return bits;
}
