// The build (`npm run build`) loads zod, Ajv with ajv-formats, and yaml from its one-file bundles in
// dist/vendor (scripts/bundle-vendored.mjs, src/util/vendored.ts), never from the packages' ~250
// files: the CLI's chunks (dist/cli) and the library's modules (dist/util) both find them. A wrong
// path would fall back to the packages in silence, and every CLI call would pay ~150 ms again.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { builtCli } from "../support/harness.js";

const dist = path.resolve(path.dirname(builtCli), "..");
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-vendored-"));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

/** A preload that writes, at exit, every CommonJS module the process loaded. */
const hook = path.join(scratch, "loaded.cjs");
fs.writeFileSync(
  hook,
  'process.on("exit", () => require("node:fs").writeFileSync(process.env.LOADED_OUT, JSON.stringify(Object.keys(require.cache))));\n',
);
const PACKAGE_FILES = /[\\/]node_modules[\\/](zod|ajv|ajv-formats|yaml)[\\/]/;

function loadedBy(args: string[], name: string): { status: number | null; stderr: string; loaded: string[] } {
  const out = path.join(scratch, `${name}.json`);
  const run = spawnSync(process.execPath, ["--require", hook, ...args], {
    cwd: scratch,
    encoding: "utf8",
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      DOCKER_HOST: `unix://${path.join(scratch, "no-engine.sock")}`,
      ANTHROPIC_API_KEY: "sk-ant-not-a-real-key",
      LOADED_OUT: out,
    },
  });
  return { status: run.status, stderr: run.stderr, loaded: JSON.parse(fs.readFileSync(out, "utf8")) };
}

describe("the build loads its vendored bundles", () => {
  it("the CLI: a dry run with a YAML policy (zod, yaml) and a schema (Ajv) loads the three bundles and none of the packages' files", () => {
    const ws = fs.mkdtempSync(path.join(scratch, "ws-"));
    const schema = path.join(scratch, "schema.json");
    fs.writeFileSync(schema, JSON.stringify({ type: "object", properties: { done: { type: "boolean" } } }));
    // A policy file in YAML (JSON is YAML): the built-in read-only policy's content.
    const policy = path.join(scratch, "policy.yaml");
    fs.copyFileSync(path.join(dist, "../policies/read-only.json"), policy);
    const args = [builtCli, "--dry-run", "--cwd", ws, "--model", "anthropic/claude-sonnet-4-5"];
    const run = loadedBy([...args, "--schema", schema, "--policy", policy, "go"], "cli");
    expect(run.status, run.stderr).toBe(0);
    for (const name of ["zod", "ajv", "yaml"]) expect(run.loaded).toContain(path.join(dist, "vendor", `${name}.cjs`));
    expect(run.loaded.filter((file) => PACKAGE_FILES.test(file))).toEqual([]);
  });

  it("the library: its modules in dist/util find the same bundles", () => {
    const vendored = pathToFileURL(path.join(dist, "util/vendored.js")).href;
    const script = [
      `const { requireVendored } = await import(${JSON.stringify(vendored)});`,
      'const missing = () => { throw new Error("no bundle: the package would load"); };',
      'const { z } = requireVendored("zod", missing);',
      'const { Ajv2020, addFormats } = requireVendored("ajv", missing);',
      'const yaml = requireVendored("yaml", missing);',
      "addFormats(new Ajv2020());",
      'console.log(JSON.stringify([z.string().safeParse("x").success, yaml.parse("a: 1").a]));',
    ].join("\n");
    const run = loadedBy(["--input-type=module", "-e", script], "library");
    expect(run.status, run.stderr).toBe(0);
    for (const name of ["zod", "ajv", "yaml"]) expect(run.loaded).toContain(path.join(dist, "vendor", `${name}.cjs`));
    expect(run.loaded.filter((file) => PACKAGE_FILES.test(file))).toEqual([]);
  });
});
