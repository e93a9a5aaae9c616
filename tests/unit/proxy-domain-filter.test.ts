// The allow-list semantics: exact names, *.suffix patterns, ports, and the look-alike names
// an attacker would try.
import { describe, expect, it } from "vitest";
import { createDomainFilter, normalizeHost } from "../../src/proxy/domain-filter.js";
import { matchesDomain } from "../../src/util/host-pattern.js";

describe("matchesDomain", () => {
  it("matches exact names case-insensitively and ignores one trailing dot", () => {
    expect(matchesDomain("registry.npmjs.org", "registry.npmjs.org")).toBe(true);
    expect(matchesDomain("Registry.NPMJS.org.", "registry.npmjs.org")).toBe(true);
    expect(matchesDomain("npmjs.org", "registry.npmjs.org")).toBe(false);
    expect(matchesDomain("registry.npmjs.org.evil.com", "registry.npmjs.org")).toBe(false);
  });

  it("matches *.suffix at any depth below the suffix, never the suffix itself or look-alikes", () => {
    expect(matchesDomain("registry.npmjs.org", "*.npmjs.org")).toBe(true);
    expect(matchesDomain("a.b.npmjs.org", "*.npmjs.org")).toBe(true);
    expect(matchesDomain("npmjs.org", "*.npmjs.org")).toBe(false);
    expect(matchesDomain("evilnpmjs.org", "*.npmjs.org")).toBe(false);
    expect(matchesDomain("npmjs.org.evil.com", "*.npmjs.org")).toBe(false);
  });

  it("normalizes hosts once: lower case and one trailing dot, nothing more", () => {
    expect(normalizeHost("Example.COM.")).toBe("example.com");
    expect(normalizeHost(" Example.COM. ")).toBeUndefined();
    // A second trailing dot is an empty label, not something to strip again.
    expect(normalizeHost("example.com..")).toBeUndefined();
    expect(matchesDomain("registry.npmjs.org..", "registry.npmjs.org")).toBe(false);
  });
});

describe("createDomainFilter", () => {
  const filter = createDomainFilter(["registry.npmjs.org", "*.debian.org"]);

  it("allows listed hosts on the web ports and says which entry matched", () => {
    expect(filter("registry.npmjs.org", 443)).toEqual({
      allowed: true,
      reason: "matches allowedDomains entry registry.npmjs.org",
    });
    expect(filter("deb.debian.org", 80)).toEqual({
      allowed: true,
      reason: "matches allowedDomains entry *.debian.org",
    });
  });

  it("denies other hosts with a reason naming the host", () => {
    const verdict = filter("example.com", 443);
    expect(verdict.allowed).toBe(false);
    expect(verdict.reason).toBe("example.com is not in the policy's allowedDomains");
  });

  it("denies other ports of an allowed host", () => {
    expect(filter("registry.npmjs.org", 22)).toEqual({
      allowed: false,
      reason: "port 22 is not allowed (only 80, 443)",
    });
    expect(createDomainFilter(["registry.npmjs.org"], { ports: [8443] })("registry.npmjs.org", 8443).allowed).toBe(
      true,
    );
  });

  it("denies everything when the list is empty", () => {
    expect(createDomainFilter([])("registry.npmjs.org", 443)).toEqual({
      allowed: false,
      reason: "the allow-list is empty",
    });
  });

  it("refuses host strings that are not plain names instead of interpreting them", () => {
    expect(filter("user@registry.npmjs.org", 443).allowed).toBe(false);
    expect(filter("registry.npmjs.org%2f", 443).allowed).toBe(false);
    expect(filter("registry.npmjs.org ", 443).allowed).toBe(false);
  });

  it("refuses names with empty labels or over 253 characters, even below an allowed suffix", () => {
    const allowed = createDomainFilter(["*.allowed.test", "registry.npmjs.org"]);
    expect(allowed("a..allowed.test", 443).allowed).toBe(false);
    expect(allowed(".allowed.test", 443).allowed).toBe(false);
    expect(allowed("registry.npmjs.org..", 443).allowed).toBe(false);
    const long = `${`${"a".repeat(60)}.`.repeat(4)}allowed.test`; // 256 characters
    expect(long.length).toBeGreaterThan(253);
    expect(allowed(long, 443)).toEqual({ allowed: false, reason: expect.stringContaining("1 to 253 characters") });
    expect(allowed(`${"a".repeat(64)}.allowed.test`, 443).allowed).toBe(false);
    expect(allowed("a.allowed.test", 443).allowed).toBe(true);
  });

  it("never lets a wildcard match an IP literal, in any spelling", () => {
    // Such patterns no longer pass the policy schema; the filter must not honour one handed to it.
    const numeric = createDomainFilter(["*.0.0.1", "*.allowed.test"]);
    for (const host of ["127.0.0.1", "10.0.0.1", "0x7f.0.0.1", "0177.0.0.1", "2130706433", "127.1", "1.0.0.1"]) {
      expect(numeric(host, 443).allowed, host).toBe(false);
    }
    expect(numeric("0x7f.0.0.1", 443).reason).toBe(
      '"0x7f.0.0.1" is an IP address in a non-standard spelling; write it as a.b.c.d',
    );
    expect(matchesDomain("127.0.0.1", "*.0.0.1")).toBe(false);
    // A name that merely ends in digits is not a name either: no top-level domain is numeric.
    expect(numeric("x.allowed.test.1", 443).allowed).toBe(false);
  });

  it("matches an IP literal only by an exact entry, in its canonical spelling", () => {
    const exact = createDomainFilter(["93.184.215.14"]);
    expect(exact("93.184.215.14", 443).allowed).toBe(true);
    expect(exact("93.184.215.014", 443).allowed).toBe(false);
    expect(exact("0x5d.184.215.14", 443).allowed).toBe(false);
  });
});
