// The per-run CA: certificates that real TLS stacks accept (Node here, OpenSSL's own verifier
// through the CLI), constrained to the secrets' hosts, and a new key pair for every run.
import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createRunCa } from "../../src/proxy/run-ca.js";

describe("createRunCa", () => {
  const ca = createRunCa({ label: "run1", hosts: ["github.com", "api.github.com"], validForMs: 3_600_000 });

  it("issues EC P-256 leaf certificates for one name each, signed by a CA that is a CA", () => {
    const root = new crypto.X509Certificate(ca.certificatePem);
    const leaf = new crypto.X509Certificate(ca.issue("api.github.com"));
    expect(root.ca).toBe(true);
    expect(leaf.ca).toBe(false);
    expect(leaf.verify(root.publicKey)).toBe(true);
    expect(leaf.checkIssued(root)).toBe(true);
    expect(leaf.subjectAltName).toBe("DNS:api.github.com");
    expect(leaf.checkHost("api.github.com")).toBe("api.github.com");
    expect(leaf.checkHost("github.com")).toBeUndefined();
    expect(leaf.publicKey.asymmetricKeyDetails).toEqual({ namedCurve: "prime256v1" });
    expect(new Date(leaf.validTo).getTime()).toBeGreaterThan(Date.now() + 3_500_000);
    expect(new Date(leaf.validFrom).getTime()).toBeLessThan(Date.now());
  });

  it("is accepted by OpenSSL for its hosts and refused for any other name (name constraints)", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-ca-"));
    try {
      fs.writeFileSync(path.join(dir, "ca.pem"), ca.certificatePem);
      fs.writeFileSync(path.join(dir, "ok.pem"), ca.issue("github.com"));
      fs.writeFileSync(path.join(dir, "other.pem"), ca.issue("evil.example"));
      const verify = (file: string) => {
        try {
          return execFileSync("openssl", ["verify", "-CAfile", path.join(dir, "ca.pem"), path.join(dir, file)], {
            encoding: "utf8",
            stdio: ["ignore", "pipe", "pipe"],
          });
        } catch (error) {
          return (
            String((error as { stdout?: string }).stdout ?? "") + String((error as { stderr?: string }).stderr ?? "")
          );
        }
      };
      expect(verify("ok.pem")).toContain("ok.pem: OK");
      expect(verify("other.pem")).toContain("permitted subtree violation");
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("makes a new CA key for every run, and the leaf key is not the CA's", () => {
    const second = createRunCa({ label: "run2", hosts: ["github.com"], validForMs: 3_600_000 });
    const key1 = new crypto.X509Certificate(ca.certificatePem).publicKey.export({ type: "spki", format: "der" });
    const key2 = new crypto.X509Certificate(second.certificatePem).publicKey.export({ type: "spki", format: "der" });
    expect(key1.equals(key2)).toBe(false);
    const leafKey = crypto.createPublicKey(ca.leafKeyPem).export({ type: "spki", format: "der" });
    expect(leafKey.equals(key1)).toBe(false);
    // What the CA object exposes is the certificate and the leaf key, never the CA's private key.
    expect(Object.values(ca).filter((v) => typeof v === "string" && v.includes("PRIVATE KEY"))).toEqual([
      ca.leafKeyPem,
    ]);
  });
});
