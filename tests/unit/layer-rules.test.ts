// The layer rules hold: docs/architecture.md's "knows nothing of" table is what .dependency-cruiser.cjs
// checks. In a throw-away copy of src/ (with the config, the document and tsconfig.json), one probe
// module per forbidden import is added where the table says it must not be; dependency-cruiser, run
// as `npm run lint` runs it, must refuse each with the rule of its row, and let an allowed import
// through. Then the table loses a row, and the import that row forbade passes: the rules come from
// the document, not from a second list.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "../..");
const depcruise = path.join(root, "node_modules/.bin/depcruise");

/** A forbidden import: a probe module in `from` (a folder, or the leaf's util/) importing `to`. */
interface Probe {
  from: string;
  to: string;
  rule: string;
  typeOnly?: boolean;
}

const PROBES: Probe[] = [
  // The imports that passed the lint before the table became rules.
  { from: "gateway/", to: "proxy/egress-proxy.ts", rule: "knows-nothing-of:gateway/" },
  { from: "proxy/", to: "gateway/model-gateway.ts", rule: "knows-nothing-of:proxy/" },
  { from: "proxy/", to: "gateway/provider-routes.ts", rule: "knows-nothing-of:proxy/", typeOnly: true },
  { from: "workspace/", to: "engine/engine.ts", rule: "knows-nothing-of:workspace/" },
  { from: "workspace/", to: "gateway/provider-routes.ts", rule: "knows-nothing-of:workspace/" },
  { from: "policy/", to: "gateway/provider-routes.ts", rule: "knows-nothing-of:policy/" },
  { from: "policy/", to: "proxy/domain-filter.ts", rule: "knows-nothing-of:policy/" },
  { from: "image/", to: "relay/relay-protocol.ts", rule: "knows-nothing-of:image/" },
  { from: "image/", to: "workspace-transfer/pack-tree.ts", rule: "knows-nothing-of:image/" },
  // One for every other row.
  { from: "util/", to: "policy/load-policy.ts", rule: "knows-nothing-of:agent.ts,errors.ts,sandbox-contract.ts,util/" },
  { from: "engine/", to: "pi/pi-args.ts", rule: "knows-nothing-of:engine/" },
  { from: "pi/", to: "gateway/provider-routes.ts", rule: "knows-nothing-of:pi/" },
  { from: "workspace-transfer/", to: "relay/relay-protocol.ts", rule: "knows-nothing-of:workspace-transfer/" },
  { from: "hand-back/", to: "engine/engine.ts", rule: "knows-nothing-of:hand-back/" },
  { from: "relay/", to: "workspace/fd-walk.ts", rule: "knows-nothing-of:relay/" },
  { from: "warm/", to: "gateway/model-gateway.ts", rule: "knows-nothing-of:warm/" },
  { from: "record/", to: "engine/engine.ts", rule: "knows-nothing-of:record/" },
  { from: "replay/", to: "engine/engine.ts", rule: "knows-nothing-of:replay/" },
  { from: "show/", to: "record/run-recorder.ts", rule: "knows-nothing-of:show/" },
  { from: "http/", to: "proxy/egress-proxy.ts", rule: "knows-nothing-of:http/" },
  { from: "scripted-model/", to: "engine/engine.ts", rule: "knows-nothing-of:scripted-model/" },
  { from: "demo/", to: "gateway/provider-routes.ts", rule: "knows-nothing-of:demo/" },
  // The rules beside the table.
  { from: "run/plan/", to: "gateway/model-gateway.ts", rule: "plan-starts-nothing" },
  { from: "record/", to: "run/execute-run.ts", rule: "parts-never-import-what-is-above-them" },
  { from: "cli/", to: "run/execute-run.ts", rule: "cli-uses-the-public-face" },
];
/** An import the table allows (the gateway knows Pi's side), which must pass. */
const ALLOWED: Probe = { from: "gateway/", to: "pi/pi-args.ts", rule: "" };

let copy: string;

function probeFile(probe: Probe, index: number): string {
  return path.join("src", probe.from, `zz-layer-probe-${index}.ts`);
}

/** Writes the probes into the copy and runs dependency-cruiser on them: rule names by probe file. */
function cruise(probes: Probe[]): Map<string, string[]> {
  const files = probes.map((probe, i) => {
    const file = probeFile(probe, i);
    const target = path.relative(path.dirname(file), path.join("src", probe.to)).replace(/\.ts$/, ".js");
    const line = probe.typeOnly ? `import type {} from "${target}";\n` : `import "${target}";\n`;
    fs.writeFileSync(path.join(copy, file), line);
    return file;
  });
  let out: string;
  try {
    out = execFileSync(
      depcruise,
      [...files, "--config", ".dependency-cruiser.cjs", "--output-type", "json", "--max-depth", "1"],
      { cwd: copy, encoding: "utf8", maxBuffer: 64 << 20 },
    );
  } catch (error) {
    // Violations make depcruise exit non-zero; its report is still on stdout.
    out = (error as { stdout: string }).stdout;
  }
  for (const file of files) fs.rmSync(path.join(copy, file));
  const report = JSON.parse(out) as { summary: { violations: Array<{ from: string; rule: { name: string } }> } };
  const byFile = new Map<string, string[]>(files.map((f) => [f, []]));
  for (const v of report.summary.violations) byFile.get(v.from)?.push(v.rule.name);
  return byFile;
}

beforeAll(() => {
  copy = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-layers-"));
  fs.cpSync(path.join(root, "src"), path.join(copy, "src"), { recursive: true });
  fs.mkdirSync(path.join(copy, "docs"));
  fs.copyFileSync(path.join(root, "docs/architecture.md"), path.join(copy, "docs/architecture.md"));
  for (const file of [".dependency-cruiser.cjs", "tsconfig.json", "package.json"]) {
    fs.copyFileSync(path.join(root, file), path.join(copy, file));
  }
  fs.symlinkSync(path.join(root, "node_modules"), path.join(copy, "node_modules"));
});

afterAll(() => {
  if (copy) fs.rmSync(copy, { recursive: true, force: true });
});

// Each test runs dependency-cruiser in its own process: seconds alone, more on a loaded machine.
describe("the layer rules", { timeout: 60_000 }, () => {
  it("has one rule per row of docs/architecture.md's table, show/, warm/ and hand-back/ among them", () => {
    const config = createRequire(import.meta.url)(path.join(root, ".dependency-cruiser.cjs")) as {
      forbidden: Array<{ name: string }>;
    };
    const table = config.forbidden.map((r) => r.name).filter((name) => name.startsWith("knows-nothing-of:"));
    const rows = fs
      .readFileSync(path.join(root, "docs/architecture.md"), "utf8")
      .split("\n")
      .filter((line) => /^\| (`|the leaf:)/.test(line));
    expect(table).toHaveLength(rows.length);
    expect(table).toEqual(expect.arrayContaining(PROBES.map((p) => p.rule).filter((r) => r.startsWith("knows"))));
    for (const folder of ["show/", "warm/", "hand-back/"]) expect(table).toContain(`knows-nothing-of:${folder}`);
  });

  it("refuses an import that each row forbids (in a copy of src/), and lets an allowed one through", () => {
    const probes = [...PROBES, ALLOWED];
    const found = cruise(probes);
    probes.forEach((probe, i) => {
      const rules = found.get(probeFile(probe, i));
      if (probe === ALLOWED) expect(rules, `${probe.from} -> ${probe.to}`).toEqual([]);
      else expect(rules, `${probe.from} -> ${probe.to}`).toContain(probe.rule);
    });
  });

  it("takes the rules from the document: a row dropped from the table no longer forbids", () => {
    const doc = path.join(copy, "docs/architecture.md");
    const original = fs.readFileSync(doc, "utf8");
    try {
      const withoutProxy = original
        .split("\n")
        .filter((line) => !line.startsWith("| `proxy/` |"))
        .join("\n");
      expect(withoutProxy).not.toBe(original);
      fs.writeFileSync(doc, withoutProxy);
      const probe = PROBES.find((p) => p.from === "proxy/" && !p.typeOnly)!;
      expect([...cruise([probe]).values()][0]).toEqual([]);
    } finally {
      fs.writeFileSync(doc, original);
    }
  });

  it("stops the lint when the table cannot be read as rules", () => {
    const doc = path.join(copy, "docs/architecture.md");
    const original = fs.readFileSync(doc, "utf8");
    try {
      // "everything but" without "the leaf" would silently forbid the leaf: refused.
      fs.writeFileSync(
        doc,
        original.replace("| everything but `http/` and the leaf (runs,", "| everything but `http/` (runs,"),
      );
      expect(() =>
        execFileSync(depcruise, ["src", "--config", ".dependency-cruiser.cjs", "--max-depth", "1"], {
          cwd: copy,
          encoding: "utf8",
          stdio: "pipe",
        }),
      ).toThrow(/must end "and the leaf"/);
    } finally {
      fs.writeFileSync(doc, original);
    }
  });
});
