// Secrets in a policy: what the schema accepts, and how a run reads the values (host
// environment or file, never the policy), with clear errors when a value is missing or unusable.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import { loadPolicy, parsePolicy } from "../../src/policy/load-policy.js";
import { resolveSecretBindings } from "../../src/proxy/secret-bindings.js";

const base = () => ({
  ...JSON.parse(JSON.stringify(loadPolicy("workspace-write"))),
  network: "allowlist",
  allowedDomains: ["github.com", "*.github.com", "registry.npmjs.org"],
});

function problems(policy: unknown): string[] {
  try {
    parsePolicy(policy, "test");
    return [];
  } catch (error) {
    if (!isSandboxRunError(error)) throw error;
    return error.shortMessage
      .split("\n")
      .slice(1)
      .map((l) => l.trim());
  }
}

function thrown(fn: () => unknown): SandboxRunError {
  try {
    fn();
  } catch (error) {
    if (isSandboxRunError(error)) return error;
    throw error;
  }
  throw new Error("expected an error");
}

describe("the secrets field", () => {
  it("accepts names, exact hosts inside allowedDomains, inject rules and a source", () => {
    expect(
      problems({
        ...base(),
        secrets: {
          GITHUB_TOKEN: { hosts: ["github.com", "api.github.com"], inject: ["basic", "bearer"] },
          ACME: { hosts: ["registry.npmjs.org"], inject: [{ header: "X-Api-Key" }], from: { file: "~/acme.key" } },
        },
      }),
    ).toEqual([]);
  });

  it("refuses values in the policy, wildcards, hosts outside allowedDomains, bad names and sources", () => {
    expect(
      problems({
        ...base(),
        secrets: {
          A: { hosts: ["github.com"], inject: ["bearer"], value: "ghp_inline" },
          B: { hosts: ["*.github.com"], inject: ["bearer"] },
          C: { hosts: ["example.com"], inject: ["bearer"] },
          HOME: { hosts: ["github.com"], inject: ["bearer"] },
          "bad-name": { hosts: ["github.com"], inject: ["bearer"] },
          D: { hosts: ["github.com"], inject: [{ header: "Host" }], from: { file: "relative/path" } },
          E: { hosts: [], inject: [] },
        },
      }),
    ).toEqual([
      'secrets.A: Unrecognized key: "value"',
      "secrets.B.hosts.0: must be an exact host name (no *. patterns)",
      "secrets.D.inject.0.header: is a header the proxy manages itself",
      "secrets.D.from.file: must be an absolute path (or start with ~/)",
      "secrets.E.hosts: Too small: expected array to have >=1 items",
      "secrets.E.inject: Too small: expected array to have >=1 items",
      "secrets.HOME: is a variable sandbox-run sets itself",
      "secrets.bad-name: must be an environment variable name",
      "secrets.C.hosts.0: is not in allowedDomains",
    ]);
    expect(problems({ ...base(), secrets: { C: { hosts: ["example.com"], inject: ["bearer"] } } })).toEqual([
      "secrets.C.hosts.0: is not in allowedDomains",
    ]);
    expect(
      problems({
        ...base(),
        network: "none",
        allowedDomains: [],
        secrets: { C: { hosts: ["github.com"], inject: ["bearer"] } },
      }),
    ).toEqual(['secrets.C: needs network "allowlist"']);
  });
});

describe("the shipped example", () => {
  it("policies/examples/pr-fix.yaml gives GITHUB_TOKEN to github.com and api.github.com only", () => {
    const pr = loadPolicy(path.join(import.meta.dirname, "../../policies/examples/pr-fix.yaml"));
    expect(pr.network).toBe("allowlist");
    expect(pr.allowedDomains).toEqual(["registry.npmjs.org", "github.com", "api.github.com"]);
    expect(pr.secrets).toEqual({
      GITHUB_TOKEN: {
        hosts: ["github.com", "api.github.com"],
        inject: ["basic", "bearer"],
        from: { env: "GITHUB_TOKEN" },
      },
    });
    expect(pr.protectedPaths).toContain(".github/**");
  });
});

describe("resolveSecretBindings", () => {
  const secrets = { GITHUB_TOKEN: { hosts: ["GitHub.com"], inject: ["basic" as const, "bearer" as const] } };

  it("reads the value from the host variable of the same name and makes a fresh placeholder per run", () => {
    const [first] = resolveSecretBindings(secrets, { GITHUB_TOKEN: "ghp_0123456789abcdef" });
    const [second] = resolveSecretBindings(secrets, { GITHUB_TOKEN: "ghp_0123456789abcdef" });
    expect(first).toMatchObject({
      name: "GITHUB_TOKEN",
      hosts: ["github.com"],
      inject: [{ kind: "basic" }, { kind: "bearer" }],
      value: "ghp_0123456789abcdef",
      username: "x-access-token",
    });
    expect(first!.placeholder).toMatch(/^sandbox-run-placeholder-GITHUB_TOKEN-[0-9a-f]{32}$/);
    expect(second!.placeholder).not.toBe(first!.placeholder);
  });

  it("reads a file (one trailing newline dropped) or another variable", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-secret-"));
    try {
      fs.writeFileSync(path.join(dir, "token"), "npm_0123456789abcdef\n");
      const [fromFile] = resolveSecretBindings(
        { NPM_TOKEN: { hosts: ["registry.npmjs.org"], inject: ["bearer"], from: { file: path.join(dir, "token") } } },
        {},
      );
      expect(fromFile!.value).toBe("npm_0123456789abcdef");
      const [fromEnv] = resolveSecretBindings(
        { NPM_TOKEN: { hosts: ["registry.npmjs.org"], inject: ["bearer"], from: { env: "CI_NPM" } } },
        { CI_NPM: "npm_abcdefghijklmnop", NPM_TOKEN: "not-this-one" },
      );
      expect(fromEnv!.value).toBe("npm_abcdefghijklmnop");
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("says what is missing or wrong, without the value", () => {
    const missing = thrown(() => resolveSecretBindings(secrets, {}));
    expect(missing.code).toBe("usage");
    expect(missing.shortMessage).toBe(
      "The policy's secret GITHUB_TOKEN needs a value, but the host variable GITHUB_TOKEN is not set.",
    );
    expect(missing.hint).toContain("Set GITHUB_TOKEN in the environment that runs sandbox-run");
    const newline = thrown(() => resolveSecretBindings(secrets, { GITHUB_TOKEN: "ghp_abc\r\nX-Evil: 1" }));
    expect(newline.shortMessage).toContain("is not a token");
    expect(newline.shortMessage).not.toContain("ghp_abc");
    expect(thrown(() => resolveSecretBindings(secrets, { GITHUB_TOKEN: "short" })).shortMessage).toContain(
      "shorter than 8 characters",
    );
    const noFile = thrown(() =>
      resolveSecretBindings({ T: { hosts: ["github.com"], inject: ["bearer"], from: { file: "/nonexistent/t" } } }, {}),
    );
    expect(noFile.shortMessage).toBe(
      "The policy's secret T is read from /nonexistent/t, which cannot be read (ENOENT).",
    );
  });
});
