// `sandbox-run show` as a command: where the page goes (next to the record, -o, stdout), what it
// refuses (a folder inside the run's workspace, a link at the name, bad flags), with what to do.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { runCliInProcess } from "../support/in-process-cli.js";
import { tempDir, writeRecord } from "../support/show-records.js";

const cli = runCliInProcess;

describe("sandbox-run show", () => {
  it("writes run.html into the record's folder by default, replacing a link there instead of following it", async () => {
    const parent = tempDir("show-cli-");
    const record = writeRecord(path.join(parent, "rec"), {});
    const target = path.join(parent, "bashrc");
    fs.writeFileSync(target, "original\n");
    fs.symlinkSync(target, path.join(record, "run.html"));
    const { code, stdout, stderr } = await cli(["show", record]);
    expect(code, stderr).toBe(0);
    expect(stdout).toBe(`${path.join(fs.realpathSync(record), "run.html")}\n`);
    expect(fs.readFileSync(target, "utf8")).toBe("original\n");
    expect(fs.lstatSync(path.join(record, "run.html")).isFile()).toBe(true);
    expect(fs.readFileSync(path.join(record, "run.html"), "utf8")).toMatch(/^<!doctype html>/);
  });

  it("-o - and --format md write to stdout; nothing is written to the folder", async () => {
    const record = writeRecord(path.join(tempDir("show-cli-"), "rec"), {});
    const md = await cli(["show", record, "--format", "md"]);
    expect(md.code).toBe(0);
    expect(md.stdout).toMatch(/^## sandbox-run /);
    const html = await cli(["show", record, "-o", "-"]);
    expect(html.stdout).toMatch(/^<!doctype html>/);
    expect(fs.existsSync(path.join(record, "run.html"))).toBe(false);
  });

  it("refuses to write inside the workspace the recorded run lent its sandbox", async () => {
    const parent = tempDir("show-cli-");
    const workspace = path.join(parent, "ws");
    fs.mkdirSync(path.join(workspace, "docs"), { recursive: true });
    const record = writeRecord(path.join(parent, "rec"), { meta: { workspace } });
    const { code, stderr } = await cli(["show", record, "-o", path.join(workspace, "docs", "run.html")]);
    expect(code).toBe(2);
    expect(stderr).toContain("which the sandbox held");
    expect(stderr).toContain("-o <file>");
    expect(fs.existsSync(path.join(workspace, "docs", "run.html"))).toBe(false);
  });

  it("--open hands the page to the system's opener, and says so when there is none", async () => {
    const parent = tempDir("show-cli-");
    const record = writeRecord(path.join(parent, "rec"), {});
    const bin = path.join(parent, "bin");
    fs.mkdirSync(bin);
    const opened = path.join(parent, "opened.txt");
    fs.writeFileSync(path.join(bin, "xdg-open"), `#!/bin/sh\nprintf '%s' "$1" > ${JSON.stringify(opened)}\n`, {
      mode: 0o755,
    });
    const shown = await cli(["show", record, "--open"], { PATH: bin });
    expect(shown.code, shown.stderr).toBe(0);
    const page = path.join(fs.realpathSync(record), "run.html");
    // The opener runs detached: its file may exist before printf has written to it.
    await expect
      .poll(() => (fs.existsSync(opened) ? fs.readFileSync(opened, "utf8") : ""), { timeout: 10_000 })
      .toBe(page);
    const none = await cli(["show", record, "--open"], { PATH: path.join(parent, "empty") });
    expect(none.code).toBe(0);
    expect(none.stderr).toContain(`cannot open a browser (xdg-open: ENOENT); open ${page} yourself`);
  });

  it("says what is wrong with its flags or its folder", async () => {
    const record = writeRecord(path.join(tempDir("show-cli-"), "rec"), {});
    expect(await cli(["show", record, "--format", "pdf"])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("--format must be html or md"),
    });
    expect(await cli(["show", record, "--format", "md", "--open"])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("--open opens the page"),
    });
    expect(await cli(["show", path.join(record, "nope")])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("Cannot read the run record"),
    });
  });
});
