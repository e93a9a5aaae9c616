import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { HostDir, HostDirError } from "../../src/util/host-dir.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir } = tempTrees("host-dir-");

describe("HostDir", () => {
  it("creates missing folders and new files, and refuses to write through a planted symlink", () => {
    const root = dir();
    const outside = path.join(dir(), "victim");
    fs.writeFileSync(outside, "untouched\n");
    const target = HostDir.open(path.join(root, "a", "b"), { create: true });
    target.writeNew("result.json", "{}\n");
    expect(fs.readFileSync(path.join(root, "a", "b", "result.json"), "utf8")).toBe("{}\n");
    fs.symlinkSync(outside, path.join(root, "a", "b", "changes.patch"));
    expect(() => target.writeNew("changes.patch", "payload")).toThrow(/EEXIST/);
    expect(fs.readFileSync(outside, "utf8")).toBe("untouched\n");
    target.close();
  });

  it("replaces a symlink rather than writing through it", () => {
    const root = dir();
    const outside = path.join(dir(), "victim");
    fs.writeFileSync(outside, "untouched\n");
    fs.symlinkSync(outside, path.join(root, "events.jsonl"));
    const target = HostDir.open(root);
    target.replaceFile("events.jsonl", "new\n");
    expect(fs.lstatSync(path.join(root, "events.jsonl")).isFile()).toBe(true);
    expect(fs.readFileSync(path.join(root, "events.jsonl"), "utf8")).toBe("new\n");
    expect(fs.readFileSync(outside, "utf8")).toBe("untouched\n");
    expect(target.list().filter((n) => n.endsWith(".tmp"))).toEqual([]);
    target.close();
  });

  it("keeps writing into the folder it opened when a component is swapped for a symlink afterwards", () => {
    const root = dir();
    const elsewhere = dir();
    fs.mkdirSync(path.join(root, "rec"));
    const target = HostDir.open(path.join(root, "rec"));
    fs.renameSync(path.join(root, "rec"), path.join(root, "moved"));
    fs.symlinkSync(elsewhere, path.join(root, "rec"));
    target.writeNew("meta.json", "{}");
    expect(fs.existsSync(path.join(root, "moved", "meta.json"))).toBe(true);
    expect(fs.readdirSync(elsewhere)).toEqual([]);
    target.close();
  });

  it("refuses a folder inside a tree the sandbox held, before creating anything", () => {
    const workspace = dir();
    expect(() => HostDir.open(path.join(workspace, "test", "records"), { create: true, outside: [workspace] })).toThrow(
      HostDirError,
    );
    expect(fs.readdirSync(workspace)).toEqual([]);
  });

  it("refuses a folder other users may write to", () => {
    const root = dir();
    fs.chmodSync(root, 0o777);
    expect(() => HostDir.open(root)).toThrow(/may be written by other users/);
  });

  it("refuses names that are not plain file names", () => {
    const target = HostDir.open(dir());
    for (const name of ["../x", "a/b", "..", ".", ""]) expect(() => target.writeNew(name, "x")).toThrow(HostDirError);
    target.close();
  });

  it("moves a staged file into another folder without replacing anything", () => {
    const stage = HostDir.open(dir());
    const target = HostDir.open(dir());
    stage.writeNew("a", "1");
    target.writeNew("b", "keep");
    stage.moveTo("a", target);
    stage.writeNew("b", "2");
    expect(() => stage.moveTo("b", target)).toThrow(/already exists/);
    expect(fs.readFileSync(path.join(target.path, "a"), "utf8")).toBe("1");
    expect(fs.readFileSync(path.join(target.path, "b"), "utf8")).toBe("keep");
  });
});
