// Docker's refusal to create or start a run's container, as an error that says what to do.
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
    return new SandboxRunError("image-missing", `The runner image ${plan.image} is missing.`, {
      hint: "Build it with `sandbox-run image build`.",
      cause: error,
    });
  }
  return new SandboxRunError("docker-unavailable", `Docker could not ${step} the container: ${message}`, {
    hint: "`sandbox-run doctor` checks the engine, the runtimes and the image.",
    cause: error,
  });
}
