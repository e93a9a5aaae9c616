import { describe, expect, it } from "vitest";
import { isSandboxRunError } from "../../src/errors.js";
import { parsePlatform } from "../../src/util/parse-platform.js";
import { hostPlatform, normalizePlatform, platformOfArch } from "../../src/util/platform.js";

describe("platform names", () => {
  it("reads every tool's name for the two architectures", () => {
    for (const arch of ["x86_64", "x64", "amd64", "AMD64"]) expect(platformOfArch(arch)).toBe("linux/amd64");
    for (const arch of ["aarch64", "arm64", "arm64/v8"]) expect(platformOfArch(arch)).toBe("linux/arm64");
    for (const arch of ["s390x", "arm", "riscv64", "", undefined]) expect(platformOfArch(arch)).toBeUndefined();
  });

  it("normalises what a user types after --platform", () => {
    expect(normalizePlatform("linux/arm64")).toBe("linux/arm64");
    expect(normalizePlatform(" linux/arm64/v8 ")).toBe("linux/arm64");
    expect(normalizePlatform("arm64")).toBe("linux/arm64");
    expect(normalizePlatform("linux/amd64")).toBe("linux/amd64");
    expect(normalizePlatform("windows/amd64")).toBeUndefined();
    expect(normalizePlatform("linux/arm/v7")).toBeUndefined();
  });

  it("refuses another platform with a usage error that lists the choices", () => {
    let error: unknown;
    try {
      parsePlatform("linux/s390x", "--platform");
    } catch (e) {
      error = e;
    }
    expect(isSandboxRunError(error) && error.code).toBe("usage");
    expect((error as Error).message).toContain('--platform names the platform "linux/s390x"');
    expect(isSandboxRunError(error) && error.hint).toContain("linux/amd64 or linux/arm64");
  });

  it("takes this machine's platform from Node's arch", () => {
    expect(hostPlatform("x64")).toBe("linux/amd64");
    expect(hostPlatform("arm64")).toBe("linux/arm64");
  });
});
