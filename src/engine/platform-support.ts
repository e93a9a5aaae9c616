// Whether an engine can run containers of a platform, asked before anything is built or created.
// Its own platform always; another one only under an emulator: qemu-user registered with the
// kernel's binfmt_misc, with the F (fix-binary) flag so a container, which holds no copy of qemu,
// can use it. For an engine on this machine's kernel the registration is read here; Docker
// Desktop registers its own emulators in its VM; of any other engine nothing can be seen from
// here, so a run is tried and a failed start says what is missing (container-failure.ts).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { SandboxRunError } from "../errors.js";
import { ARCH_NAMES, type RunnerPlatform } from "../util/platform.js";
import type { EngineInfo } from "./engine.js";
import { ownPlatformOf } from "./engine-kind.js";

const BINFMT_DIR = "/proc/sys/fs/binfmt_misc";

/** What is known of the machine the controller runs on. */
export interface HostKernel {
  os: string;
  release: string;
  /** The binfmt_misc entries (name -> contents); empty when it is not mounted. */
  binfmtEntries(): Record<string, string>;
}

export const thisHost: HostKernel = {
  os: process.platform,
  release: os.release(),
  binfmtEntries() {
    const entries: Record<string, string> = {};
    let names: string[] = [];
    try {
      names = fs.readdirSync(BINFMT_DIR);
    } catch {
      return entries;
    }
    for (const name of names) {
      if (name === "register" || name === "status") continue;
      try {
        entries[name] = fs.readFileSync(path.join(BINFMT_DIR, name), "utf8");
      } catch {
        // An entry removed meanwhile.
      }
    }
    return entries;
  },
};

/** ELF e_machine of each platform, as a binfmt magic spells it (little-endian, at byte 18). */
const ELF_MACHINE: Record<RunnerPlatform, string> = { "linux/amd64": "3e00", "linux/arm64": "b700" };

interface Emulator {
  name: string;
  interpreter: string;
  flags: string;
}

/**
 * The enabled binfmt_misc entry that runs a platform's 64-bit ELF binaries, by its magic (names
 * differ: qemu-aarch64, aarch64, a distribution's own), or undefined.
 */
export function emulatorFor(platform: RunnerPlatform, entries: Record<string, string>): Emulator | undefined {
  for (const [name, text] of Object.entries(entries)) {
    const field = (key: string) => new RegExp(`^${key}:? (.*)$`, "m").exec(text)?.[1]?.trim() ?? "";
    const magic = field("magic").toLowerCase();
    if (!/^enabled$/m.test(text) || !magic.startsWith("7f454c4602")) continue;
    if (magic.slice(36, 40) !== ELF_MACHINE[platform]) continue;
    return { name, interpreter: field("interpreter"), flags: field("flags") };
  }
  return undefined;
}

/** How to register the emulator a platform needs, on a Debian/Ubuntu machine or with Docker. */
export function registerEmulatorHint(platform: RunnerPlatform): string {
  const qemu = `qemu-${ARCH_NAMES[platform].kernel}`;
  return (
    `Register ${qemu} with the F flag, as root on the engine's machine: ` +
    `\`mountpoint -q ${BINFMT_DIR} || mount -t binfmt_misc binfmt_misc ${BINFMT_DIR}; apt-get install -y qemu-user-static binfmt-support\` ` +
    `(Debian/Ubuntu; scripts/setup-emulation.sh in sandbox-run's repository does this), or ` +
    `\`docker run --privileged --rm tonistiigi/binfmt --install ${ARCH_NAMES[platform].docker}\` where a registry is reachable. ` +
    `Or run on the engine's own platform (leave --platform out).`
  );
}

interface PlatformRun {
  platform: RunnerPlatform;
  /** Not the engine's own platform: every program in the sandbox runs under an emulator. */
  emulated: boolean;
}

/**
 * Whether `engine` can run `platform` containers with `runtime`: the platform and whether it is
 * emulated, or a SandboxRunError that says what to do. gVisor under emulation is refused: runsc
 * implements the system calls of its own architecture and loads programs itself, so a foreign
 * binary never reaches binfmt_misc (checked here: it fails with "exec format error").
 */
export function checkPlatformSupport(
  platform: RunnerPlatform,
  info: Pick<EngineInfo, "platform" | "architecture" | "kernelVersion" | "dockerDesktop">,
  options: { engineName: string; runtime?: string; host?: HostKernel },
): PlatformRun {
  const host = options.host ?? thisHost;
  const engine = `Engine "${options.engineName}"`;
  const own = ownPlatformOf(info);
  if (own === platform) return { platform, emulated: false };
  const native = own ?? `linux/${info.architecture}`;
  if (options.runtime === "runsc") {
    throw new SandboxRunError(
      "usage",
      `gVisor (runsc) cannot run ${platform} sandboxes on ${engine.toLowerCase()}, whose platform is ${native}: gVisor runs programs of its own architecture only, never through an emulator.`,
      {
        hint: `Use --runtime runc for ${platform} runs (emulated with qemu), or keep gVisor on the engine's own platform (--platform ${native}).`,
      },
    );
  }
  if (info.dockerDesktop) return { platform, emulated: true };
  const sameKernel = host.os === "linux" && info.kernelVersion !== undefined && info.kernelVersion === host.release;
  if (!sameKernel) return { platform, emulated: true };
  const emulator = emulatorFor(platform, host.binfmtEntries());
  if (!emulator) {
    throw new SandboxRunError(
      "docker-unavailable",
      `${engine} (${native}) cannot run ${platform} containers: no emulator for ${ARCH_NAMES[platform].kernel} is registered with binfmt_misc on this machine.`,
      { hint: registerEmulatorHint(platform) },
    );
  }
  if (!emulator.flags.includes("F")) {
    throw new SandboxRunError(
      "docker-unavailable",
      `${engine} (${native}) cannot run ${platform} containers: the emulator ${emulator.name} (${emulator.interpreter}) is registered without the F flag, so containers, which hold no copy of it, cannot use it.`,
      { hint: `Remove it (\`echo -1 > ${BINFMT_DIR}/${emulator.name}\`), then: ${registerEmulatorHint(platform)}` },
    );
  }
  return { platform, emulated: true };
}
