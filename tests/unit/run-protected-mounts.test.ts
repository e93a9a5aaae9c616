// A protected path is mounted read-only over the workspace by its host path, and the engine follows
// a symlink there: a run that waited for another run on the same workspace checks, once it holds
// the trees, that each planned protected mount is still a real folder or file inside it.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadPolicy } from "../../src/policy/load-policy.js";
import { preparePlan, recheckProtectedMounts } from "../../src/run/plan/prepare-plan.js";
import { resolveRun } from "../../src/run/plan/resolve-options.js";
import { tempTrees } from "../support/temp-trees.js";

const { tree } = tempTrees("sandbox-run-protected-mounts-");

function planned(workspace: string) {
  // A protected folder below another folder (the built-in policies protect all of .github).
  const policy = { ...loadPolicy("workspace-write"), protectedPaths: [".github/workflows/**"] };
  return preparePlan(
    resolveRun("go", {}, { model: "anthropic/x", cwd: workspace, policy }, { ANTHROPIC_API_KEY: "k" }),
    { image: "i" },
  );
}

describe("recheckProtectedMounts", () => {
  it("passes while the planned protected folders are real; refuses one swapped for a symlink out of the workspace, or behind a swapped parent", () => {
    const outside = fs.realpathSync(tree({ id_rsa: "HOST-PRIVATE-KEY", "workflows/x": "y" }));
    for (const swap of [
      (ws: string) => {
        fs.rmSync(path.join(ws, ".github/workflows"), { recursive: true });
        fs.symlinkSync(outside, path.join(ws, ".github/workflows"));
      },
      (ws: string) => {
        fs.rmSync(path.join(ws, ".github"), { recursive: true });
        fs.symlinkSync(outside, path.join(ws, ".github"));
      },
    ]) {
      const workspace = fs.realpathSync(tree({ ".github/workflows/ci.yml": "on: push", "src/a.ts": "1" }));
      const plan = planned(workspace);
      const protectedMounts = plan.plan.mounts.filter((m) => m.kind === "protected").map((m) => m.hostPath);
      expect(protectedMounts).toContain(path.join(workspace, ".github/workflows"));
      expect(() => recheckProtectedMounts(plan)).not.toThrow();
      swap(workspace);
      expect(() => recheckProtectedMounts(plan)).toThrow(
        `The protected path ${path.join(workspace, ".github/workflows")} changed while this run waited for another run on the same workspace`,
      );
    }
  });
});
