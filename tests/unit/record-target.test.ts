// Where a finished record goes, without Docker: a temp folder stands in for the workspace the
// sandbox held, and the test plays the sandbox (planting links, making or filling the target)
// between prepare() (before the run) and publish() (after it). A record is written only where the
// sandbox left the path alone; nothing is ever written through a planted link.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { RecordTarget, RecordTargetError } from "../../src/record/record-target.js";
import { HostDir } from "../../src/util/host-dir.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir } = tempTrees("record-target-");

/** A staged record (the run's private folder holding `record/` with two files). */
function staged(): HostDir {
  const parent = HostDir.open(dir());
  const record = parent.mkdir("record");
  record.writeNew("result.json", '"done"\n');
  record.writeNew("SHA256SUMS", "sums\n");
  record.close();
  return parent;
}

function publish(target: RecordTarget): HostDir {
  const parent = staged();
  target.publish(parent, "record");
  return parent;
}

describe("RecordTarget", () => {
  it("on another filesystem with too little room: all or nothing, the staged record stays whole (review, session 32)", () => {
    expect(process.geteuid?.(), "mount needs root (the unit tests run as root here and on CI)").toBe(0);
    const small = dir();
    expect(spawnSync("mount", ["-t", "tmpfs", "-o", "size=512k", "tmpfs", small]).status).toBe(0);
    try {
      for (const existing of [false, true]) {
        const target = path.join(small, existing ? "made-by-the-caller" : "new");
        if (existing) fs.mkdirSync(target);
        const prepared = RecordTarget.prepare(target, [dir()]);
        const parent = HostDir.open(dir());
        const record = parent.mkdir("record");
        record.writeNew("SHA256SUMS", "sums\n");
        record.writeNew("changes.patch", Buffer.alloc(700 * 1024, "x"));
        record.close();
        expect(() => prepared.publish(parent, "record")).toThrow(/ENOSPC/);
        // Nothing of it at the target (the folder made for it gone too); the staging as it was.
        expect(existing ? fs.readdirSync(target) : fs.existsSync(target)).toEqual(existing ? [] : false);
        const staging = path.join(parent.path, "record");
        expect(fs.readdirSync(staging).sort()).toEqual(["SHA256SUMS", "changes.patch"]);
        expect(fs.statSync(path.join(staging, "changes.patch")).size).toBe(700 * 1024);
        parent.close();
      }
    } finally {
      spawnSync("umount", [small]);
    }
  });

  it("outside the held trees: the folder and its parents are made after the run, the record moved in", () => {
    const workspace = dir();
    const home = dir();
    const target = RecordTarget.prepare(path.join(home, "records", "review"), [workspace]);
    expect(fs.existsSync(path.join(home, "records"))).toBe(false); // nothing made before the run
    const parent = publish(target);
    expect(fs.readdirSync(path.join(home, "records", "review")).sort()).toEqual(["SHA256SUMS", "result.json"]);
    // The caller's alone: it holds what the tools printed (another local user read it at 0755).
    expect(fs.statSync(path.join(home, "records", "review")).mode & 0o777).toBe(0o700);
    expect(parent.list()).toEqual([]);
  });

  it("inside the workspace, left alone by the sandbox: written there after the run", () => {
    const workspace = dir();
    const target = RecordTarget.prepare(path.join(workspace, "test", "records", "review"), [workspace]);
    expect(target.insideSandboxTree).toBe(workspace);
    expect(fs.readdirSync(workspace)).toEqual([]);
    fs.mkdirSync(path.join(workspace, "test")); // the sandbox may make plain folders on the way
    publish(target);
    expect(fs.readFileSync(path.join(workspace, "test", "records", "review", "result.json"), "utf8")).toBe('"done"\n');
  });

  it("an empty folder the caller made inside the workspace, still empty and the same folder: written into", () => {
    const workspace = dir();
    fs.mkdirSync(path.join(workspace, "rec"));
    const target = RecordTarget.prepare(path.join(workspace, "rec"), [workspace]);
    publish(target);
    expect(fs.readdirSync(path.join(workspace, "rec")).sort()).toEqual(["SHA256SUMS", "result.json"]);
  });

  it("refused, with nothing written through a link: the sandbox made the target, filled it, replaced it, or planted a link on the way", () => {
    const victim = path.join(dir(), "victim");
    const cases: Array<[string, (ws: string) => void, boolean, RegExp]> = [
      ["made by the sandbox", (ws) => fs.mkdirSync(path.join(ws, "rec")), false, /the sandbox made it/],
      [
        "links planted in it",
        (ws) => {
          fs.mkdirSync(path.join(ws, "rec"));
          fs.symlinkSync(victim, path.join(ws, "rec", "result.json"));
        },
        false,
        /the sandbox made it/,
      ],
      [
        "filled (it existed)",
        (ws) => fs.symlinkSync(victim, path.join(ws, "rec", "SHA256SUMS")),
        true,
        /no longer empty/,
      ],
      [
        "replaced (it existed)",
        (ws) => {
          fs.renameSync(path.join(ws, "rec"), path.join(ws, "old"));
          fs.mkdirSync(path.join(ws, "rec"));
        },
        true,
        /was replaced during the run/,
      ],
      [
        "turned into a link (it existed)",
        (ws) => {
          fs.rmdirSync(path.join(ws, "rec"));
          fs.symlinkSync(path.dirname(victim), path.join(ws, "rec"));
        },
        true,
        /not a plain folder/,
      ],
    ];
    for (const [what, sandbox, existed, why] of cases) {
      fs.writeFileSync(victim, "untouched\n");
      const workspace = dir();
      if (existed) fs.mkdirSync(path.join(workspace, "rec"));
      const target = RecordTarget.prepare(path.join(workspace, "rec"), [workspace]);
      sandbox(workspace);
      const parent = staged();
      expect(() => target.publish(parent, "record"), what).toThrow(RecordTargetError);
      expect(() => target.publish(parent, "record"), what).toThrow(why);
      expect(fs.readFileSync(victim, "utf8"), what).toBe("untouched\n");
      expect(fs.readdirSync(path.dirname(victim)).sort(), what).toEqual(["victim"]);
      // The staged record is still there, whole, for the caller to be told where it is.
      expect(fs.readdirSync(path.join(parent.path, "record")).sort(), what).toEqual(["SHA256SUMS", "result.json"]);
    }
  });

  it("a parent folder turned into a link during the run: refused, nothing written where it points", () => {
    const workspace = dir();
    const elsewhere = dir();
    const target = RecordTarget.prepare(path.join(workspace, "test", "records", "review"), [workspace]);
    fs.mkdirSync(path.join(workspace, "test"));
    fs.symlinkSync(elsewhere, path.join(workspace, "test", "records"));
    expect(() => publish(target)).toThrow(/not a plain folder/);
    expect(fs.readdirSync(elsewhere)).toEqual([]);
  });

  it("before the run: a link inside the workspace, a file, or a folder that is not empty is a clear error", () => {
    const workspace = dir();
    const elsewhere = dir();
    fs.symlinkSync(elsewhere, path.join(workspace, "link"));
    fs.writeFileSync(path.join(workspace, "file"), "x");
    fs.mkdirSync(path.join(workspace, "full"));
    fs.writeFileSync(path.join(workspace, "full", "x"), "x");
    expect(() => RecordTarget.prepare(path.join(workspace, "link", "rec"), [workspace])).toThrow(/a symbolic link/);
    expect(() => RecordTarget.prepare(path.join(workspace, "file"), [workspace])).toThrow(/not a folder/);
    expect(() => RecordTarget.prepare(path.join(workspace, "full"), [workspace])).toThrow(/is not empty/);
    expect(() => RecordTarget.prepare(workspace, [workspace])).toThrow(/holds itself/);
    expect(fs.readdirSync(elsewhere)).toEqual([]);
  });
});
