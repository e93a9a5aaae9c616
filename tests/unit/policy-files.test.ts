// User policy files through the CLI (run from source, so no build is needed): a file with mistakes gets precise `path: message`
// lines and exit 2 before anything starts; the shipped example is valid and is the one the docs
// show; the docs' field reference is the one the schema generates; --dry-run shows what the
// allow-list, the CA bundle and protected directories add to the plan.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { DOCS_FILE, withReference } from "../../scripts/policy-reference.js";
import { loadPolicy } from "../../src/policy/load-policy.js";
import { makeWorkspace, type ProcessResult, runSourceCli } from "../support/harness.js";

const repoRoot = path.resolve(import.meta.dirname, "../..");
const examplePolicy = path.join(repoRoot, "policies/examples/npm-install.json");

function runCli(args: string[], cwd: string, env: Record<string, string> = {}): Promise<ProcessResult> {
  // An engine that cannot be reached: a usage error must come before any engine contact.
  return runSourceCli(args, { cwd, env: { ...process.env, DOCKER_HOST: "unix:///nonexistent/docker.sock", ...env } });
}

const badPolicy = {
  name: "typo",
  workspace: "read-write",
  writableRoots: false,
  tools: ["read", "bash", "curl"],
  network: "allowlist",
  allowedDomains: ["*.com", "registry.npmjs.org"],
  trustHostCaBundle: "yes",
  runtime: "runc",
  contextFiles: false,
  protectedPaths: ["/etc/**", "../up/**", ".git/hooks/**"],
  limits: {
    memoryMb: 32,
    cpus: 2,
    pids: 256,
    tmpMb: 512,
    homeMb: 64,
    timeoutSeconds: 900,
    maxOutputMb: 256,
    maxLineMb: 16,
    diskMb: 1024,
    swapMb: 1,
  },
};

describe("user policy files through the CLI", () => {
  it("a policy file with mistakes: one precise path: message line each, exit 2, nothing started", async () => {
    const cwd = makeWorkspace({ "bad.json": JSON.stringify(badPolicy, null, 2) });
    const run = await runCli(["--policy", "bad.json", "--model", "scripted/x", "fix it"], cwd);
    expect(run.status).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toBe(
      [
        "sandbox-run: Policy bad.json is invalid:",
        '  tools.2: Invalid option: expected one of "read"|"bash"|"edit"|"write"|"grep"|"find"|"ls"',
        "  allowedDomains.0: is too broad: a *.suffix pattern needs at least two labels after '*.' (use *.example.com, not *.com)",
        "  trustHostCaBundle: Invalid input: expected boolean, received string",
        "  protectedPaths.0: must be relative to the workspace (no leading /)",
        "  protectedPaths.1: must not contain '..' or empty segments",
        "  limits.memoryMb: Too small: expected number to be >=64",
        '  limits: Unrecognized key: "swapMb"',
        "  Fix the fields above; `sandbox-run policy show workspace-write` prints a complete example.",
        "",
      ].join("\n"),
    );
  });

  it("a cross-field mistake names the field too", async () => {
    const policy = { ...loadPolicy(examplePolicy), allowedDomains: [] };
    const cwd = makeWorkspace({ "empty.json": JSON.stringify(policy) });
    const run = await runCli(["--policy", "empty.json", "--model", "scripted/x", "fix it"], cwd);
    expect(run.status).toBe(2);
    expect(run.stderr).toContain(
      '  allowedDomains: is empty: network "allowlist" needs at least one domain (or use "none")\n',
    );
  });

  it("a file that is not JSON: exit 2 with the parser's message", async () => {
    const cwd = makeWorkspace({ "broken.json": '{"name": ' });
    const run = await runCli(["--policy", "broken.json", "--model", "scripted/x", "fix it"], cwd);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(
      /^sandbox-run: The policy file broken\.json is not valid JSON: .+\n {2}Check the file's syntax: JSON has no comments and no trailing commas \(a policy file named \*\.yaml may have comments\)\.\n$/,
    );
  });

  it("the example npm-install policy is valid and says what the docs promise", () => {
    const policy = loadPolicy(examplePolicy);
    expect(policy).toMatchObject({
      name: "npm-install",
      workspace: "read-write",
      network: "allowlist",
      allowedDomains: ["registry.npmjs.org"],
      trustHostCaBundle: true,
      contextFiles: false,
    });
    expect(policy.protectedPaths).toEqual(expect.arrayContaining([".git/hooks/**", ".github/**"]));
    // The docs show the file verbatim.
    const docs = fs.readFileSync(DOCS_FILE, "utf8");
    const block = /<!-- example-policy:start -->\n```json\n([\s\S]*?)```\n<!-- example-policy:end -->/.exec(docs)?.[1];
    expect(block).toBe(fs.readFileSync(examplePolicy, "utf8"));
  });

  it("the docs' field reference is what the schema generates", () => {
    const docs = fs.readFileSync(DOCS_FILE, "utf8");
    expect(docs).toBe(withReference(docs));
    expect(docs).toContain("| `trustHostCaBundle` | boolean | no (default `false`) |");
  });

  it("--dry-run of the example shows the proxy socket, proxy variables, the CA bundle and read-only protected directories", async () => {
    const cwd = makeWorkspace({ ".git/hooks/pre-commit.sample": "#!/bin/sh\n", "src/a.ts": "a" });
    const real = fs.realpathSync(cwd);
    const run = await runCli(
      ["--policy", examplePolicy, "--model", "anthropic/claude-sonnet-4-5", "--dry-run", "go"],
      cwd,
      { ANTHROPIC_API_KEY: "sk-test" },
    );
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
    const plan = JSON.parse(run.stdout);
    expect(plan.network).toBe("none");
    expect(plan.mounts).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ containerPath: "/run/sandbox-run/proxy.sock", kind: "socket" }),
        {
          hostPath: "/etc/ssl/certs/ca-certificates.crt",
          containerPath: "/run/sandbox-run/host-ca-certificates.crt",
          readOnly: true,
          kind: "ca-bundle",
        },
        { hostPath: `${real}/.git/hooks`, containerPath: `${real}/.git/hooks`, readOnly: true, kind: "protected" },
      ]),
    );
    expect(plan.mounts.filter((m: { kind: string }) => m.kind === "protected")).toHaveLength(1); // .github/workflows does not exist
    expect(plan.env).toMatchObject({
      HTTPS_PROXY: "http://127.0.0.1:18081",
      NODE_USE_ENV_PROXY: "1",
      NODE_EXTRA_CA_CERTS: "/run/sandbox-run/host-ca-certificates.crt",
      SSL_CERT_FILE: "/run/sandbox-run/host-ca-certificates.crt",
      GIT_SSL_CAINFO: "/run/sandbox-run/host-ca-certificates.crt",
      CURL_CA_BUNDLE: "/run/sandbox-run/host-ca-certificates.crt",
      REQUESTS_CA_BUNDLE: "/run/sandbox-run/host-ca-certificates.crt",
    });
  });
});
