import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { HostDir, HostDirError, locatePath, openOutputFile } from "../../src/util/host-dir.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir } = tempTrees("host-dir-");
const HOST_DIR_MODULE = new URL("../../src/util/host-dir.ts", import.meta.url).pathname;

describe("HostDir", () => {
  it("replaceFile of a long name in a script of several bytes a character: the scratch name stays within NAME_MAX (review, session 32)", () => {
    const folder = HostDir.open(dir());
    try {
      const name = `${"漢".repeat(80)}.patch`; // 246 bytes: a valid name
      folder.replaceFile(name, "patch\n");
      expect(fs.readFileSync(path.join(folder.path, name), "utf8")).toBe("patch\n");
      expect(folder.list()).toEqual([name]);
    } finally {
      folder.close();
    }
  });

  it("replaceFile on a disk too full for the new content: the old file stays whole, no half of the new one nor a scratch file (review, session 32)", () => {
    expect(process.geteuid?.(), "mount needs root (the unit tests run as root here and on CI)").toBe(0);
    const small = dir();
    expect(spawnSync("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", small]).status).toBe(0);
    try {
      fs.writeFileSync(path.join(small, "out.patch"), "the earlier patch\n");
      const folder = HostDir.open(small);
      try {
        expect(() => folder.replaceFile("out.patch", Buffer.alloc(400 * 1024, "y"))).toThrow(/ENOSPC/);
      } finally {
        folder.close();
      }
      expect(fs.readdirSync(small)).toEqual(["out.patch"]);
      expect(fs.readFileSync(path.join(small, "out.patch"), "utf8")).toBe("the earlier patch\n");
    } finally {
      spawnSync("umount", [small]);
    }
  });

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

  it("refuses a folder reached through a link inside a held tree, wherever the link points (review: show -o, --patch-file, batch --record-dir)", () => {
    const workspace = dir();
    const victim = dir();
    // The sandbox replaced a folder of the workspace with a link to a folder of the caller's.
    fs.symlinkSync(victim, path.join(workspace, "docs"));
    for (const target of [path.join(workspace, "docs"), path.join(workspace, "docs", "new", "deeper")]) {
      let thrown: unknown;
      try {
        HostDir.open(target, { create: true, outside: [workspace] }).close();
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(HostDirError);
      expect((thrown as HostDirError).code).toBe("INSIDE_SANDBOX_TREE");
    }
    expect(fs.readdirSync(victim)).toEqual([]);
    // The caller's own link to the held tree leads into it as well.
    const alias = path.join(dir(), "ws");
    fs.symlinkSync(workspace, alias);
    expect(() => HostDir.open(path.join(alias, "x"), { create: true, outside: [workspace] })).toThrow(
      /which the sandbox held/,
    );
    // Without held trees the caller's links are the caller's.
    HostDir.open(path.join(workspace, "docs")).close();
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

  it("opens folders below a held tree one by one: a planted link, a file or another user's folder is refused", () => {
    const workspace = dir();
    const outside = dir();
    fs.mkdirSync(path.join(workspace, "a", "b"), { recursive: true });
    fs.symlinkSync(outside, path.join(workspace, "link"));
    fs.writeFileSync(path.join(workspace, "file"), "x");
    const root = HostDir.open(workspace);
    const b = HostDir.openBelow(root, ["a", "b"]);
    expect(b.path).toBe(path.join(workspace, "a", "b"));
    expect(b.identity()).toEqual({ dev: fs.statSync(b.path).dev, ino: fs.statSync(b.path).ino });
    b.close();
    expect(() => HostDir.openBelow(root, ["link", "x"], { create: true })).toThrow(/not a plain folder/);
    expect(() => HostDir.openBelow(root, ["file"])).toThrow(/not a plain folder/);
    fs.chmodSync(path.join(workspace, "a"), 0o777);
    expect(() => HostDir.openBelow(root, ["a", "b"])).toThrow(/may be written by other users/);
    expect(fs.readdirSync(outside)).toEqual([]);
    root.close();
  });

  it("locatePath follows the caller's links outside held trees and stops resolving at a held tree", () => {
    const home = dir();
    const workspace = dir();
    const elsewhere = dir();
    fs.symlinkSync(workspace, path.join(home, "project")); // the caller's own link into the workspace
    fs.mkdirSync(path.join(workspace, "test"));
    fs.symlinkSync(elsewhere, path.join(workspace, "test", "records")); // planted by a sandbox
    expect(locatePath(path.join(home, "project", "test", "records", "review"), [workspace])).toEqual({
      kind: "held",
      tree: workspace,
      parts: ["test", "records", "review"],
    });
    expect(locatePath(path.join(home, "new", "rec"), [workspace])).toEqual({
      kind: "host",
      existing: home,
      missing: ["new", "rec"],
    });
    fs.symlinkSync(elsewhere, path.join(home, "out"));
    expect(locatePath(path.join(home, "out", "rec"), [workspace])).toEqual({
      kind: "host",
      existing: elsewhere,
      missing: ["rec"],
    });
  });

  it("openOutputFile: refuses a held tree by name or through a link, writes a pipe as it is, never writes through a link", () => {
    const workspace = dir();
    const home = dir();
    const victim = path.join(dir(), "victim");
    fs.writeFileSync(victim, "untouched\n");
    fs.symlinkSync(victim, path.join(workspace, "events.jsonl"));
    expect(() => openOutputFile(path.join(workspace, "events.jsonl"), [workspace])).toThrow(/which the sandbox holds/);
    fs.symlinkSync(workspace, path.join(home, "ws"));
    expect(() => openOutputFile(path.join(home, "ws", "events.jsonl"), [workspace])).toThrow(/leads into/);
    // Outside held trees a link at the name is the caller's: followed, and the file it names
    // replaced by a new one (a new inode), not written in place.
    fs.symlinkSync(victim, path.join(home, "events.jsonl"));
    const before = fs.statSync(victim).ino;
    const fd = openOutputFile(path.join(home, "events.jsonl"), [workspace]);
    fs.writeSync(fd, "event\n");
    fs.closeSync(fd);
    expect(fs.readFileSync(victim, "utf8")).toBe("event\n");
    expect(fs.lstatSync(victim).isFile()).toBe(true);
    expect(fs.statSync(victim).ino).not.toBe(before);
    expect(() => openOutputFile(path.join(home, "missing", "events.jsonl"), [workspace])).toThrow(/does not exist/);
    const pipe = openOutputFile("/dev/null", [workspace]);
    fs.writeSync(pipe, "x");
    fs.closeSync(pipe);
    expect(fs.readFileSync(path.join(workspace, "events.jsonl"), "utf8")).toBe("event\n");
  });

  // L6: when the controller runs as root (CI), other local users can plant links and FIFOs in /tmp
  // or in folders of theirs. The links on the way to a place the host writes are resolved here,
  // not by the kernel, so fs.protected_symlinks does not guard them.
  it.runIf(process.getuid?.() === 0)(
    "as root: another user's link is never followed to write (an output file, a record folder, a folder to open), nor their FIFO written",
    () => {
      const shared = dir();
      fs.chmodSync(shared, 0o1777);
      const rootOnly = dir();
      fs.chmodSync(rootOnly, 0o700);
      const victim = path.join(rootOnly, ".bashrc");
      fs.writeFileSync(victim, "untouched\n");
      const planted = (name: string, target: string) => {
        const link = path.join(shared, name);
        fs.symlinkSync(target, link);
        fs.lchownSync(link, 1500, 1500);
        return link;
      };
      expect(() => openOutputFile(planted("events.jsonl", victim), [])).toThrow(/made by uid 1500/);
      expect(() => HostDir.open(planted("records", rootOnly))).toThrow(/made by uid 1500/);
      expect(() => locatePath(path.join(planted("rec", rootOnly), "new"), [])).toThrow(
        expect.objectContaining({ code: "NOT_OURS" }),
      );
      // A link further up the path counts the same as one at the name.
      expect(() => openOutputFile(path.join(shared, "records", "events.jsonl"), [])).toThrow(/made by uid 1500/);
      expect(fs.readFileSync(victim, "utf8")).toBe("untouched\n");
      expect(fs.readdirSync(rootOnly)).toEqual([".bashrc"]);
      // A link root made is root's own: followed.
      const own = path.join(shared, "own.jsonl");
      fs.symlinkSync(path.join(rootOnly, "own-target.jsonl"), own);
      fs.closeSync(openOutputFile(own, []));
      expect(fs.existsSync(path.join(rootOnly, "own-target.jsonl"))).toBe(true);
      // Another user's FIFO at the name would read the run's events.
      const fifo = path.join(shared, "fifo.jsonl");
      execFileSync("mkfifo", [fifo]);
      fs.chownSync(fifo, 1500, 1500);
      const reader = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
      try {
        expect(() => openOutputFile(fifo, [])).toThrow(/belongs to uid 1500/);
        // The same FIFO as this process's own stderr (`sudo sandbox-run … --events /dev/stderr 2>&1 | tee`,
        // the pipe the invoking user's shell made): the caller's own output, written as it is.
        const writer = fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
        const child = spawnSync(
          process.execPath,
          [
            "--import",
            "tsx",
            "-e",
            `import { openOutputFile } from ${JSON.stringify(HOST_DIR_MODULE)};
             const fd = openOutputFile("/dev/stderr", []);
             (await import("node:fs")).writeSync(fd, "events\\n");
             console.log("opened");`,
          ],
          { stdio: ["ignore", "pipe", writer], encoding: "utf8", cwd: process.cwd() },
        );
        fs.closeSync(writer);
        expect(child.stdout.trim(), child.error?.message).toBe("opened");
        expect(fs.readFileSync(reader, "utf8")).toContain("events");
      } finally {
        fs.closeSync(reader);
      }
    },
  );
});
