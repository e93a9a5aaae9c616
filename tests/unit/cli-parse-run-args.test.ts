// The CLI's run flags -> library options: numbers, enums, repeatable flags and KEY=VALUE pairs,
// each rejected with a usage error naming the flag when it is wrong.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseEnvFlags, parseRunFlags } from "../../src/cli/parse-run-args.js";
import { isSandboxRunError } from "../../src/errors.js";

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-cli-flags-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function usageMessage(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (isSandboxRunError(error) && error.code === "usage") return error.shortMessage;
    throw error;
  }
  throw new Error("expected a usage error");
}

describe("parseRunFlags", () => {
  it("maps every flag to its option", () => {
    const schemaFile = path.join(dir, "s.json");
    fs.writeFileSync(schemaFile, JSON.stringify({ type: "object", properties: { a: { type: "string" } } }));
    const options = parseRunFlags(
      {
        schema: schemaFile,
        cwd: "/w",
        sandbox: "read-only",
        policy: "p.json",
        writable: ["/a", "/b"],
        model: "p/m",
        models: "m.json",
        env: ["A=1"],
        timeout: "1.5",
        runtime: "runsc",
        contextFiles: true,
      },
      {},
    );
    expect(options).toMatchObject({
      schema: { type: "object", properties: { a: { type: "string" } } },
      cwd: "/w",
      sandbox: "read-only",
      policy: "p.json",
      additionalWritableDirectories: ["/a", "/b"],
      model: "p/m",
      models: "m.json",
      env: { A: "1" },
      timeoutMs: 1500,
      runtime: "runsc",
      contextFiles: true,
    });
  });

  it("`--prompt-file -` is stdin, not a file to judge as the workspace's (review, session 33: strict mode refused it); an empty --cwd is passed on to be refused", () => {
    expect(parseRunFlags({ promptFile: "-" }, {}).configFiles).toBeUndefined();
    expect(parseRunFlags({ promptFile: "task.md" }, {}).configFiles).toEqual({ schema: undefined, prompt: "task.md" });
    expect(parseRunFlags({ cwd: "" }, {}).cwd).toBe("");
  });

  it("leaves unset flags unset, so library defaults and other layers apply", () => {
    expect(parseRunFlags({}, {})).toEqual({});
  });

  it.each([
    [{ sandbox: "yolo" }, "--sandbox must be read-only, workspace-write or danger-full-access"],
    [{ timeout: "abc" }, '--timeout must be a positive number of seconds, not "abc"'],
    [{ timeout: "0" }, "--timeout must be a positive number"],
    [{ timeout: "-3" }, "--timeout must be a positive number"],
    [{ timeout: "1e20" }, "--timeout 1e20 is longer than a run may last (86400 seconds, a day)"],
    [{ runtime: "kata" }, '--runtime must be runc or runsc, not "kata"'],
    [
      { schema: "/nonexistent/schema.json" },
      "Cannot read the schema file /nonexistent/schema.json: it does not exist.",
    ],
  ])("rejects %j", (flags, message) => {
    expect(usageMessage(() => parseRunFlags(flags, {}))).toContain(message);
  });

  it("reads a schema file that starts with a byte-order mark; a *.yaml schema is said to be read as JSON (review, session 31)", () => {
    const bom = path.join(dir, "bom.json");
    fs.writeFileSync(bom, `\uFEFF${JSON.stringify({ type: "object", required: ["a"] })}`);
    expect(parseRunFlags({ schema: bom }, {}).schema).toEqual({ type: "object", required: ["a"] });
    const yaml = path.join(dir, "schema.yaml");
    fs.writeFileSync(yaml, "type: object\n");
    const hint = (() => {
      try {
        parseRunFlags({ schema: yaml }, {});
      } catch (error) {
        return isSandboxRunError(error) ? error.hint : String(error);
      }
    })();
    expect(hint).toContain("(a schema file is read as JSON, whatever its name)");
  });

  it("rejects a schema file that is not JSON", () => {
    const file = path.join(dir, "broken.json");
    fs.writeFileSync(file, "{ type: object");
    expect(usageMessage(() => parseRunFlags({ schema: file }, {}))).toContain(
      `The schema file ${file} is not valid JSON`,
    );
  });
});

describe("parseEnvFlags", () => {
  it("takes KEY=VALUE literally, including empty values and '=' inside values", () => {
    expect(parseEnvFlags(["A=1", "B=", "C=x=y"], {})).toEqual({ A: "1", B: "", C: "x=y" });
  });

  it("passes the host's value for a bare KEY, like docker run -e KEY", () => {
    expect(parseEnvFlags(["HOST_VAR"], { HOST_VAR: "from-host" })).toEqual({ HOST_VAR: "from-host" });
  });

  it("rejects a bare KEY the host does not have", () => {
    expect(usageMessage(() => parseEnvFlags(["MISSING_VAR"], {}))).toBe(
      "--env MISSING_VAR: the host has no variable MISSING_VAR.",
    );
  });

  it.each(["1A=x", "=x", "A B=x", "-A"])("rejects the malformed entry %j", (entry) => {
    expect(usageMessage(() => parseEnvFlags([entry], {}))).toBe(`--env "${entry}" is not KEY=VALUE.`);
  });
});
