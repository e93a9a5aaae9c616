// Helpers for tests that change a run record on purpose.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

/** Rewrites SHA256SUMS for the folder as it is now (what a careful forger, or a test, does). */
export function rehash(dir: string): void {
  const lines = fs
    .readdirSync(dir)
    .filter((name) => name !== "SHA256SUMS")
    .sort()
    .map(
      (name) =>
        `${crypto
          .createHash("sha256")
          .update(fs.readFileSync(path.join(dir, name)))
          .digest("hex")}  ${name}`,
    );
  fs.writeFileSync(path.join(dir, "SHA256SUMS"), `${lines.join("\n")}\n`);
}

/** A copy of a record folder in `parent`. */
export function copyRecord(record: string, parent: string): string {
  const dir = fs.mkdtempSync(path.join(parent, "record-copy-"));
  fs.cpSync(record, dir, { recursive: true });
  return dir;
}
