// The Linux platforms a runner image is built for and a sandbox runs on, and the names each
// tool gives their architecture (Docker and Debian say amd64/arm64, the kernel and docker info
// x86_64/aarch64, Node x64/arm64, qemu's binfmt entries qemu-x86_64/qemu-aarch64).

export type RunnerPlatform = "linux/amd64" | "linux/arm64";
export const RUNNER_PLATFORMS: readonly RunnerPlatform[] = Object.freeze(["linux/amd64", "linux/arm64"]);

interface ArchNames {
  /** Docker's and Debian's name (image Architecture, `dpkg --print-architecture`). */
  docker: string;
  /** The kernel's (`uname -m`, docker info's Architecture). */
  kernel: string;
  /** Node's process.arch, and the npm package's --cpu. */
  node: string;
}

export const ARCH_NAMES: Readonly<Record<RunnerPlatform, ArchNames>> = Object.freeze({
  "linux/amd64": { docker: "amd64", kernel: "x86_64", node: "x64" },
  "linux/arm64": { docker: "arm64", kernel: "aarch64", node: "arm64" },
});

/**
 * The platform an architecture name means, whichever tool's name it is ("x86_64", "x64", "amd64",
 * "aarch64", "arm64", "arm64/v8"), or undefined for architectures no runner image is built for.
 */
export function platformOfArch(arch: string | undefined): RunnerPlatform | undefined {
  const name = (arch ?? "").toLowerCase().replace(/\/v8$/, "");
  for (const platform of RUNNER_PLATFORMS) {
    if (Object.values(ARCH_NAMES[platform]).includes(name)) return platform;
  }
  return undefined;
}

/** "linux/arm64", "linux/arm64/v8", "arm64", "aarch64" -> "linux/arm64"; undefined for anything else. */
export function normalizePlatform(text: string): RunnerPlatform | undefined {
  const trimmed = text.trim().toLowerCase();
  const arch = trimmed.startsWith("linux/") ? trimmed.slice("linux/".length) : trimmed;
  if (arch.includes("/") && !/^[a-z0-9_]+\/v8$/.test(arch)) return undefined;
  return platformOfArch(arch);
}

/** The platform of this machine's Node: what a local Linux engine runs natively. */
export function hostPlatform(arch: string = process.arch): RunnerPlatform {
  return platformOfArch(arch) ?? "linux/amd64";
}

/** The short name a tag or a file name carries for a platform: "amd64", "arm64". */
export function platformArch(platform: RunnerPlatform): string {
  return ARCH_NAMES[platform].docker;
}
