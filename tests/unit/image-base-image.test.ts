import { describe, expect, it } from "vitest";
import { debianMirror } from "../../src/image/base-image.js";

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
