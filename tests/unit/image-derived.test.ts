import { describe, expect, it } from "vitest";
import { isSandboxRunError } from "../../src/errors.js";
import { derivedDockerfile, derivedImageTag, parseAptPackages } from "../../src/image/derived-image.js";
import { runnerImageSpec } from "../../src/image/runner-image.js";

describe("parseAptPackages", () => {
  it("splits on commas and spaces, drops duplicates and sorts, so one list gives one tag", () => {
    expect(parseAptPackages(["python3,make", "make  jq", "gcc=4:12.2.0-3"])).toEqual([
      "gcc=4:12.2.0-3",
      "jq",
      "make",
      "python3",
    ]);
    expect(derivedImageTag(parseAptPackages(["make,python3"]))).toBe(
      derivedImageTag(parseAptPackages(["python3 make"])),
    );
    expect(derivedImageTag(["jq"])).not.toBe(derivedImageTag(["make"]));
  });

  it.each([["jq;rm -rf /"], ["$(id)"], ["-o=APT::x"], ["Python3"], ["a"]])(
    "refuses %s as a package name, before anything is built",
    (bad) => {
      let error: unknown;
      try {
        parseAptPackages([bad]);
      } catch (e) {
        error = e;
      }
      expect(isSandboxRunError(error) && error.code).toBe("usage");
      expect((error as Error).message).toMatch(/^Not Debian package names: /);
    },
  );

  it("refuses an empty list", () => {
    expect(() => parseAptPackages([" , "])).toThrow(/at least one package/);
  });
});

describe("derived image", () => {
  it("is tagged after this version's runner image and the package list", () => {
    const runnerVersion = runnerImageSpec().tag.split(":")[1];
    expect(derivedImageTag(["jq"])).toMatch(new RegExp(`^sandbox-run/pi-apt:${runnerVersion}-[0-9a-f]{8}$`));
  });

  it("installs as root at build time only, strips setuid bits again, and runs as the sandbox user", () => {
    const dockerfile = derivedDockerfile("sandbox-run/pi:x", ["jq", "make"]);
    expect(dockerfile.split("\n")[0]).toBe("FROM sandbox-run/pi:x");
    expect(dockerfile).toContain("apt-get install -y --no-install-recommends jq make");
    expect(dockerfile).toContain("-perm /6000 -type f -exec chmod ug-s {} +");
    expect(dockerfile.trimEnd().split("\n").at(-1)).toBe("USER 65532:65532");
  });
});
