// A non-root caller's bind-mode run: its sandbox runs as the caller's uid, owns the folders the run
// makes and may `chmod 555` them, the workspace root included. The host's removal of a FIFO there,
// and its restore, must still be done (review, session 38: a FIFO in a 0555 folder survived a run
// that succeeded; a hook planted under a 0555 root was NOT restored, EACCES). The judgement runs as
// uid 1500 in a process of its own (tests/support/watch-as-user.ts): root writes in any folder.
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { violationMessage } from "../../src/workspace/violation-message.js";
import type { WorkspaceReport } from "../../src/workspace/workspace-watch.js";
import { AS_CALLER, asCallersSandbox, CALLER_UID, giveToCaller } from "../support/caller-uid.js";
import { tempTrees } from "../support/temp-trees.js";

const REPO = fileURLToPath(new URL("../..", import.meta.url));
const SCRIPT = fileURLToPath(new URL("../support/watch-as-user.ts", import.meta.url));
// Under the host's temp dir (the test run's own is 0700 root: another uid could not reach in).
const { dir, tree } = tempTrees("sandbox-run-watch-user-", () => process.env.SANDBOX_RUN_TESTS_HOST_TMP ?? os.tmpdir());

/** A tree the caller owns. */
const callersTree = (files: Record<string, string>) => giveToCaller(tree(files));
const sandbox = asCallersSandbox;

/** The caller's snapshot of `root`, then `run` (the run's changes), then its judgement and restore. */
async function judgedByCaller(root: string, run: () => void): Promise<WorkspaceReport> {
  const home = dir();
  fs.chownSync(home, CALLER_UID, CALLER_UID);
  const spec = JSON.stringify({ root, stateDir: path.join(home, "state") });
  const child = spawn("setpriv", [...AS_CALLER, process.execPath, "--import", "tsx", SCRIPT, spec], {
    cwd: REPO,
    env: { ...process.env, TMPDIR: home, HOME: home },
  });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  try {
    for await (const line of readline.createInterface({ input: child.stdout })) {
      const message = JSON.parse(line) as { kind: string; report?: WorkspaceReport };
      if (message.kind === "ready") {
        run();
        child.stdin.write("\n");
      } else if (message.kind === "done") return message.report!;
    }
  } finally {
    child.kill();
  }
  throw new Error(`the watch ended without a report: ${stderr}`);
}

const modeOf = (p: string) => (fs.lstatSync(p).mode & 0o7777).toString(8);

describe("a non-root caller's run that made folders read-only (review, session 38)", () => {
  it("a FIFO in a 0555 folder and in the 0555 root is removed and reported; both folders keep the mode the run gave them", async () => {
    const root = callersTree({ "README.md": "hi\n" });
    const report = await judgedByCaller(root, () =>
      sandbox(root, "mkdir ro && mkfifo ro/.nvmrc .nvmrc && chmod 555 ro . "),
    );
    expect(report.specialRemoved.files.map((f) => `${f.path} ${f.kind}`).sort()).toEqual([
      ".nvmrc fifo",
      "ro/.nvmrc fifo",
    ]);
    expect(report.violations).toEqual([]);
    expect(fs.existsSync(path.join(root, ".nvmrc"))).toBe(false);
    expect(fs.existsSync(path.join(root, "ro/.nvmrc"))).toBe(false);
    // A read-only folder is no violation (directory-modes judges group/world write and setgid):
    // the owner write lent for the unlink is taken back.
    expect([modeOf(root), modeOf(path.join(root, "ro"))]).toEqual(["555", "555"]);
  });

  it("a FIFO the caller cannot remove (its folder is not the caller's) fails the run, named as not restored", async () => {
    const root = callersTree({ "README.md": "hi\n" });
    const shared = path.join(root, "shared");
    fs.mkdirSync(shared, { mode: 0o755 }); // root's: the caller may not change it or its mode
    const report = await judgedByCaller(root, () => execFileSync("mkfifo", [path.join(shared, "package.json")]));
    expect(report.violations.map((v) => `${v.path} ${v.change} ${v.rule}`)).toEqual([
      "shared/package.json created special-files",
    ]);
    expect(report.restore?.clean).toBe(false);
    expect(report.restore?.notRestored).toEqual([
      { path: "shared/package.json", why: "EACCES; the fifo is still there" },
    ]);
    expect(fs.lstatSync(path.join(shared, "package.json")).isFIFO()).toBe(true);
    const { message, hint } = violationMessage(report, "workspace-write");
    expect(message).toContain("NOT restored: shared/package.json (EACCES; the fifo is still there)");
    expect(hint).toContain("cannot be allowed by a policy");
    expect(hint).not.toContain("disableBuiltinProtections");
  });

  it("a hook planted and an .envrc rewritten under 0555 folders and a 0555 root are put back, the folders' modes as the run left them", async () => {
    const root = callersTree({ "README.md": "hi\n", "sub/.envrc": "export A=1\n" });
    const report = await judgedByCaller(root, () =>
      sandbox(
        root,
        "echo 'PATH_add evil' > sub/.envrc && chmod 555 sub && mkdir .husky && echo evil > .husky/pre-commit && chmod 555 .husky . ",
      ),
    );
    expect(report.violations.map((v) => `${v.path} ${v.change}`).sort()).toEqual([
      ".husky created",
      ".husky/pre-commit created",
      "sub/.envrc modified",
    ]);
    expect(report.restore?.notRestored).toEqual([]);
    expect(report.restore?.clean).toBe(true);
    expect(fs.existsSync(path.join(root, ".husky"))).toBe(false);
    expect(fs.readFileSync(path.join(root, "sub/.envrc"), "utf8")).toBe("export A=1\n");
    expect([modeOf(root), modeOf(path.join(root, "sub"))]).toEqual(["555", "555"]);
    // Nothing of the restore's own is left beside what it put back.
    expect(fs.readdirSync(path.join(root, "sub"))).toEqual([".envrc"]);
  });
});

describe("a non-root caller's run that made the root or folders unreadable (review, session 38, round 3)", () => {
  it.each(["000", "111", "444"])(
    "a root left %s is set back to its recorded mode first, then judged: a planted .envrc is removed",
    async (mode) => {
      const root = callersTree({ "README.md": "hi\n" });
      fs.chmodSync(root, 0o750);
      const report = await judgedByCaller(root, () =>
        sandbox(root, `echo 'PATH_add evil' > .envrc && chmod ${mode} .`),
      );
      expect(report.violations.map((v) => `${v.path || "."} ${v.change} ${v.rule}`)).toEqual([
        ". unreadable walk",
        ".envrc created .envrc",
      ]);
      expect(report.violations[0]!.detail).toBe(
        `the run left it mode 0${mode}, which the host cannot list or search; set back to 0750`,
      );
      expect(report.restore?.modes).toEqual(["."]);
      expect(report.restore?.clean).toBe(true);
      expect(modeOf(root)).toBe("750");
      expect(fs.readdirSync(root)).toEqual(["README.md"]);
    },
  );

  it.each(["444", "600"])(
    "a folder left %s (listable, not searchable) is a violation: its mode is set back and what it hid is judged",
    async (mode) => {
      const root = callersTree({ "README.md": "hi\n", "pkg/a.txt": "a\n" });
      const report = await judgedByCaller(root, () =>
        sandbox(root, `echo 'PATH_add evil' > pkg/.envrc && echo b > pkg/a.txt && chmod ${mode} pkg`),
      );
      expect(report.violations.map((v) => `${v.path} ${v.change} ${v.rule}`)).toEqual([
        "pkg unreadable walk",
        "pkg/.envrc created .envrc",
      ]);
      expect(report.restore?.notRestored).toEqual([]);
      expect(report.restore?.clean).toBe(true);
      expect(modeOf(path.join(root, "pkg"))).toBe("755");
      expect(fs.readdirSync(path.join(root, "pkg")).sort()).toEqual(["a.txt"]);
    },
  );
});
