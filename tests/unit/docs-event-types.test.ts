// docs/events.md is what an onEvent handler is written from: every sandbox event type the code emits
// has a row there (review, session 31: seven were missing, `engine.chosen`, every call's first, among them).
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "../..");

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith(".ts") ? [full] : [];
  });
}

describe("docs/events.md", () => {
  it("has a row for every sandbox event type the code emits", () => {
    const emitted = new Set<string>();
    for (const file of sourceFiles(path.join(root, "src"))) {
      const text = fs.readFileSync(file, "utf8");
      for (const match of text.matchAll(/\.sandbox\(\s*"([a-z-]+\.[a-z-]+)"/g)) emitted.add(match[1]!);
    }
    // The proxy's decisions are emitted as `egress.${action}` (run-services.ts).
    for (const action of ["allowed", "denied", "failed", "injected"]) emitted.add(`egress.${action}`);
    expect(emitted.size).toBeGreaterThan(40);
    const doc = fs.readFileSync(path.join(root, "docs/events.md"), "utf8");
    const missing = [...emitted].filter((type) => !doc.includes(`\`${type}\``)).sort();
    expect(missing).toEqual([]);
  });
});
