// One spelling per host: what the allow-list judges, what is resolved and what the events show.
// And the entries a policy may list, checked by the same rules the proxy applies.
import { describe, expect, it } from "vitest";
import { isSandboxRunError } from "../../src/errors.js";
import { loadPolicy, parsePolicy } from "../../src/policy/load-policy.js";
import { canonicalHost } from "../../src/util/host-name.js";
import { hostPatternProblem } from "../../src/util/host-pattern.js";
import { formatIpv6 } from "../../src/util/ip-address.js";

describe("canonicalHost", () => {
  it.each([
    ["Registry.NPMJS.org.", "name", "registry.npmjs.org"],
    ["localhost", "name", "localhost"],
    ["93.184.215.14", "ipv4", "93.184.215.14"],
    ["[0:0:0:0:0:0:0:1]", "ipv6", "::1"],
    ["0:0:0:0:0:0:0:1", "ipv6", "::1"],
    ["[2001:DB8:0:0:1:0:0:1]", "ipv6", "2001:db8::1:0:0:1"],
    ["[::ffff:127.0.0.1]", "ipv6", "::ffff:7f00:1"],
  ])("%s -> %s %s", (raw, kind, host) => {
    expect(canonicalHost(raw)).toEqual({ kind, host });
  });

  it.each([
    ["a..b.test", "labels of letters, digits and '-', none empty"],
    ["a.test..", "labels of letters, digits and '-', none empty"],
    ["", "1 to 253 characters"],
    [`${`${"a".repeat(63)}.`.repeat(4)}test`, "1 to 253 characters"],
    [`${"a".repeat(64)}.test`, "labels of letters"],
    ["0x7f.0.0.1", "non-standard spelling"],
    ["0177.0.0.1", "non-standard spelling"],
    ["2130706433", "non-standard spelling"],
    ["127.1", "non-standard spelling"],
    ["127.000.000.001", "non-standard spelling"],
    ["name.123", "last label must start with a letter"],
    ["[fe80::1%eth0]", "not an IPv6 address"],
    ["[127.0.0.1]", "not an IPv6 address"],
    ["user@host.test", "labels of letters"],
    ["host.test ", "labels of letters"],
  ])("refuses %j (%s)", (raw, problem) => {
    expect(canonicalHost(raw).problem).toContain(problem);
  });

  it("formats IPv6 the RFC 5952 way: longest zero run compressed, single zero groups kept", () => {
    expect(formatIpv6([0x2001, 0xdb8, 0, 1, 0, 0, 0, 1])).toBe("2001:db8:0:1::1");
    expect(formatIpv6([0x2001, 0xdb8, 0, 0, 1, 0, 0, 1])).toBe("2001:db8::1:0:0:1");
    expect(formatIpv6([1, 2, 3, 4, 5, 6, 7, 8])).toBe("1:2:3:4:5:6:7:8");
    expect(formatIpv6([0, 0, 0, 0, 0, 0, 0, 0])).toBe("::");
    expect(formatIpv6([1, 0, 2, 3, 4, 5, 6, 7])).toBe("1:0:2:3:4:5:6:7");
  });
});

describe("allow-list entries (policy schema)", () => {
  const withDomains = (allowedDomains: string[]) => ({
    ...JSON.parse(JSON.stringify(loadPolicy("workspace-write"))),
    network: "allowlist",
    allowedDomains,
  });
  const problemsOf = (allowedDomains: string[]): string[] => {
    try {
      parsePolicy(withDomains(allowedDomains), "test");
      return [];
    } catch (error) {
      if (!isSandboxRunError(error)) throw error;
      return error.shortMessage
        .split("\n")
        .slice(1)
        .map((l) => l.trim());
    }
  };

  it("refuses wildcards over IP addresses, empty labels, over-long names and *.com", () => {
    const long = `${`${"a".repeat(60)}.`.repeat(4)}example.com`;
    expect(problemsOf(["*.0.0.1", "*.1", "*.0x7f", "a..allowed.test", long, "*.com", "allowed.test."])).toEqual([
      "allowedDomains.0: is a wildcard over IP addresses (its last label is numeric): list hosts by name, or one address exactly",
      "allowedDomains.1: is a wildcard over IP addresses (its last label is numeric): list hosts by name, or one address exactly",
      "allowedDomains.2: is a wildcard over IP addresses (its last label is numeric): list hosts by name, or one address exactly",
      "allowedDomains.3: must be a host name like registry.npmjs.org or a pattern like *.npmjs.org",
      "allowedDomains.4: must be a host name like registry.npmjs.org or a pattern like *.npmjs.org",
      "allowedDomains.5: is too broad: a *.suffix pattern needs at least two labels after '*.' (use *.example.com, not *.com)",
      "allowedDomains.6: must be a host name like registry.npmjs.org or a pattern like *.npmjs.org",
    ]);
  });

  it("says plainly what a policy author wrote by habit: a scheme, a path, a port, spaces, IPv6, a non-ASCII name (review, session 30)", () => {
    expect(
      problemsOf([
        "https://github.com/org",
        "github.com/org",
        "github.com:443",
        " github.com",
        "[::1]",
        "bücher.example",
      ]),
    ).toEqual([
      "allowedDomains.0: must be a host name without a scheme (write github.com)",
      "allowedDomains.1: must be a host name without a path (write github.com)",
      "allowedDomains.2: must be a host name without a port (write github.com; the egress proxy takes ports 80 and 443)",
      "allowedDomains.3: has spaces around it",
      "allowedDomains.4: is an IPv6 address, which allow-lists do not take: list the host by name",
      "allowedDomains.5: must be written in ASCII: give an international name in its xn-- (punycode) form",
    ]);
  });

  it("refuses an address the egress proxy never connects to (private, loopback, metadata), saying so as the policy loads", () => {
    const refused = ["10.1.2.3", "127.0.0.1", "169.254.169.254", "192.168.1.10", "100.100.100.200"];
    const problems = problemsOf(refused);
    expect(problems).toHaveLength(refused.length);
    expect(problems[0]).toBe(
      "allowedDomains.0: is an address in a private network range, which the egress proxy never connects to (sandboxes do not reach the host, its LAN or metadata services): list a public host",
    );
    expect(problems[1]).toContain("in a loopback range");
    expect(problems[2]).toContain("in a link-local (metadata services) range");
    expect(problems[4]).toContain("shared address space (CGNAT)");
  });

  it("accepts names, *.suffix patterns and canonical IPv4 addresses", () => {
    expect(
      problemsOf(["registry.npmjs.org", "*.npmjs.org", "Deb.Debian.org", "93.184.215.14", "*.a-b.example"]),
    ).toEqual([]);
    expect(problemsOf(["0x5d.184.215.14"])).toHaveLength(1);
  });

  it("hostPatternProblem can refuse wildcards where only exact names make sense", () => {
    expect(hostPatternProblem("*.github.com", { wildcard: false })).toBe("must be an exact host name (no *. patterns)");
    expect(hostPatternProblem("api.github.com", { wildcard: false })).toBeUndefined();
  });
});
