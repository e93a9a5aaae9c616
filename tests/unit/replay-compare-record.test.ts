// A record is compared with what the replay runs under, never obeyed (without Docker): which
// differences mean the record asks for more than the caller grants (refused), which are only
// reported; and a record that is malformed, oversized, too deep or names a command is refused when
// it is read, before anything else happens.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadPolicy, parsePolicy } from "../../src/policy/load-policy.js";
import type { Policy } from "../../src/policy/policy-schema.js";
import { compareRecord, type EffectiveSide, sameModelContext } from "../../src/replay/compare-record.js";
import { jsonDepth, loadRecord } from "../../src/replay/load-record.js";
import { copyRecord, rehash } from "../support/record-files.js";

const base = loadPolicy("workspace-write");
const side = (policy: Policy, over: Partial<EffectiveSide> = {}): EffectiveSide => ({
  policy,
  image: "sandbox-run/pi:1",
  workspace: { host: "/src/app", sandbox: "/workspace" },
  writableRoots: [],
  extraArgs: [],
  ...over,
});
const policy = (over: Record<string, unknown>) => parsePolicy({ ...base, ...over }, "test");
const refused = (recorded: EffectiveSide, now: EffectiveSide = side(base)) =>
  compareRecord(recorded, now)
    .filter((d) => d.needsMore)
    .map((d) => d.field);

describe("compareRecord: what a record may not ask for", () => {
  it("the same call: no difference", () => {
    expect(compareRecord(side(base), side(base))).toEqual([]);
  });

  it("more network, an allowed domain the caller does not allow, a host CA bundle", () => {
    expect(refused(side(policy({ network: "open" })))).toEqual(["policy.network"]);
    const npm = policy({ network: "allowlist", allowedDomains: ["registry.npmjs.org"] });
    const wide = policy({ network: "allowlist", allowedDomains: ["*.npmjs.org", "github.com"] });
    expect(refused(side(npm), side(wide))).toEqual([]);
    expect(refused(side(wide), side(npm))).toEqual(["policy.allowedDomains"]);
    expect(refused(side(policy({ network: "allowlist", allowedDomains: ["*.a.npmjs.org"] })), side(wide))).toEqual([]);
    expect(refused(side(wide), side(policy({ network: "open" })))).toEqual([]);
    expect(refused(side(policy({ trustHostCaBundle: true })))).toEqual(["policy.trustHostCaBundle"]);
  });

  it("a host folder mounted, a secret (or one read from elsewhere), writable roots", () => {
    expect(refused(side(policy({ readOnlyMounts: ["/etc/ssl"] })))).toEqual(["policy.readOnlyMounts"]);
    expect(
      refused(side(policy({ readOnlyMounts: ["/etc/ssl"] })), side(policy({ readOnlyMounts: ["/etc/ssl", "/x"] }))),
    ).toEqual([]);
    const secret = (from: unknown) =>
      policy({
        network: "allowlist",
        allowedDomains: ["github.com"],
        secrets: { TOKEN: { hosts: ["github.com"], inject: ["bearer"], ...(from ? { from } : {}) } },
      });
    const plain = policy({ network: "allowlist", allowedDomains: ["github.com"] });
    expect(refused(side(secret({ file: "/root/.ssh/id_rsa" })), side(plain))).toEqual(["policy.secrets.TOKEN"]);
    expect(refused(side(secret({ file: "/root/.ssh/id_rsa" })), side(secret(undefined)))).toEqual([
      "policy.secrets.TOKEN",
    ]);
    expect(refused(side(secret(undefined)), side(secret(undefined)))).toEqual([]);
    expect(refused(side(plain), side(secret(undefined)))).toEqual([]);
    // Writable roots by number: their paths are the recording machine's.
    expect(refused(side(base, { writableRoots: ["/a", "/b"] }), side(base, { writableRoots: ["/c"] }))).toEqual([
      "writableRoots",
    ]);
    expect(
      compareRecord(side(base, { writableRoots: ["/a"] }), side(base, { writableRoots: ["/c"] })).map((d) => [
        d.field,
        d.needsMore,
      ]),
    ).toEqual([["writableRoots", false]]);
    expect(refused(side(base), side(policy({ writableRoots: false })))).toEqual([]);
    expect(refused(side(base, { writableRoots: ["/a"] }), side(policy({ writableRoots: false })))).toEqual([
      "policy.writableRoots",
      "writableRoots",
    ]);
  });

  it("weaker isolation: runc where the caller runs runsc, a writable workspace where it is read-only", () => {
    expect(refused(side(base), side(policy({ runtime: "runsc" })))).toEqual(["policy.runtime"]);
    expect(refused(side(policy({ runtime: "runsc" })), side(base))).toEqual([]);
    const readOnly = loadPolicy("read-only");
    expect(refused(side(base), side(readOnly))).toContain("policy.workspace");
    expect(refused(side(readOnly), side(base))).toEqual([]);
  });

  it("limits, tools, protections, the image, paths and Pi flags are reported, never refused", () => {
    const recorded = side(
      policy({
        limits: { ...base.limits, memoryMb: 99_999, timeoutSeconds: 9_999 },
        protectedPaths: [],
        disableBuiltinProtections: ["git-metadata"],
        tools: ["read"],
        workspaceMode: "copy",
        image: "evil/image:1",
      }),
      {
        image: "evil/image:1",
        workspace: { host: "/elsewhere", sandbox: "/home/user/app" },
        extraArgs: ["--thinking", "high"],
      },
    );
    const differences = compareRecord(recorded, side(base));
    expect(differences.filter((d) => d.needsMore)).toEqual([]);
    expect(differences.map((d) => d.field)).toEqual([
      "policy.limits.memoryMb",
      "policy.limits.timeoutSeconds",
      "policy.disableBuiltinProtections",
      "policy.image",
      "policy.protectedPaths",
      "policy.tools",
      "policy.workspaceMode",
      "image",
      "workspace",
      "workspacePath",
      "extraArgs",
    ]);
    expect(differences.find((d) => d.field === "image")).toMatchObject({
      recorded: "evil/image:1",
      now: "sandbox-run/pi:1",
    });
    expect(sameModelContext(recorded.policy, base)).toBe(false);
    expect(sameModelContext(policy({ limits: { ...base.limits, memoryMb: 512 } }), base)).toBe(true);
  });
});

describe("loadRecord: a record is read with caps and schemas", () => {
  const recordings = path.resolve(import.meta.dirname, "../../examples/workflow/recordings");
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sr-record-caps-")));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** A copy of recording 1 changed by `edit`, its SHA256SUMS recomputed as a forger would. */
  function forged(edit: (copy: string) => void): string {
    const copy = copyRecord(path.join(recordings, "1"), dir);
    edit(copy);
    rehash(copy);
    return copy;
  }
  const editJson = (file: string, change: (value: Record<string, unknown>) => void) => {
    const value = JSON.parse(fs.readFileSync(file, "utf8"));
    change(value);
    fs.writeFileSync(file, JSON.stringify(value));
  };

  it("a models.json entry with a !command, a relative or unnormalised workspace path: refused", () => {
    const command = forged((c) =>
      editJson(path.join(c, "replay.json"), (call) => {
        const providers = (call.sandboxModelsJson as { providers: Record<string, Record<string, unknown>> }).providers;
        for (const provider of Object.values(providers)) provider.compat = { note: "!touch /tmp/pwned" };
      }),
    );
    expect(() => loadRecord(command)).toThrow(/"!command" value: a record never names a command/);
    for (const sandbox of ["workspace", "/a/../etc", "/a/", "/a\nb"]) {
      const bad = forged((c) =>
        editJson(path.join(c, "replay.json"), (call) => {
          call.workspace = { host: "/src", sandbox };
        }),
      );
      expect(() => loadRecord(bad), sandbox).toThrow(/replay\.json: workspace\.sandbox/);
    }
  });

  it("a policy.json that is not a policy: refused, naming the field", () => {
    const bad = forged((c) =>
      editJson(path.join(c, "policy.json"), (p) => {
        p.network = "everything";
      }),
    );
    expect(() => loadRecord(bad)).toThrow(/policy\.json: network/);
  });

  it("JSON nested past the cap, too many files, a FIFO: refused without hanging", () => {
    const deep = forged((c) => fs.writeFileSync(path.join(c, "result.json"), `${"[".repeat(5000)}${"]".repeat(5000)}`));
    expect(() => loadRecord(deep)).toThrow(/result\.json nests deeper than 256 levels/);
    const many = forged((c) => {
      for (let i = 0; i < 70; i++) fs.writeFileSync(path.join(c, `extra-${i}`), "x");
    });
    expect(() => loadRecord(many)).toThrow(/holds 81 entries; a record has at most 64/);
    const fifo = copyRecord(path.join(recordings, "1"), dir);
    fs.rmSync(path.join(fifo, "events.jsonl"));
    spawnSync("mkfifo", [path.join(fifo, "events.jsonl")]);
    expect(() => loadRecord(fifo)).toThrow(/events\.jsonl is not a regular file/);
  });

  it("jsonDepth counts brackets outside strings only", () => {
    expect(jsonDepth('{"a":[1,{"b":"[[[["}]}', 100)).toBe(3);
    expect(jsonDepth('"\\"[[["', 100)).toBe(0);
    expect(jsonDepth("[".repeat(50), 10)).toBe(11);
  });
});
