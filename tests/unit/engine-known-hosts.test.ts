// known_hosts as OpenSSH reads it: the ssh engine's host key is checked against these lines.
import crypto from "node:crypto";
import { describe, expect, it } from "vitest";
import { knownHostKeys, parsePublicKeyLine } from "../../src/engine/known-hosts.js";

const KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
const KEY_B = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBZFRz+Rkgz4yuNlnU6ZrQ/LNFJzrrEHF9Q1s8gqvgkl";

/** The end of each key, which is what the matches are compared by. */
const A = KEY_A.slice(-8);
const B = KEY_B.slice(-8);

function hashed(name: string): string {
  const salt = crypto.randomBytes(20);
  const mac = crypto.createHmac("sha1", salt).update(name).digest();
  return `|1|${salt.toString("base64")}|${mac.toString("base64")}`;
}

const names = (text: string, host: string, port: number) => {
  const match = knownHostKeys(text, host, port);
  return {
    accepted: match.accepted.map((k) => k.blob.toString("base64").slice(-8)),
    revoked: match.revoked.length,
  };
};

describe("known_hosts", () => {
  it("matches plain names, [host]:port, hashed names and patterns, nothing else", () => {
    const text = [
      "# comment",
      `build-2,10.0.0.5 ${KEY_A}`,
      `[build-2]:2222 ${KEY_B}`,
      `${hashed("build-3")} ${KEY_A}`,
      `*.ci.example,!evil.ci.example ${KEY_B}`,
      `@cert-authority * ${KEY_A}`,
    ].join("\n");
    expect(names(text, "build-2", 22).accepted).toEqual([A]);
    expect(names(text, "10.0.0.5", 22).accepted).toEqual([A]);
    expect(names(text, "build-2", 2222).accepted).toEqual([B]);
    expect(names(text, "build-3", 22).accepted).toEqual([A]);
    expect(names(text, "build-3", 2222).accepted).toEqual([]);
    expect(names(text, "a.ci.example", 22).accepted).toEqual([B]);
    expect(names(text, "evil.ci.example", 22).accepted).toEqual([]);
    expect(names(text, "elsewhere", 22).accepted).toEqual([]);
  });

  it("reports @revoked keys", () => {
    expect(names(`@revoked build-2 ${KEY_A}\nbuild-2 ${KEY_A}`, "build-2", 22)).toEqual({
      accepted: [A],
      revoked: 1,
    });
  });

  it("a key line must carry its own type: a blob pasted under another type is no key", () => {
    expect(parsePublicKeyLine(KEY_A)?.type).toBe("ssh-ed25519");
    expect(parsePublicKeyLine(KEY_A.replace("ssh-ed25519", "ssh-rsa"))).toBeUndefined();
    expect(parsePublicKeyLine("ssh-ed25519 not-base64!")).toBeUndefined();
  });
});
