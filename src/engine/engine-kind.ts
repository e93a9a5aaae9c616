// What kind of machine an engine runs on, from its own answers to /info and /version: its
// platform, and whether it is Docker Desktop. Docker Desktop (macOS, Windows, and Linux too) runs
// its engine in a VM of its own: host paths reach containers only through the VM's file sharing
// (with other ownership semantics), and a unix socket on the host cannot be bind-mounted into a
// container at all. Runs there use copy mode, whose workspace and gateway need neither. So do runs
// on an engine that remaps user ids (userns-remap, rootless Docker): its containers' uids are other
// uids on this host, so a mounted workspace is neither the sandbox's to write nor the caller's after.
import { hostPlatform, platformOfArch, type RunnerPlatform } from "../util/platform.js";
import type { Engine, EngineInfo } from "./engine.js";

/** The fields of the Engine API's /info answer read here (as Docker names them). */
export interface RawEngineInfo {
  Architecture?: string;
  OperatingSystem?: string;
  OSType?: string;
  KernelVersion?: string;
  Name?: string;
  Labels?: string[] | null;
  SecurityOptions?: string[] | null;
}

/** The fields of /version read here. */
export interface RawEngineVersion {
  Platform?: { Name?: string };
}

interface EngineKind {
  /** The engine's own platform, or undefined for an architecture no runner image is built for. */
  platform?: RunnerPlatform;
  /** Architecture as the engine reports it ("x86_64", "aarch64"); absent when it does not say. */
  architecture?: string;
  operatingSystem: string;
  kernelVersion: string;
  /** Docker Desktop, or another engine in a LinuxKit VM: no host sockets, shared paths through the VM. */
  dockerDesktop: boolean;
  /** Its containers' uids are other uids on this host: "userns" (userns-remap) or "rootless". */
  remapsUsers?: "userns" | "rootless";
}

/**
 * Docker Desktop says so in several places, each checked (one may be missing in a release):
 * OperatingSystem "Docker Desktop" (since 4.x), /version's Platform.Name "Docker Desktop 4.33.0 (...)",
 * the `com.docker.desktop.address` engine label, and its LinuxKit kernel ("6.10.0-linuxkit").
 */
export function engineKindOf(info: RawEngineInfo, version: RawEngineVersion = {}): EngineKind {
  const operatingSystem = info.OperatingSystem ?? "";
  const kernelVersion = info.KernelVersion ?? "";
  const dockerDesktop =
    /^Docker Desktop\b/i.test(operatingSystem) ||
    /^Docker Desktop\b/i.test(version.Platform?.Name ?? "") ||
    (info.Labels ?? []).some((label) => label.startsWith("com.docker.desktop.address=")) ||
    /-linuxkit\b/.test(kernelVersion);
  const platform = (info.OSType ?? "linux") === "linux" ? platformOfArch(info.Architecture) : undefined;
  // Docker lists them as "name=userns" and "name=rootless" (each option a comma-separated list).
  // An engine's answer is untrusted input: an entry that is no string names nothing.
  const named = (name: string) =>
    (Array.isArray(info.SecurityOptions) ? info.SecurityOptions : []).some(
      (o: unknown) => typeof o === "string" && o.split(",").includes(`name=${name}`),
    );
  const remapsUsers = named("userns") ? "userns" : named("rootless") ? "rootless" : undefined;
  return {
    ...(remapsUsers ? { remapsUsers } : {}),
    ...(platform ? { platform } : {}),
    ...(info.Architecture ? { architecture: info.Architecture } : {}),
    operatingSystem,
    kernelVersion,
    dockerDesktop,
  };
}

/**
 * The engine's own platform. An engine that does not say its architecture is taken to be of this
 * machine's (as every engine was before platforms existed); one that names another architecture
 * (s390x ...) has none: undefined.
 */
export function ownPlatformOf(info: Pick<EngineInfo, "platform" | "architecture">): RunnerPlatform | undefined {
  if (info.platform) return info.platform;
  return info.architecture ? undefined : hostPlatform();
}

/**
 * Whether bind mounts of this host's paths, and of its unix sockets (the model gateway's), reach
 * the engine's containers as this host's files: the engine's own answer from its endpoint, never
 * on Docker Desktop, never where the engine remaps user ids.
 */
export function sharesHostPaths(
  engine: Pick<Engine, "sharesHostFilesystem">,
  info?: Pick<EngineInfo, "dockerDesktop" | "remapsUsers">,
): boolean {
  return engine.sharesHostFilesystem && !info?.dockerDesktop && !info?.remapsUsers;
}

/** Why a local engine's containers cannot take a bind-mounted workspace, in words, or undefined. */
export function noBindModeReason(info?: Pick<EngineInfo, "dockerDesktop" | "remapsUsers">): string | undefined {
  if (info?.dockerDesktop) return "is Docker Desktop (a VM: this host's unix sockets cannot be mounted there)";
  if (info?.remapsUsers)
    return `remaps user ids (${info.remapsUsers === "userns" ? "userns-remap" : "rootless Docker"}: the sandbox's uid is another uid on this host, so it could not write a mounted workspace, and what it wrote would not be yours)`;
  return undefined;
}
