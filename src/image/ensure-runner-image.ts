// Which image a run uses, and whether it can: a chosen image must be built FROM the runner image
// (its launcher runs Pi), which passes on the runner's labels; an `image build --apt` image must be
// built on this version's runner image; a missing default image is built when the caller allows it.
import type { Engine, ImageDetails } from "../engine/engine.js";
import { SandboxRunError } from "../errors.js";
import {
  CONTAINER_LABELS,
  IMAGE_LABEL_APT_PACKAGES,
  IMAGE_LABEL_CONTENT_HASH,
  IMAGE_LABEL_PI_VERSION,
} from "../sandbox-contract.js";
import { hostPlatform, type RunnerPlatform } from "../util/platform.js";
import type { Progress } from "./base-image.js";
import { buildRunnerImage } from "./build-runner-image.js";
import { copyImage } from "./copy-image.js";
import { runnerImageSpec } from "./runner-image.js";

export interface ReadyImage {
  tag: string;
  piVersion: string;
  /** A chosen image built FROM another build's runner image: what the run's `image.stale` event says. */
  staleBase?: string;
  /**
   * The checked image's id: containers are made from it, not from the tag, which may name another
   * image by then (review, session 34: a tag moved to an image with a VOLUME and our labels after
   * an agent had checked it, and its next runs were made from that one unchecked).
   */
  id?: string;
}

/** An image of another platform than the run's: the engine would refuse it at create, less clearly. */
export function platformMismatch(
  tag: string,
  imagePlatform: string,
  platform: RunnerPlatform,
): SandboxRunError | undefined {
  if (imagePlatform === platform) return undefined;
  return new SandboxRunError("image-missing", `The image ${tag} is ${imagePlatform}, and the run is on ${platform}.`, {
    hint: `Build one for ${platform} (\`sandbox-run image build --platform ${platform}\`, with --apt <packages> for an --apt image), or run on ${imagePlatform} (--platform ${imagePlatform}).`,
  });
}

/** Why labels do not belong to a usable runner image of this version, or undefined when they do. */
export function runnerImageProblem(tag: string, labels: Record<string, string>): SandboxRunError | undefined {
  const spec = runnerImageSpec();
  if (!labels[IMAGE_LABEL_PI_VERSION]) {
    return new SandboxRunError(
      "usage",
      `The image ${tag} is not a sandbox-run runner image (it has no ${IMAGE_LABEL_PI_VERSION} label).`,
      {
        hint: `Build it FROM ${spec.tag} (\`sandbox-run image tag\` prints it), or add Debian packages with \`sandbox-run image build --apt <packages>\`.`,
      },
    );
  }
  const aptPackages = labels[IMAGE_LABEL_APT_PACKAGES];
  if (aptPackages && labels[IMAGE_LABEL_CONTENT_HASH] !== spec.contentHash) {
    return new SandboxRunError(
      "image-missing",
      `The image ${tag} was built on the runner image of another sandbox-run version.`,
      {
        hint: `Rebuild it for this version: sandbox-run image build --apt ${aptPackages.split(" ").join(",")}`,
      },
    );
  }
  return undefined;
}

/**
 * The image a run asked for (or this version's runner image), checked on the engine that runs it.
 * When that engine lacks it: loaded from another engine that has it (`sources`, e.g. the
 * controller's own), else built there when allowed (the tag's content hash makes it the same image).
 */
export async function ensureRunnerImage(
  engine: Engine,
  options: {
    image?: string;
    /** The platform the run is on (default: this machine's): the default image is its runner image. */
    platform?: RunnerPlatform;
    autoBuild?: boolean;
    progress?: Progress;
    sources?: Engine[];
    signal?: AbortSignal;
  },
): Promise<ReadyImage> {
  const platform = options.platform ?? hostPlatform();
  const spec = runnerImageSpec(platform);
  const tag = options.image ?? spec.tag;
  const details = await engine.imageDetails(tag);
  if (details) return checked(tag, details, platform);
  for (const source of options.sources ?? []) {
    if (source === engine) continue;
    const found = await source.imageDetails(tag).catch(() => undefined);
    if (!found || runnerImageProblem(tag, found.labels) || found.platform !== platform) continue;
    options.progress?.(`Loading ${tag} onto engine "${engine.name}" from engine "${source.name}" ...`);
    await copyImage(source, engine, tag, options.signal);
    const loaded = await engine.imageDetails(tag);
    if (!loaded) {
      throw new SandboxRunError("image-missing", `Engine "${engine.name}" loaded ${tag} but does not list it.`, {
        hint: "Load it by hand (`docker save | docker load`) and run again.",
      });
    }
    return checked(tag, loaded, platform);
  }
  if (options.image || !options.autoBuild) {
    throw new SandboxRunError("image-missing", `The runner image ${tag} is not built (or is out of date).`, {
      hint: options.image
        ? "Check the tag (`docker images`), or build it: `sandbox-run image build` for the runner image, with `--apt <packages>` for one with more tools."
        : `Build it with \`sandbox-run image build${platform === hostPlatform() ? "" : ` --platform ${platform}`}\` (about a minute${platform === hostPlatform() ? "" : " natively, longer under emulation"}; it needs the npm registry and a Debian mirror).`,
    });
  }
  const built = await buildRunnerImage(engine, { progress: options.progress, platform });
  return { tag: built.tag, piVersion: spec.piVersion };
}

/**
 * What a derived image's metadata would do to its sandboxes beyond what sandbox-run sets (review,
 * session 34): a VOLUME is an anonymous volume on the engine's disk, outside the run's disk limit
 * (a read-only run wrote 62 MB there) and, at a path in the workspace, over the host's files; a
 * label of our containers' own reaches each container made from it (docker-create-options.ts sets
 * the image's HEALTHCHECK to none).
 */
export function imageMetadataProblem(
  tag: string,
  details: Pick<ImageDetails, "labels" | "volumes">,
): SandboxRunError | undefined {
  const volumes = details.volumes ?? [];
  if (volumes.length > 0)
    return new SandboxRunError(
      "usage",
      `The image ${tag} declares ${volumes.length === 1 ? "a VOLUME" : "VOLUMEs"} (${volumes
        .slice(0, 10)
        .map((v) => JSON.stringify(v))
        .join(
          ", ",
        )}): the engine would make a volume on its own disk for each, outside the run's limits and its workspace's rules.`,
      {
        hint: "Build the image without VOLUME instructions (a sandbox's writable places are its workspace, the writable folders the run lends and its /tmp).",
      },
    );
  const imitated = CONTAINER_LABELS.filter((label) => Object.hasOwn(details.labels, label));
  if (imitated.length > 0)
    return new SandboxRunError(
      "usage",
      `The image ${tag} declares the label${imitated.length > 1 ? "s" : ""} ${imitated.join(", ")}, which sandbox-run sets on its containers: every container made from it would carry ${imitated.length > 1 ? "them" : "it"}.`,
      { hint: "Build the image without these labels (LABEL instructions naming sandbox-run.* are sandbox-run's own)." },
    );
  return undefined;
}

function checked(tag: string, details: ImageDetails, platform: RunnerPlatform): ReadyImage {
  const problem =
    runnerImageProblem(tag, details.labels) ??
    platformMismatch(tag, details.platform, platform) ??
    imageMetadataProblem(tag, details);
  if (problem) throw problem;
  const staleBase = staleBaseOf(tag, details.labels);
  return {
    tag,
    piVersion: details.labels[IMAGE_LABEL_PI_VERSION]!,
    ...(details.id ? { id: details.id } : {}),
    ...(staleBase ? { staleBase } : {}),
  };
}

/**
 * A Dockerfile image (`FROM` the runner image) keeps the launcher, relay and final tool of the
 * runner image it was built on: after an upgrade it runs the old ones until it is rebuilt, and ran
 * without a word (review, session 34). Said, not refused: the host treats what any image does as
 * hostile anyway, and a refusal would stop every job with such an image at the upgrade.
 */
function staleBaseOf(tag: string, labels: Record<string, string>): string | undefined {
  const spec = runnerImageSpec();
  const hash = labels[IMAGE_LABEL_CONTENT_HASH];
  if (!hash || hash === spec.contentHash) return undefined;
  return `the image ${tag} was built FROM the runner image of another sandbox-run build (content hash ${hash.slice(0, 12)}, this build's ${spec.contentHash.slice(0, 12)}): its launcher, relay and final tool are that build's; rebuild it FROM ${spec.tag} (\`sandbox-run image tag\` prints the tag)`;
}
