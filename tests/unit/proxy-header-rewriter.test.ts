// The rule for putting a secret into a request, as a pure function: same host dialled, SNI and
// Host; the places the secret's inject rules name; nowhere else.
import { describe, expect, it } from "vitest";
import { type RequestOrigin, rewriteRequest } from "../../src/proxy/header-rewriter.js";
import type { SecretBinding } from "../../src/proxy/secret-bindings.js";
import { canonicalHost } from "../../src/util/host-name.js";

const P = "sandbox-run-placeholder-T-0123456789abcdef0123456789abcdef";
const V = "real-value-1234567890";
const b64 = (s: string) => Buffer.from(s).toString("base64");
const binding = (inject: SecretBinding["inject"]): SecretBinding => ({
  name: "T",
  hosts: ["git.test"],
  inject,
  placeholder: P,
  value: V,
  username: "x-access-token",
});
const canonical = (h: string) => canonicalHost(h).host;
const origin: RequestOrigin = { tls: true, host: "git.test", port: 443, sni: "git.test", authority: "git.test" };
const rewrite = (headers: Record<string, string>, b = binding([{ kind: "bearer" }, { kind: "basic" }]), o = origin) =>
  rewriteRequest("/", headers, o, [b], canonical);

describe("rewriteRequest", () => {
  it("replaces the placeholder in Bearer, token and Basic (password or user name) credentials", () => {
    expect(rewrite({ authorization: `bearer ${P}` }).headers).toEqual({ authorization: `bearer ${V}` });
    expect(rewrite({ authorization: `token ${P}` }).headers).toEqual({ authorization: `token ${V}` });
    expect(rewrite({ authorization: `Basic ${b64(`me:${P}`)}` }).headers).toEqual({
      authorization: `Basic ${b64(`me:${V}`)}`,
    });
    expect(rewrite({ authorization: `Basic ${b64(`${P}:`)}` }).headers).toEqual({
      authorization: `Basic ${b64(`${V}:`)}`,
    });
  });

  it("accepts the Host header with the default port, refuses another port or no SNI", () => {
    expect(
      rewrite({ authorization: `Bearer ${P}` }, undefined, { ...origin, authority: "GIT.test:443" }).refused,
    ).toBeUndefined();
    expect(
      rewrite({ authorization: `Bearer ${P}` }, undefined, { ...origin, authority: "git.test:8443" }).refused?.reason,
    ).toContain("the Host header (git.test:8443) is not the host dialled (git.test:443)");
    expect(
      rewrite({ authorization: `Bearer ${P}` }, undefined, { ...origin, sni: undefined }).refused?.reason,
    ).toContain("the TLS server name (none) is not the host dialled (git.test)");
  });

  it("only where the inject rules say: Basic is left alone for a bearer-only secret", () => {
    const bearerOnly = binding([{ kind: "bearer" }]);
    const basic = `Basic ${b64(`me:${P}`)}`;
    const result = rewrite({ authorization: basic }, bearerOnly);
    expect(result.headers).toEqual({ authorization: basic });
    expect(result.refused).toBeUndefined();
  });

  it("a named header rule replaces only in that header", () => {
    const keyed = binding([{ kind: "header", header: "X-Api-Key" }]);
    expect(rewrite({ "x-api-key": P, "x-other": P, authorization: `Bearer ${P}` }, keyed).headers).toEqual({
      "x-api-key": V,
      "x-other": P,
      authorization: `Bearer ${P}`,
    });
  });

  it("never puts the value into Proxy-Authorization", () => {
    expect(rewrite({ "proxy-authorization": `Basic ${b64(`u:${P}`)}` }).headers).toEqual({
      "proxy-authorization": `Basic ${b64(`u:${P}`)}`,
    });
  });

  it("refuses a placeholder bound for another host wherever it hides: header, Basic, URL (even percent-encoded)", () => {
    const elsewhere = { ...origin, host: "other.test", sni: "other.test", authority: "other.test" };
    expect(rewrite({ "x-anything": `pre${P}post` }, undefined, elsewhere).refused?.secret).toBe("T");
    expect(rewrite({ authorization: `Basic ${b64(`u:${P}`)}` }, undefined, elsewhere).refused?.secret).toBe("T");
    const encoded = `/?q=${P.split("")
      .map((c) => `%${c.charCodeAt(0).toString(16)}`)
      .join("")}`;
    expect(rewriteRequest(encoded, {}, elsewhere, [binding([{ kind: "bearer" }])], canonical).refused?.secret).toBe(
      "T",
    );
  });

  it("lists what responses must be scrubbed of: the value, its base64, and each header as sent", () => {
    const result = rewrite({ authorization: `Basic ${b64(`me:${P}`)}` });
    expect(result.injected).toEqual(["T"]);
    expect(result.scrub).toEqual(
      expect.arrayContaining([
        { find: `Basic ${b64(`me:${V}`)}`, replace: `Basic ${b64(`me:${P}`)}` },
        { find: V, replace: P },
        { find: b64(V), replace: b64(P) },
      ]),
    );
  });
});
