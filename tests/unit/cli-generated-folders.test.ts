// The done line names a virtualenv or node_modules a branch commit took whole (review, session 27).
import { describe, expect, it } from "vitest";
import { generatedFoldersNote } from "../../src/cli/generated-folders.js";

describe("generatedFoldersNote", () => {
  it("names a committed virtualenv and node_modules with their file counts", () => {
    const venv = [
      ".venv-br/pyvenv.cfg",
      ".venv-br/bin/python3",
      ".venv-br/lib/python3.11/site-packages/pip/__init__.py",
    ];
    const modules = ["web/node_modules/left-pad/index.js", "web/node_modules/left-pad/package.json"];
    expect(generatedFoldersNote(["src/calc/ops.py", ...venv, ...modules])).toBe(
      " (3 in .venv-br/ (a virtualenv), 2 in web/node_modules/ (installed packages): not in .gitignore, committed whole)",
    );
  });

  it("names build output tagged with CACHEDIR.TAG (cargo's target/; review, session 27: 42.7 MB of binaries committed unsaid)", () => {
    expect(generatedFoldersNote(["src/lib.rs", "target/CACHEDIR.TAG", "target/debug/app", "target/debug/app.d"])).toBe(
      " (3 in target/ (build output): not in .gitignore, committed whole)",
    );
  });

  it("says nothing of ordinary sources", () => {
    expect(generatedFoldersNote(["src/calc/ops.py", "tests/test_ops.py", "docs/pyvenv.md"])).toBe("");
  });
});
