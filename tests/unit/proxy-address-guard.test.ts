// The address ranges the egress proxy refuses after resolving a name, in both IP families
// and the IPv6 forms that smuggle an IPv4 address.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { canonicalAddress, classifyAddress, createAddressGuard } from "../../src/proxy/address-guard.js";
import { onLinkRoutes } from "../../src/proxy/on-link-routes.js";
import { ipv6ToGroups } from "../../src/util/ip-address.js";

describe("classifyAddress", () => {
  it.each([
    ["0.0.0.0", "unspecified (this network)"],
    ["10.1.2.3", "private network"],
    ["100.64.0.1", "shared address space (CGNAT)"],
    ["100.127.255.255", "shared address space (CGNAT)"],
    ["127.0.0.1", "loopback"],
    ["127.255.0.9", "loopback"],
    ["169.254.169.254", "link-local (metadata services)"],
    ["172.16.0.1", "private network"],
    ["172.31.255.255", "private network"],
    ["192.168.1.1", "private network"],
    ["224.0.0.251", "multicast"],
    ["255.255.255.255", "reserved / broadcast"],
    ["::", "unspecified"],
    ["::1", "loopback"],
    ["fc00::1", "private network (unique-local)"],
    ["fd12:3456::1", "private network (unique-local)"],
    ["fe80::1", "link-local"],
    ["ff02::1", "multicast"],
    ["::ffff:127.0.0.1", "loopback (IPv4-mapped)"],
    ["::ffff:7f00:1", "loopback (IPv4-mapped)"],
    ["::ffff:10.0.0.1", "private network (IPv4-mapped)"],
    ["::ffff:169.254.169.254", "link-local (metadata services) (IPv4-mapped)"],
    ["64:ff9b::a9fe:a9fe", "link-local (metadata services) (NAT64)"],
    ["2002:c0a8:0101::1", "private network (6to4)"],
    ["::127.0.0.1", "IPv4-compatible / reserved"],
  ])("refuses %s (%s)", (address, name) => {
    expect(classifyAddress(address)).toBe(name);
  });

  it.each([
    "104.16.0.1",
    "172.32.0.1",
    "100.128.0.1",
    "203.0.113.80",
    "2606:4700::6810:1",
    "::ffff:104.16.0.1",
    "2002:6810:0001::1",
  ])("allows the public address %s", (address) => {
    expect(classifyAddress(address)).toBeUndefined();
  });

  it("refuses strings that are not addresses", () => {
    expect(classifyAddress("registry.npmjs.org")).toBe("not an IP address");
  });
});

describe("ipv6 parsing", () => {
  it("expands :: and a dotted-quad tail", () => {
    expect(ipv6ToGroups("::ffff:1.2.3.4")).toEqual([0, 0, 0, 0, 0, 0xffff, 0x0102, 0x0304]);
    expect(ipv6ToGroups("2001:db8::1")).toEqual([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1]);
    expect(ipv6ToGroups("[fe80::1%eth0]")).toEqual([0xfe80, 0, 0, 0, 0, 0, 0, 1]);
    expect(ipv6ToGroups("1.2.3.4")).toBeUndefined();
  });

  it("canonicalises IPv4-mapped addresses to IPv4", () => {
    expect(canonicalAddress("::ffff:192.0.2.2")).toBe("192.0.2.2");
    expect(canonicalAddress("2001:DB8::1")).toBe("2001:db8:0:0:0:0:0:1");
  });
});

describe("createAddressGuard", () => {
  it("refuses the networks this host is on, public ones too: LAN and VPC neighbours, the router, a docker bridge's global IPv6 prefix", () => {
    const guard = createAddressGuard({
      hostAddresses: ["198.51.100.7", "2001:db8:1::1"],
      hostNetworks: ["198.51.100.7/24", "2001:db8:1::1/64"],
    });
    expect(guard("198.51.100.1")).toBe("on a network of this host (198.51.100.7/24)");
    expect(guard("::ffff:198.51.100.200")).toBe("on a network of this host (198.51.100.7/24)");
    expect(guard("2001:db8:1::242:ac11:3")).toBe("on a network of this host (2001:db8:1::1/64)");
    expect(guard("198.51.100.7")).toBe("an address of this host");
    expect(guard("198.51.101.1")).toBeUndefined();
    expect(guard("2001:db8:2::1")).toBeUndefined();
    // Forms that carry an IPv4 address for a translator to reach are judged by it (review).
    expect(guard("64:ff9b::c633:6407")).toBe("an address of this host, inside 64:ff9b::c633:6407");
    expect(guard("2002:c633:6407::")).toBe("an address of this host, inside 2002:c633:6407::");
    expect(guard("::ffff:0:198.51.100.7")).toContain("an address of this host, inside");
    expect(guard("64:ff9b::c633:6401")).toBe("on a network of this host (198.51.100.7/24), inside 64:ff9b::c633:6401");
    expect(guard("2002:c633:6401::")).toContain("on a network of this host (198.51.100.7/24)");
    expect(guard("::ffff:0:c633:6401")).toContain("on a network of this host (198.51.100.7/24)");
    expect(guard("64:ff9b::c633:6501")).toBeUndefined();
  });

  it("also refuses the host's own public addresses, in either notation", () => {
    const guard = createAddressGuard({ hostAddresses: ["198.51.100.7", "2001:db8::7"] });
    expect(guard("198.51.100.7")).toBe("an address of this host");
    expect(guard("::ffff:198.51.100.7")).toBe("an address of this host");
    expect(guard("2001:0db8:0:0::7")).toBe("an address of this host");
    expect(guard("198.51.100.8")).toBeUndefined();
    expect(guard("10.0.0.1")).toBe("private network");
  });
});

describe("on-link routes (review, session 45: a host with a /128 or /32 address reached its neighbours)", () => {
  // As Linux prints them: a default route, a docker bridge, a /32 host's on-link /24, a route
  // through a gateway, WireGuard's half-internet routes, a reject route; IPv6 a /128 host's /64.
  const ROUTE = [
    "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT",
    "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0",
    "docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0",
    "eth0\t006433C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0",
    "tun0\t000071CB\t010071CB\t0003\t0\t0\t0\t00FFFFFF\t0\t0\t0",
    "wg0\t00000000\t00000000\t0001\t0\t0\t0\t00000080\t0\t0\t0",
    "wg0\t00000080\t00000000\t0001\t0\t0\t0\t00000080\t0\t0\t0",
    "eth1\t0000000B\t00000000\t0201\t0\t0\t0\t000000FF\t0\t0\t0",
    "",
  ].join("\n");
  const IPV6_ROUTE = [
    "20010db8000100000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0",
    "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000003 00000000 00000003     eth0",
    "20010db8000200000000000000000000 30 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000003 00000000 00000003     eth0",
    "ff000000000000000000000000000000 08 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000002 00000000 00000001     eth0",
    "",
  ].join("\n");
  const procWith = (route: string, ipv6Route: string) => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-proc-"));
    fs.mkdirSync(path.join(root, "net"));
    fs.writeFileSync(path.join(root, "net/route"), route);
    fs.writeFileSync(path.join(root, "net/ipv6_route"), ipv6Route);
    return root;
  };

  it("are the networks without a router: not the default, a gateway's, a reject route's or a tunnel's half of the internet", () => {
    const root = procWith(ROUTE, IPV6_ROUTE);
    try {
      // (Little-endian hosts, as x86-64 and arm64 are: the kernel prints the address as its u32.)
      const expected = ["172.17.0.0/16", "198.51.100.0/24", "2001:0db8:0001:0000:0000:0000:0000:0000/64"];
      expect(onLinkRoutes(root)).toEqual(expected);
    } finally {
      fs.rmSync(root, { recursive: true });
    }
  });

  it("the guard refuses them, and reads them again as the host changes (a view taken once missed an address gained mid-run)", async () => {
    const root = procWith("", "");
    try {
      const guard = createAddressGuard({ hostAddresses: [], procRoot: root });
      expect(guard("198.51.100.9")).toBeUndefined();
      expect(guard("2001:db8:1::9")).toBeUndefined();
      fs.writeFileSync(path.join(root, "net/route"), ROUTE);
      fs.writeFileSync(path.join(root, "net/ipv6_route"), IPV6_ROUTE);
      await expect
        .poll(() => guard("198.51.100.9"), { timeout: 5_000, interval: 200 })
        .toBe("on a network of this host (198.51.100.0/24)");
      expect(guard("2001:db8:1::9")).toMatch(/^on a network of this host/);
      // A network behind a gateway, and the internet a tunnel carries, stay reachable.
      expect(guard("203.113.0.9")).toBeUndefined();
      expect(guard("2001:db8:2::9")).toBeUndefined();
      expect(guard("93.184.215.14")).toBeUndefined();
    } finally {
      fs.rmSync(root, { recursive: true });
    }
  });
});

describe("IPv6 forms that embed an IPv4 address, and metadata endpoints outside 169.254/16", () => {
  it.each([
    // IPv4-translated (::ffff:0:0:0/96): judged by the embedded address.
    ["::ffff:0:169.254.169.254", "link-local (metadata services) (IPv4-translated)"],
    ["::ffff:0:a9fe:a9fe", "link-local (metadata services) (IPv4-translated)"],
    ["::ffff:0:127.0.0.1", "loopback (IPv4-translated)"],
    // Local-use NAT64 (RFC 8215): refused whatever it embeds.
    ["64:ff9b:1::a9fe:a9fe", "local-use NAT64 (64:ff9b:1::/48)"],
    ["64:ff9b:1:ffff::68:1001", "local-use NAT64 (64:ff9b:1::/48)"],
    ["64:ff9b::7f00:1", "loopback (NAT64)"],
    ["2002:a9fe:a9fe::1", "link-local (metadata services) (6to4)"],
    // Teredo: the client address is the last 32 bits inverted (127.0.0.1 -> 80ff:fffe).
    ["2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback (Teredo client)"],
    ["2001:0:4136:e378:8000:63bf:5601:5601", "link-local (metadata services) (Teredo client)"],
    // ... and the server's is in groups 2-3 (10.0.0.1), with a public client (8.16.0.1).
    ["2001:0:a00:1:0:0:f7ef:fffe", "private network (Teredo server)"],
    // Azure's WireServer, in both notations.
    ["168.63.129.16", "Azure WireServer (metadata)"],
    ["::ffff:168.63.129.16", "Azure WireServer (metadata) (IPv4-mapped)"],
    // Other clouds' metadata endpoints, refused by the ranges they sit in.
    ["100.100.100.200", "shared address space (CGNAT)"],
    ["fd00:ec2::254", "private network (unique-local)"],
    ["192.0.0.192", "IETF protocol assignments"],
  ])("refuses %s (%s)", (address, name) => {
    expect(classifyAddress(address)).toBe(name);
  });

  it.each([
    "2001:0:4136:e378:8000:63bf:3fff:fdd2", // Teredo, server 65.54.227.120, client 192.0.2.45
    "::ffff:0:104.16.0.1",
    "64:ff9b::104.16.0.1",
    "168.63.129.17",
    "2001:db8::1",
  ])("allows %s", (address) => {
    expect(classifyAddress(address)).toBeUndefined();
  });
});
