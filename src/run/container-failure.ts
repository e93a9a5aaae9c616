// Docker's refusal to create or start a run's container, as an error that says what to do.
import { registerEmulatorHint } from "../engine/platform-support.js";
import { SandboxRunError } from "../errors.js";
import type { RunPlan } from "../sandbox-contract.js";

export function containerFailure(error: unknown, plan: RunPlan, step: "create" | "start" = "create"): SandboxRunError {
  if (error instanceof SandboxRunError) return error;
  const message = (error as Error)?.message ?? String(error);
  if (/unknown or invalid runtime|runtime.*not found/i.test(message)) {
    return new SandboxRunError(
      "docker-unavailable",
      `The container runtime "${plan.runtime}" is not registered with Docker.`,
      {
        hint: "Register it in /etc/docker/daemon.json (see `sandbox-run doctor`), or use --runtime runc.",
        cause: error,
      },
    );
  }
  if (/No such image/i.test(message)) {
    // With a platform, the engine answers the same for an image of another platform.
    const what = plan.platform ? `The ${plan.platform} runner image ${plan.image}` : `The runner image ${plan.image}`;
    return new SandboxRunError("image-missing", `${what} is missing.`, {
      hint: `Build it with \`sandbox-run image build${plan.platform ? ` --platform ${plan.platform}` : ""}\`.`,
      cause: error,
    });
  }
  // The engine resolves mount sources on its own host: one that does not see a path this
  // controller sees (a controller in a container on the host's docker socket) cannot mount it
  // (review, session 34: Docker's raw error, "docker-unavailable", and a doctor that said "Ready.").
  const unseen = /bind source path does not exist: (\S+)/i.exec(message)?.[1];
  if (unseen) {
    return new SandboxRunError(
      "usage",
      `The engine does not see ${unseen}, which this controller sees: it mounts folders of its own host (sandbox-run in a container, on the host's docker socket?).`,
      {
        hint: "Use --workspace copy (the workspace is copied in and out), or mount the workspace and TMPDIR into this container at the same paths they have on the engine's host.",
        cause: error,
      },
    );
  }
  if (/exec format error/i.test(message) && plan.platform) {
    // The engine's machine has no emulator for the platform (not visible from here before the start).
    return new SandboxRunError(
      "docker-unavailable",
      `The engine cannot run ${plan.platform} programs: no emulator for them is registered on its machine.`,
      { hint: registerEmulatorHint(plan.platform), cause: error },
    );
  }
  return new SandboxRunError("docker-unavailable", `Docker could not ${step} the container: ${message}`, {
    hint: "`sandbox-run doctor` checks the engine, the runtimes and the image.",
    cause: error,
  });
}
