import { describe, expect, it } from "vitest";
import { isSandboxRunError } from "../../src/errors.js";
import { assertDebianKeyring, DEBIAN_KEYRING, debianMirror, debootstrapSteps } from "../../src/image/base-image.js";

describe("debootstrap", () => {
  it("forces the Release signature check against Debian's keyring, on the host's platform and in a foreign first stage", () => {
    const own = debootstrapSteps("linux/amd64", "/r", "http://m/debian", "linux/amd64");
    const foreign = debootstrapSteps("linux/arm64", "/r", "http://m/debian", "linux/amd64");
    for (const step of [own[0]!, foreign[0]!]) {
      expect(step.command).toBe("/usr/sbin/debootstrap");
      expect(step.args).toContain("--force-check-gpg");
      expect(step.args).toContain(`--keyring=${DEBIAN_KEYRING}`);
    }
  });

  it("without the keyring, refuses before anything runs, saying what to install", () => {
    const error = (() => {
      try {
        assertDebianKeyring("/nonexistent/debian-archive-keyring.gpg");
      } catch (e) {
        return e;
      }
    })();
    expect(isSandboxRunError(error) && error.code).toBe("image-missing");
    expect((error as Error).message).toMatch(/keyring \/nonexistent\/debian-archive-keyring.gpg is missing/);
    expect(isSandboxRunError(error) && error.hint).toMatch(/apt-get install debian-archive-keyring/);
  });
});

describe("debianMirror", () => {
  it("takes the active URIs of a deb822 source and skips commented snapshot lines", () => {
    const sources = [
      "Types: deb\n# http://snapshot.debian.org/archive/debian/20250520T000000Z\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n\n" +
        "Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n",
    ];
    expect(debianMirror(sources)).toBe("http://deb.debian.org/debian");
  });

  it("reads one-line sources, with options, and ignores the security archive", () => {
    expect(
      debianMirror([
        "deb http://mirror.example/debian-security bookworm-security main\ndeb [arch=amd64] http://mirror.example/debian bookworm main\n",
      ]),
    ).toBe("http://mirror.example/debian");
  });

  it("falls back to deb.debian.org when apt names no Debian mirror", () => {
    expect(debianMirror(["deb https://packages.example/apt stable main\n"])).toBe("http://deb.debian.org/debian");
  });
});
