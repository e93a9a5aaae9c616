import { describe, expect, it } from "vitest";
import type { EngineInfo } from "../../src/engine/engine.js";
import { checkPlatformSupport, emulatorFor, type HostKernel } from "../../src/engine/platform-support.js";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";

// /proc/sys/fs/binfmt_misc/qemu-aarch64 as Debian 12's qemu-user-static registers it (recorded here).
const QEMU_AARCH64 = `enabled
interpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P
flags: PF
offset 0
magic 7f454c460201010000000000000000000200b700
mask ffffffffffffff00fffffffffffffffffeffffff
`;
const QEMU_X86_64 = `enabled
interpreter /usr/libexec/qemu-binfmt/x86_64-binfmt-P
flags: PF
offset 0
magic 7f454c4602010100000000000000000002003e00
mask fffffffffffefe00fffffffffffffffffeffffff
`;

const amd64Engine: Pick<EngineInfo, "platform" | "architecture" | "kernelVersion" | "dockerDesktop"> = {
  platform: "linux/amd64",
  architecture: "x86_64",
  kernelVersion: "6.18.44-fc-v857",
  dockerDesktop: false,
};
const sameKernel = (entries: Record<string, string>): HostKernel => ({
  os: "linux",
  release: "6.18.44-fc-v857",
  binfmtEntries: () => entries,
});

function refusal(fn: () => unknown): SandboxRunError {
  try {
    fn();
  } catch (error) {
    if (isSandboxRunError(error)) return error;
    throw error;
  }
  throw new Error("expected a refusal");
}

describe("emulatorFor", () => {
  it("finds an enabled entry by the ELF machine of its magic, whatever its name", () => {
    expect(emulatorFor("linux/arm64", { "qemu-aarch64": QEMU_AARCH64 })).toEqual({
      name: "qemu-aarch64",
      interpreter: "/usr/libexec/qemu-binfmt/aarch64-binfmt-P",
      flags: "PF",
    });
    expect(emulatorFor("linux/arm64", { aarch64: QEMU_AARCH64 })?.name).toBe("aarch64");
    expect(emulatorFor("linux/amd64", { "qemu-x86_64": QEMU_X86_64 })?.name).toBe("qemu-x86_64");
  });

  it("does not take another architecture's entry, a disabled one, or none", () => {
    expect(emulatorFor("linux/arm64", { "qemu-x86_64": QEMU_X86_64 })).toBeUndefined();
    expect(emulatorFor("linux/arm64", { "qemu-aarch64": QEMU_AARCH64.replace("enabled", "disabled") })).toBeUndefined();
    expect(emulatorFor("linux/arm64", {})).toBeUndefined();
  });
});

describe("checkPlatformSupport", () => {
  it("runs the engine's own platform natively, with any runtime", () => {
    expect(
      checkPlatformSupport("linux/amd64", amd64Engine, { engineName: "local", runtime: "runsc", host: sameKernel({}) }),
    ).toEqual({ platform: "linux/amd64", emulated: false });
  });

  it("runs another platform emulated when this kernel has its emulator with the F flag", () => {
    expect(
      checkPlatformSupport("linux/arm64", amd64Engine, {
        engineName: "local",
        host: sameKernel({ "qemu-aarch64": QEMU_AARCH64 }),
      }),
    ).toEqual({ platform: "linux/arm64", emulated: true });
  });

  it("refuses it up front on this kernel without an emulator, with the command that registers one", () => {
    const error = refusal(() =>
      checkPlatformSupport("linux/arm64", amd64Engine, { engineName: "local", host: sameKernel({}) }),
    );
    expect(error.code).toBe("docker-unavailable");
    expect(error.shortMessage).toBe(
      'Engine "local" (linux/amd64) cannot run linux/arm64 containers: no emulator for aarch64 is registered with binfmt_misc on this machine.',
    );
    expect(error.hint).toContain("mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc");
    expect(error.hint).toContain("apt-get install -y qemu-user-static binfmt-support");
    expect(error.hint).toContain("tonistiigi/binfmt --install arm64");
  });

  it("refuses an emulator registered without F: containers hold no copy of qemu", () => {
    const error = refusal(() =>
      checkPlatformSupport("linux/arm64", amd64Engine, {
        engineName: "local",
        host: sameKernel({ "qemu-aarch64": QEMU_AARCH64.replace("flags: PF", "flags: P") }),
      }),
    );
    expect(error.shortMessage).toContain("registered without the F flag");
    expect(error.hint).toContain("echo -1 > /proc/sys/fs/binfmt_misc/qemu-aarch64");
  });

  it("refuses gVisor under emulation, whatever is registered", () => {
    const error = refusal(() =>
      checkPlatformSupport("linux/arm64", amd64Engine, {
        engineName: "local",
        runtime: "runsc",
        host: sameKernel({ "qemu-aarch64": QEMU_AARCH64 }),
      }),
    );
    expect(error.code).toBe("usage");
    expect(error.shortMessage).toContain("gVisor (runsc) cannot run linux/arm64 sandboxes");
    expect(error.hint).toContain("--runtime runc");
  });

  it("trusts Docker Desktop's own emulators, and leaves an engine on another kernel to its start", () => {
    const desktop = {
      ...amd64Engine,
      platform: "linux/arm64" as const,
      kernelVersion: "6.10.0-linuxkit",
      dockerDesktop: true,
    };
    expect(checkPlatformSupport("linux/amd64", desktop, { engineName: "local", host: sameKernel({}) }).emulated).toBe(
      true,
    );
    const remote = { ...amd64Engine, kernelVersion: "6.1.0-28-amd64" };
    expect(checkPlatformSupport("linux/arm64", remote, { engineName: "build-2", host: sameKernel({}) }).emulated).toBe(
      true,
    );
  });
});
