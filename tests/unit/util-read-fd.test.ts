// Host-side reads of files the sandbox or another user may have shaped: a file's kind is known
// before it is opened, so opening a device (whose driver acts on open) or a FIFO never happens.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { openRegularFile, readSmallFile } from "../../src/util/read-fd.js";

describe("openRegularFile", () => {
  it("opens a regular file, and refuses a link, a FIFO and a device without opening them", () => {
    expect(process.geteuid?.(), "mknod needs root (the unit tests run as root here and on CI)").toBe(0);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-read-fd-"));
    try {
      fs.writeFileSync(path.join(dir, "plain"), "hello");
      fs.symlinkSync("plain", path.join(dir, "link"));
      execFileSync("mkfifo", [path.join(dir, "fifo")]);
      // A character device with no driver behind it: opening it fails with ENXIO or ENODEV (or
      // EACCES where the folder's filesystem is mounted nodev), so "not a regular file" proves that
      // no open was tried.
      execFileSync("mknod", [path.join(dir, "device"), "c", "240", "7"]);
      const open = (name: string, follow = false) => {
        try {
          const { fd, stat } = openRegularFile(path.join(dir, name), follow);
          fs.closeSync(fd);
          return stat.size;
        } catch (error) {
          return (error as NodeJS.ErrnoException).code;
        }
      };
      expect(open("plain")).toBe(5);
      expect(open("link")).toBe("ELOOP");
      expect(open("link", true)).toBe(5);
      expect(open("fifo")).toBe("not a regular file");
      expect(open("device")).toBe("not a regular file");
      expect(open("missing")).toBe("ENOENT");
      expect(readSmallFile(path.join(dir, "device"), 100)).toBeUndefined();
      expect(readSmallFile(path.join(dir, "plain"), 100)?.toString()).toBe("hello");
      expect(readSmallFile(path.join(dir, "plain"), 4)).toBeUndefined();
      expect(readSmallFile(path.join(dir, "missing"), 4)).toBeNull();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
