// The allow-list semantics: exact names, *.suffix patterns, ports, and the look-alike names
// an attacker would try.
import { describe, expect, it } from "vitest";
import { createDomainFilter, matchesDomain, normalizeHost } from "../../src/proxy/domain-filter.js";

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

  it("normalizes hosts", () => {
    expect(normalizeHost(" Example.COM. ")).toBe("example.com");
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
    expect(filter("registry.npmjs.org ", 443).allowed).toBe(true); // trimmed, same name
  });
});
