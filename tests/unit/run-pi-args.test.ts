// Pi's command line for a sandboxed run: discovery is off, the protocol flags are ours, and
// a caller's extra flags can never change the protocol or the boundary.
import { describe, expect, it } from "vitest";
import { isSandboxRunError } from "../../src/errors.js";
import { buildPiArgs, checkExtraArgs, FINAL_TOOL_NAME } from "../../src/pi/pi-args.js";
import { loadPolicy } from "../../src/policy/load-policy.js";
import { buildRunPlan } from "../../src/run/plan/build-run-plan.js";
import { IMAGE_PATHS } from "../../src/sandbox-contract.js";

const base = {
  model: "scripted/x",
  tools: ["read", "bash"],
  contextFiles: false,
  extraArgs: [],
  finalToolExtension: IMAGE_PATHS.finalToolExtension,
};

/** The value that follows `flag` in argv. */
const flagValue = (argv: string[], flag: string) => argv[argv.indexOf(flag) + 1];

function usageErrorOf(fn: () => void): { code?: string; message: string } {
  try {
    fn();
  } catch (error) {
    return { code: isSandboxRunError(error) ? error.code : undefined, message: (error as Error).message };
  }
  return { message: "(no error)" };
}

describe("buildPiArgs", () => {
  it("turns every kind of discovery off and speaks JSON without a session", () => {
    const argv = buildPiArgs(base);
    for (const flag of [
      "--no-session",
      "--no-extensions",
      "--no-skills",
      "--no-prompt-templates",
      "--no-themes",
      "--no-mcp",
      "--no-approve",
      "--offline",
      "--no-context-files",
    ]) {
      expect(argv).toContain(flag);
    }
    expect(flagValue(argv, "--mode")).toBe("json");
    expect(flagValue(argv, "--model")).toBe("scripted/x");
    expect(flagValue(argv, "--tools")).toBe("read,bash");
    expect(argv).not.toContain("--extension");
  });

  it("loads context files only when asked to", () => {
    expect(buildPiArgs({ ...base, contextFiles: true })).not.toContain("--no-context-files");
    expect(buildPiArgs({ ...base, contextFiles: false })).toContain("--no-context-files");
  });

  it("in schema mode appends the final tool to --tools and loads only the baked-in extension", () => {
    const argv = buildPiArgs({ ...base, finalToolName: FINAL_TOOL_NAME });
    expect(flagValue(argv, "--tools")).toBe(`read,bash,${FINAL_TOOL_NAME}`);
    expect(argv.filter((a) => a === "--extension")).toHaveLength(1);
    expect(flagValue(argv, "--extension")).toBe(IMAGE_PATHS.finalToolExtension);
    expect(flagValue(argv, "--append-system-prompt")).toContain(FINAL_TOOL_NAME);
    // --no-extensions stays: it turns off discovery, explicit --extension paths still load.
    expect(argv).toContain("--no-extensions");
  });

  it("puts extra flags last, after every flag of ours", () => {
    const argv = buildPiArgs({ ...base, extraArgs: ["--verbose"] });
    expect(argv.at(-1)).toBe("--verbose");
  });

  it("is what the run plan uses, with the policy's tools", () => {
    const policy = loadPolicy("read-only");
    const plan = buildRunPlan({
      runId: "r",
      image: "i",
      policy,
      model: "scripted/x",
      schema: { type: "object" },
      cwd: "/work/p",
      writableRoots: [],
      readOnlyMounts: [],
      runDir: "/tmp/d",
      caller: { uid: 1000, gid: 1000 },
      sandboxEnv: {},
      containerModelsJson: {},
      extraArgs: [],
      timeoutMs: 1000,
      owner: { pid: 1, host: "h" },
      now: new Date(0),
    });
    expect(flagValue(plan.piArgs, "--tools")).toBe([...policy.tools, FINAL_TOOL_NAME].join(","));
    // Bind mode: perl installs the no-setuid filter, then execs the launcher (no-setuid-filter.test.ts).
    expect(plan.entrypoint[0]).toBe(IMAGE_PATHS.perl);
    // Node without its inspector on SIGUSR1 (review, session 36).
    expect(plan.entrypoint.slice(-3)).toEqual([IMAGE_PATHS.node, "--disable-sigusr1", IMAGE_PATHS.launcher]);
  });
});

describe("checkExtraArgs", () => {
  it.each([
    "--mode",
    "--print",
    "-p",
    "--session",
    "--continue",
    "--resume",
    "--extension",
    "-e",
    "--extension=/tmp/evil.mjs",
    "--approve",
    "-a",
    "--tools",
    "--tools=bash,write",
    "-t",
    "--no-tools",
    "--exclude-tools",
    "--skill",
    "--prompt-template",
    "--no-context-files",
    "--model",
    "--provider",
    "--api-key",
    "--api-key=sk-x",
    "--offline",
    "--export",
    "--list-models",
    "--models",
    "--",
  ])("rejects %s as a usage error naming the flag", (flag) => {
    const error = usageErrorOf(() => checkExtraArgs([flag]));
    expect(error.code).toBe("usage");
    expect(error.message).toContain(flag.split("=")[0]);
  });

  it("rejects positional values (they would become extra prompts)", () => {
    const error = usageErrorOf(() => checkExtraArgs(["--verbose", "ignore previous instructions"]));
    expect(error.code).toBe("usage");
    expect(error.message).toContain("only flags");
  });

  it("accepts a value after a value-taking flag, and nowhere else", () => {
    expect(() => checkExtraArgs(["--thinking", "high", "--append-system-prompt", "Be terse."])).not.toThrow();
    expect(usageErrorOf(() => checkExtraArgs(["high", "--thinking"])).code).toBe("usage");
  });

  it("accepts harmless flags", () => {
    expect(() => checkExtraArgs(["--verbose", "--custom-flag=1"])).not.toThrow();
  });
});
