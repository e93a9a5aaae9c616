// What the allow-list, trustHostCaBundle and protected directories add to the run plan (pure
// data, no Docker): mounts, their read-only flags, and variables a caller cannot override.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { SandboxRunError } from "../../src/errors.js";
import { loadPolicy } from "../../src/policy/load-policy.js";
import type { Policy } from "../../src/policy/policy-schema.js";
import { hostCaBundleFile } from "../../src/proxy/host-ca-bundle.js";
import { buildRunPlan, type PlanInput } from "../../src/run/plan/build-run-plan.js";
import { preparePlan } from "../../src/run/plan/prepare-plan.js";
import { resolveRun } from "../../src/run/plan/resolve-options.js";
import { CA_BUNDLE_ENV_NAMES, HOST_CA_BUNDLE, SANDBOX_CA_BUNDLE } from "../../src/sandbox-contract.js";
import { makeWorkspace } from "../support/harness.js";

const allowlist: Policy = {
  ...loadPolicy("workspace-write"),
  network: "allowlist",
  allowedDomains: ["registry.npmjs.org"],
  trustHostCaBundle: true,
};

function input(policy: Policy, overrides: Partial<PlanInput> = {}): PlanInput {
  return {
    runId: "abc123",
    image: "sandbox-run/pi:test",
    policy,
    model: "scripted/x",
    cwd: "/work/project",
    writableRoots: [],
    readOnlyMounts: [],
    runDir: "/tmp/sandbox-run-xyz",
    caller: { uid: 1000, gid: 1000 },
    sandboxEnv: {},
    containerModelsJson: {},
    extraArgs: [],
    timeoutMs: 60_000,
    owner: { pid: 1, host: "h" },
    now: new Date(0),
    ...overrides,
  };
}

describe("allowlist and CA bundle in the plan", () => {
  it("keeps the container without a network and routes HTTP(S) through the proxy socket", () => {
    const plan = buildRunPlan(input(allowlist));
    expect(plan.network).toBe("none");
    expect(plan.mounts).toContainEqual({
      hostPath: "/tmp/sandbox-run-xyz/proxy.sock",
      containerPath: "/run/sandbox-run/proxy.sock",
      readOnly: false,
      kind: "socket",
    });
    expect(plan.env).toMatchObject({
      HTTP_PROXY: "http://127.0.0.1:18081",
      https_proxy: "http://127.0.0.1:18081",
      NO_PROXY: "127.0.0.1,localhost",
      NODE_USE_ENV_PROXY: "1",
    });
  });

  it("mounts exactly the host CA bundle file, read-only, and points every client at it", () => {
    const plan = buildRunPlan(input(allowlist, { hostCaBundle: "/etc/ssl/certs/real-bundle.pem" }));
    expect(plan.mounts.filter((m) => m.kind === "ca-bundle")).toEqual([
      {
        hostPath: "/etc/ssl/certs/real-bundle.pem",
        containerPath: SANDBOX_CA_BUNDLE,
        readOnly: true,
        kind: "ca-bundle",
      },
    ]);
    for (const name of CA_BUNDLE_ENV_NAMES) expect(plan.env[name]).toBe(SANDBOX_CA_BUNDLE);
    expect(buildRunPlan(input(allowlist)).mounts.find((m) => m.kind === "ca-bundle")?.hostPath).toBe(HOST_CA_BUNDLE);
  });

  it("a caller's variables cannot repoint the proxy or the CA bundle", () => {
    const plan = buildRunPlan(
      input(allowlist, {
        sandboxEnv: { HTTPS_PROXY: "http://evil:1", NODE_EXTRA_CA_CERTS: "/tmp/evil.pem", FOO: "bar" },
      }),
    );
    expect(plan.env.HTTPS_PROXY).toBe("http://127.0.0.1:18081");
    expect(plan.env.NODE_EXTRA_CA_CERTS).toBe(SANDBOX_CA_BUNDLE);
    expect(plan.env.FOO).toBe("bar");
  });

  it("adds neither proxy nor CA bundle when the policy does not ask for them", () => {
    const plan = buildRunPlan(input(loadPolicy("workspace-write")));
    expect(plan.mounts.map((m) => m.kind)).not.toContain("ca-bundle");
    expect(plan.mounts.map((m) => m.containerPath)).not.toContain("/run/sandbox-run/proxy.sock");
    for (const name of [...CA_BUNDLE_ENV_NAMES, "HTTPS_PROXY", "NODE_USE_ENV_PROXY"])
      expect(plan.env[name]).toBeUndefined();
  });
});

describe("protected directories in the plan", () => {
  it("mounts them read-only inside a read-write workspace", () => {
    const plan = buildRunPlan(input(loadPolicy("workspace-write"), { protectedMounts: ["/work/project/.git/hooks"] }));
    expect(plan.mounts).toContainEqual({
      hostPath: "/work/project/.git/hooks",
      containerPath: "/work/project/.git/hooks",
      readOnly: true,
      kind: "protected",
    });
  });

  it("adds nothing over a read-only workspace (already read-only)", () => {
    const plan = buildRunPlan(input(loadPolicy("read-only"), { protectedMounts: ["/work/project/.git/hooks"] }));
    expect(plan.mounts.map((m) => m.kind)).not.toContain("protected");
  });
});

describe("hostCaBundleFile", () => {
  it("returns the canonical path of an existing bundle", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-ca-"));
    fs.writeFileSync(path.join(dir, "bundle.pem"), "-----BEGIN CERTIFICATE-----\n");
    fs.symlinkSync(path.join(dir, "bundle.pem"), path.join(dir, "link.pem"));
    expect(hostCaBundleFile(path.join(dir, "link.pem"))).toBe(fs.realpathSync(path.join(dir, "bundle.pem")));
    fs.rmSync(dir, { recursive: true });
  });

  it("is a usage error that says what to do when the bundle is missing", () => {
    const error = (() => {
      try {
        hostCaBundleFile("/nonexistent/ca-certificates.crt");
      } catch (e) {
        return e as SandboxRunError;
      }
    })();
    expect(error?.code).toBe("usage");
    expect(error?.shortMessage).toBe(
      "The policy sets trustHostCaBundle, but the host has no CA bundle at /nonexistent/ca-certificates.crt.",
    );
    expect(error?.hint).toContain("set trustHostCaBundle to false");
  });
});

describe("secrets in the plan", () => {
  const withSecrets: Policy = {
    ...allowlist,
    trustHostCaBundle: false,
    allowedDomains: ["github.com", "api.github.com", "npm.example.com"],
    secrets: {
      GITHUB_TOKEN: { hosts: ["github.com", "api.github.com"], inject: ["basic", "bearer"] },
      NPM_TOKEN: { hosts: ["npm.example.com"], inject: ["bearer"], from: { file: "/run/secrets/npm" } },
    },
  };

  it("gives the sandbox placeholders, never values, and a git credential helper per basic-auth host", () => {
    const plan = buildRunPlan(
      input(withSecrets, {
        secretPlaceholders: { GITHUB_TOKEN: "ph-github", NPM_TOKEN: "ph-npm" },
        sandboxEnv: { GITHUB_TOKEN: "ghp_the-caller-passed-the-real-one", GIT_CONFIG_COUNT: "1" },
      }),
    );
    expect(plan.env.GITHUB_TOKEN).toBe("ph-github");
    expect(plan.env.NPM_TOKEN).toBe("ph-npm");
    expect(JSON.stringify(plan)).not.toContain("ghp_the-caller-passed-the-real-one");
    // After the caller's one git setting (0) and the six git-safety settings (1-6).
    expect(plan.env).toMatchObject({
      GIT_CONFIG_COUNT: "9",
      GIT_CONFIG_KEY_1: "core.fsmonitor",
      GIT_CONFIG_KEY_5: "safe.directory",
      GIT_CONFIG_KEY_6: "core.splitIndex",
      GIT_CONFIG_KEY_7: "credential.https://github.com.helper",
      GIT_CONFIG_KEY_8: "credential.https://api.github.com.helper",
    });
    expect(plan.env.GIT_CONFIG_VALUE_7).toBe(
      `!f() { test "$1" = get && printf 'username=%s\\npassword=%s\\n' 'x-access-token' "$GITHUB_TOKEN"; }; f`,
    );
    expect(plan.env.GIT_CONFIG_KEY_9).toBeUndefined();
  });

  it("mounts the run's CA bundle read-only, over the system bundle too, and points every CA variable at it", () => {
    const plan = buildRunPlan(input(withSecrets, { secretPlaceholders: { GITHUB_TOKEN: "a", NPM_TOKEN: "b" } }));
    const bundles = plan.mounts.filter((m) => m.kind === "ca-bundle");
    expect(bundles).toEqual([
      {
        hostPath: "/tmp/sandbox-run-xyz/sandbox-ca-certificates.crt",
        containerPath: "/run/sandbox-run/ca-certificates.crt",
        readOnly: true,
        kind: "ca-bundle",
      },
      {
        hostPath: "/tmp/sandbox-run-xyz/sandbox-ca-certificates.crt",
        containerPath: "/etc/ssl/certs/ca-certificates.crt",
        readOnly: true,
        kind: "ca-bundle",
      },
    ]);
    for (const name of CA_BUNDLE_ENV_NAMES) expect(plan.env[name]).toBe("/run/sandbox-run/ca-certificates.crt");
  });

  it("adds nothing when the policy has no secrets", () => {
    const plan = buildRunPlan(input({ ...allowlist, trustHostCaBundle: false }));
    expect(plan.mounts.filter((m) => m.kind === "ca-bundle")).toEqual([]);
    // Only the git-safety settings, no credential helper.
    expect(Object.values(plan.env).filter((v) => v.startsWith("credential."))).toEqual([]);
    expect(plan.env.GIT_CONFIG_COUNT).toBe("6");
  });
});

describe("a policy secret's variables in the caller's env", () => {
  it("are dropped from the sandbox's environment: the secret's source variable, and its own name gets its placeholder", () => {
    const policy: Policy = {
      ...allowlist,
      trustHostCaBundle: false,
      allowedDomains: ["api.github.com", "npm.example.com"],
      secrets: {
        GITHUB_TOKEN: { hosts: ["api.github.com"], inject: ["bearer"], from: { env: "GH_PAT" } },
        NPM_TOKEN: { hosts: ["npm.example.com"], inject: ["bearer"] },
      },
    };
    const env = { GH_PAT: "ghp_REAL0123456789", NPM_TOKEN: "npm_REAL0123456789", KEPT: "as given" };
    const { plan } = preparePlan(
      resolveRun("go", {}, { model: "anthropic/x", cwd: makeWorkspace(), policy, env }, { ANTHROPIC_API_KEY: "k" }),
      { image: "i" },
    );
    expect(plan.env.GH_PAT).toBeUndefined();
    expect(JSON.stringify(plan)).not.toContain("REAL0123456789");
    expect(plan.env.NPM_TOKEN).not.toBe(env.NPM_TOKEN);
    expect(plan.env.GITHUB_TOKEN).toBeDefined();
    expect(plan.env.KEPT).toBe("as given");
  });
});
