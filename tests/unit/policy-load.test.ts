// Built-in policies load and mean what their names say; a user's policy file with mistakes is
// reported as `path: message` lines that point at each mistake.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { stringify as toYaml } from "yaml";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import { loadPolicy, parsePolicy } from "../../src/policy/load-policy.js";
import { BUILT_IN_POLICIES } from "../../src/util/policy-names.js";

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-policy-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function writePolicy(name: string, value: unknown): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, typeof value === "string" ? value : JSON.stringify(value));
  return file;
}

function loadError(file: string): SandboxRunError {
  try {
    loadPolicy(file);
  } catch (error) {
    if (isSandboxRunError(error)) return error;
    throw error;
  }
  throw new Error(`expected ${file} to be rejected`);
}

/** The `path: message` lines of a policy error. */
const issueLines = (error: SandboxRunError) =>
  error.shortMessage
    .split("\n")
    .slice(1)
    .map((l) => l.trim());

const valid = () => JSON.parse(JSON.stringify(loadPolicy("workspace-write")));

describe("built-in policies", () => {
  // They are read without zod (a run with a built-in policy does not load it), so each file must
  // already be exactly what the schema makes of it: every default written out, nothing unknown.
  it.each(BUILT_IN_POLICIES)("%s ships complete: the file is what the schema makes of it", (name) => {
    const file = JSON.parse(fs.readFileSync(path.join(import.meta.dirname, `../../policies/${name}.json`), "utf8"));
    expect(loadPolicy(name)).toEqual(file);
    expect(parsePolicy(file, name)).toEqual(file);
  });

  it.each(BUILT_IN_POLICIES)("%s loads and is named after itself", (name) => {
    const policy = loadPolicy(name);
    expect(policy.name).toBe(name);
    expect(policy.tools.length).toBeGreaterThan(0);
    expect(policy.limits.timeoutSeconds).toBeGreaterThan(0);
  });

  it("read-only: read-only workspace, no edit/write tools, no extra writable roots, no network", () => {
    const policy = loadPolicy("read-only");
    expect(policy).toMatchObject({
      workspace: "read-only",
      writableRoots: false,
      network: "none",
      contextFiles: false,
    });
    expect(policy.tools).not.toContain("edit");
    expect(policy.tools).not.toContain("write");
  });

  it("workspace-write: read-write workspace, no network; danger-full-access: open network", () => {
    expect(loadPolicy("workspace-write")).toMatchObject({
      workspace: "read-write",
      writableRoots: true,
      network: "none",
    });
    expect(loadPolicy("danger-full-access")).toMatchObject({ workspace: "read-write", network: "open" });
  });

  it("a valid user file loads like a built-in", () => {
    const file = writePolicy("ok.json", { ...valid(), name: "mine", limits: { ...valid().limits, pids: 64 } });
    expect(loadPolicy(file)).toMatchObject({ name: "mine", limits: { pids: 64 } });
  });

  it("a YAML file (.yaml or .yml), comments included, loads to the same policy as its JSON", () => {
    const example = path.join(import.meta.dirname, "../../policies/examples/npm-install.json");
    const yaml = `# npm install, and nothing else on the network\n${toYaml(JSON.parse(fs.readFileSync(example, "utf8")))}`;
    expect(loadPolicy(writePolicy("npm.yaml", yaml))).toEqual(loadPolicy(example));
    expect(loadPolicy(writePolicy("npm.YML", yaml))).toEqual(loadPolicy(example));
  });
});

describe("user policy files with mistakes", () => {
  it("lists every mistake as path: message, and says how to fix the file", () => {
    const file = writePolicy("bad.json", {
      ...valid(),
      workspace: "rw",
      tools: ["bash", "rm"],
      limits: { ...valid().limits, memoryMb: 1, swap: 5 },
      networking: "none",
    });
    const error = loadError(file);
    expect(error.code).toBe("usage");
    expect(error.shortMessage.split("\n")[0]).toBe(`Policy ${file} is invalid:`);
    const lines = issueLines(error);
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^workspace: .*"read-only"\|"read-write"/),
        expect.stringMatching(/^tools\.1: /),
        expect.stringMatching(/^limits\.memoryMb: .*64/),
        expect.stringMatching(/^limits: Unrecognized key: "swap"/),
        expect.stringMatching(/^\(root\): Unrecognized key: "networking"/),
      ]),
    );
    expect(error.hint).toContain("sandbox-run policy show");
  });

  it("a policy author's usual slips say what was meant: a field's case or a typo, \"extends\", a comment in JSON (review, session 30)", () => {
    const typo = loadError(
      writePolicy("typo.json", { ...valid(), allowedDomain: [], limits: { ...valid().limits, memoryMB: 512 } }),
    );
    expect(issueLines(typo)).toEqual(
      expect.arrayContaining([
        '(root): Unrecognized key: "allowedDomain" (did you mean "allowedDomains"?)',
        'limits: Unrecognized key: "memoryMB" (did you mean "memoryMb"?)',
      ]),
    );
    const inherits = loadError(writePolicy("extends.json", { extends: "workspace-write", limits: { cpus: 1 } }));
    expect(inherits.shortMessage).toMatch(/uses "extends": a policy here is complete in itself and inherits from none/);
    expect(inherits.hint).toContain("sandbox-run policy show workspace-write --yaml");
    const commented = loadError(writePolicy("commented.json", '{\n  "name": "x",\n  // why\n  "network": "none"\n}'));
    expect(commented.shortMessage).toMatch(/is not valid JSON \(line 3, column 3\)/);
    expect(commented.hint).toContain("a policy file named *.yaml may have comments");
  });

  it("rejects an over-broad *.com domain with a message that says why, once", () => {
    const file = writePolicy("broad.json", {
      ...valid(),
      network: "allowlist",
      allowedDomains: ["registry.npmjs.org", "*.com"],
    });
    const lines = issueLines(loadError(file));
    expect(lines).toEqual([
      "allowedDomains.1: is too broad: a *.suffix pattern needs at least two labels after '*.' (use *.example.com, not *.com)",
    ]);
  });

  it("accepts *.example.com and rejects things that are not host names", () => {
    expect(
      parsePolicy({ ...valid(), network: "allowlist", allowedDomains: ["*.npmjs.org"] }, "x").allowedDomains,
    ).toEqual(["*.npmjs.org"]);
    const file = writePolicy("hosts.json", {
      ...valid(),
      network: "allowlist",
      allowedDomains: ["https://example.com/", "localhost", "*"],
    });
    const lines = issueLines(loadError(file));
    expect(lines).toHaveLength(3);
    for (const [i, line] of lines.entries())
      expect(line).toMatch(new RegExp(`^allowedDomains\\.${i}: must be a host name`));
  });

  it("refuses a relative or ~/ read-only mount (it would be read from the current folder, often the workspace)", () => {
    const lines = issueLines(
      loadError(writePolicy("mounts.json", { ...valid(), readOnlyMounts: ["~/.m2", "cache", "/opt/ok"] })),
    );
    expect(lines).toEqual([
      "readOnlyMounts.0: must be an absolute path (such as /opt/cache); a relative one would be read from the current folder",
      "readOnlyMounts.1: must be an absolute path (such as /opt/cache); a relative one would be read from the current folder",
    ]);
  });

  it("refuses limits past their maxima (a day of timeout, 1 TiB, Linux's pid_max), naming each", () => {
    const limits = {
      ...valid().limits,
      timeoutSeconds: 1e20,
      memoryMb: 2 ** 21,
      pids: 1e9,
      tmpMb: 2 ** 21,
      diskMb: 2 ** 40,
      maxLineMb: 1024,
    };
    const lines = issueLines(loadError(writePolicy("huge.json", { ...valid(), limits })));
    expect(lines.map((l) => l.split(":")[0])).toEqual([
      "limits.memoryMb",
      "limits.pids",
      "limits.tmpMb",
      "limits.timeoutSeconds",
      "limits.maxLineMb",
      "limits.diskMb",
    ]);
    expect(lines[3]).toBe("limits.timeoutSeconds: is longer than a run may last (86400 seconds, a day)");
    expect(lines[0]).toBe("limits.memoryMb: is more than 1 TiB (1048576 MiB)");
  });

  it("explains inconsistent combinations", () => {
    const lines = (value: unknown) => issueLines(loadError(writePolicy("combo.json", value)));
    expect(lines({ ...valid(), network: "allowlist", allowedDomains: [] })).toEqual([
      'allowedDomains: is empty: network "allowlist" needs at least one domain (or use "none")',
    ]);
    expect(lines({ ...valid(), network: "none", allowedDomains: ["example.com"] })).toEqual([
      'allowedDomains: is only used with network "allowlist"',
    ]);
    expect(lines({ ...valid(), workspace: "read-only", tools: ["read", "write"] })).toEqual([
      "tools: edit/write make no sense on a read-only workspace",
    ]);
  });

  it("reports YAML mistakes: bad syntax with its line, duplicate keys, and schema errors as path: message", () => {
    const syntax = loadError(writePolicy("syntax.yaml", "name: mine\ntools: [read, bash\nnetwork: none\n"));
    expect(syntax.shortMessage).toMatch(/^The policy file .*syntax\.yaml is not valid YAML: .* at line 3, column 1:?$/);
    const duplicate = loadError(writePolicy("dup.yml", `${toYaml(valid())}network: allowlist\n`));
    expect(duplicate.shortMessage).toMatch(/is not valid YAML: Map keys must be unique at line \d+/);
    const schema = loadError(
      writePolicy("schema.yaml", toYaml({ ...valid(), limits: { ...valid().limits, pids: "lots" } })),
    );
    expect(issueLines(schema)).toEqual([expect.stringMatching(/^limits\.pids: /)]);
  });

  it("a folder given as the policy file is a usage error, not a crash", () => {
    expect(loadError(dir).shortMessage).toBe(
      `Cannot read the policy file ${dir}: it is not a regular file (a folder).`,
    );
  });

  it("reports a file that is not JSON, and a name that is neither built-in nor a file", () => {
    const file = writePolicy("syntax.json", "{ name: ");
    expect(loadError(file).shortMessage).toContain(`The policy file ${file} is not valid JSON`);
    const missing = loadError("workspace-writ");
    expect(missing.shortMessage).toBe('Policy "workspace-writ" is neither a built-in policy nor an existing file.');
    expect(missing.hint).toContain("read-only, workspace-write, danger-full-access");
  });
});
