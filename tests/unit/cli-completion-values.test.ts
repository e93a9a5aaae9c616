// After a flag that takes one of a few words (`--runtime`, `--hand-back`, `--format` ...), completion
// offers those words, not the folder's file names (review, session 37: `--runtime <Tab>` listed
// files). The words come from flag-values.ts; the second test ties that table to the checks that
// parse each flag, so neither can change alone.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FLAG_VALUES } from "../../src/cli/flag-values.js";
import { runCliInProcess } from "../support/in-process-cli.js";

function cli(argv: string[]) {
  return runCliInProcess(argv, {
    SANDBOX_RUN_MODEL: "anthropic/claude-sonnet-4-5",
    ANTHROPIC_API_KEY: "sk-ant-not-a-real-key",
  });
}

describe("completion of a flag's words", () => {
  let dir: string;
  let bashScript: string;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-completion-"));
    // Files whose names start like the flags' words: a file name completed here is the old behaviour.
    for (const name of ["runc-notes.txt", "branch.md", "bind.txt", "html.txt", "linux.txt"])
      fs.writeFileSync(path.join(dir, name), "");
    const run = await cli(["completion", "bash"]);
    expect(run.code, run.stderr).toBe(0);
    bashScript = path.join(dir, "sandbox-run.bash");
    fs.writeFileSync(bashScript, run.stdout);
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** What bash completes for the words (the last one being completed), in `dir`. */
  function complete(words: string[]): string[] {
    const quoted = words.map((w) => `'${w.replace(/'/g, "'\\''")}'`).join(" ");
    const script = `source '${bashScript}'; COMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; _sandbox_run; printf '%s\\n' "\${COMPREPLY[@]}"`;
    const result = spawnSync("bash", ["--norc", "-c", script], { cwd: dir, encoding: "utf8" });
    expect(result.status, result.stderr).toBe(0);
    return result.stdout.split("\n").filter(Boolean).sort();
  }

  it("bash offers the flag's words after it, under every command that has it; file names after other valued flags", () => {
    expect(complete(["sandbox-run", "--runtime", ""])).toEqual(["runc", "runsc"]);
    expect(complete(["sandbox-run", "--runtime", "r"])).toEqual(["runc", "runsc"]);
    expect(complete(["sandbox-run", "--hand-back", "b"])).toEqual(["branch"]);
    expect(complete(["sandbox-run", "--workspace", "b"])).toEqual(["bind"]);
    expect(complete(["sandbox-run", "--sandbox", ""])).toEqual(["danger-full-access", "read-only", "workspace-write"]);
    expect(complete(["sandbox-run", "--platform", "linux/a"])).toEqual(["linux/amd64", "linux/arm64"]);
    expect(complete(["sandbox-run", "batch", "--runtime", ""])).toEqual(["runc", "runsc"]);
    expect(complete(["sandbox-run", "replay", "rec", "--replay-mode", ""])).toEqual(["lenient", "strict"]);
    expect(complete(["sandbox-run", "show", "rec", "--format", "h"])).toEqual(["html"]);
    // No word matches: nothing (the script turns bash's file-name fallback off for these flags).
    expect(complete(["sandbox-run", "--runtime", "x"])).toEqual([]);
    // A flag that takes a file still completes file names.
    expect(complete(["sandbox-run", "--models", "bra"])).toEqual(["branch.md"]);
  });

  it("fish offers the same words, without file names", async () => {
    const fish = await cli(["completion", "fish"]);
    expect(fish.code).toBe(0);
    expect(fish.stdout).toMatch(/ -l runtime -x -a 'runc runsc' /);
    expect(fish.stdout).toMatch(/ -l format -x -a 'html md' /);
    expect(fish.stdout).toMatch(/ -l models -r -F /);
  });

  it("the table's words are the ones each flag's check accepts", async () => {
    const record = path.join(dir, "no-such-record");
    /** The command line that gives the flag a word (a dry run, or a record that does not exist). */
    const argvWith: Record<string, (word: string) => string[]> = {
      "--sandbox": (w) => ["--dry-run", "--cwd", dir, "--sandbox", w, "task"],
      "--runtime": (w) => ["--dry-run", "--cwd", dir, "--runtime", w, "task"],
      "--workspace": (w) => ["--dry-run", "--cwd", dir, "--workspace", w, "task"],
      "--hand-back": (w) => ["--dry-run", "--cwd", dir, "--hand-back", w, "task"],
      "--platform": (w) => ["--dry-run", "--cwd", dir, "--platform", w, "task"],
      "--replay-mode": (w) => ["replay", record, "--replay-mode", w],
      "--replay-speed": (w) => ["replay", record, "--replay-speed", w],
      "--format": (w) => ["show", record, "--format", w],
    };
    expect(Object.keys(argvWith).sort()).toEqual(Object.keys(FLAG_VALUES).sort());
    const aboutTheFlag = (flag: string, stderr: string) =>
      stderr
        .split("\n")
        .find((line) => line.includes(`${flag} must be`) || line.includes(`${flag} names the platform`));
    for (const [flag, argv] of Object.entries(argvWith)) {
      // A word the check refuses: its message names every word of the table ...
      const refused = await cli(argv("nope"));
      expect(refused.code, `${flag}: ${refused.stderr}`).toBe(2);
      expect(aboutTheFlag(flag, refused.stderr), refused.stderr).toBeDefined();
      for (const word of FLAG_VALUES[flag]!) expect(refused.stderr, `${flag} names ${word}`).toContain(word);
      // ... and each word of the table passes the check (the run may stop later, for another reason).
      for (const word of FLAG_VALUES[flag]!) {
        const run = await cli(argv(word));
        expect(aboutTheFlag(flag, run.stderr), `${flag} ${word}: ${run.stderr}`).toBeUndefined();
      }
    }
  });
});
