// The platform of a run: chosen by option, constructor, policy or SANDBOX_RUN_PLATFORM (in that
// order), kept in the policy (so records and replays keep it), settled on the engine the run gets
// (its own platform by default), passed to the engine at create, and refused up front where the
// engine cannot run it.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseRunFlags } from "../../src/cli/parse-run-args.js";
import { dockerCreateOptions } from "../../src/engine/docker-create-options.js";
import type { Engine, EngineInfo } from "../../src/engine/engine.js";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import { ensureRunnerImage } from "../../src/image/ensure-runner-image.js";
import { runnerImageSpec } from "../../src/image/runner-image.js";
import { loadPolicy, parsePolicy } from "../../src/policy/load-policy.js";
import { containerFailure } from "../../src/run/container-failure.js";
import { placeOnEngine } from "../../src/run/place-on-engine.js";
import { containerSpecOf } from "../../src/run/plan/container-spec.js";
import { preparePlan } from "../../src/run/plan/prepare-plan.js";
import { type RunOptions, resolveRun } from "../../src/run/plan/resolve-options.js";
import { IMAGE_LABEL_PI_VERSION } from "../../src/sandbox-contract.js";

const ws = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-platform-")));
afterAll(() => fs.rmSync(ws, { recursive: true, force: true }));
const MODELS = {
  providers: { scripted: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", models: [{ id: "x" }] } },
};
const resolve = (run: RunOptions, config: RunOptions = {}, env: Record<string, string> = {}) =>
  resolveRun("do it", config, { cwd: ws, models: MODELS, model: "scripted/x", ...run }, env);

function caught(fn: () => unknown): SandboxRunError {
  try {
    fn();
  } catch (error) {
    if (isSandboxRunError(error)) return error;
    throw error;
  }
  throw new Error("expected an error");
}

const engine = { name: "local", sharesHostFilesystem: true } as Engine;
const amd64: EngineInfo = {
  version: "20.10.24",
  apiVersion: "1.41",
  runtimes: {},
  securityOptions: [],
  platform: "linux/amd64",
  architecture: "x86_64",
  // Another kernel than this machine's: its emulators cannot be seen from here.
  kernelVersion: "5.10.0-other",
  dockerDesktop: false,
};

describe("the platform option", () => {
  it("goes run > constructor > policy > SANDBOX_RUN_PLATFORM, and ends up in the policy", () => {
    const armPolicy = parsePolicy({ ...loadPolicy("workspace-write"), platform: "linux/arm64" }, "test");
    expect(resolve({}, {}, {}).policy.platform).toBeUndefined();
    expect(resolve({}, {}, { SANDBOX_RUN_PLATFORM: "linux/arm64" }).policy.platform).toBe("linux/arm64");
    expect(resolve({ policy: armPolicy }, {}, { SANDBOX_RUN_PLATFORM: "linux/amd64" }).policy.platform).toBe(
      "linux/arm64",
    );
    expect(resolve({ policy: armPolicy }, { platform: "linux/amd64" }).policy.platform).toBe("linux/amd64");
    expect(resolve({ platform: "linux/arm64" }, { platform: "linux/amd64" }).policy.platform).toBe("linux/arm64");
  });

  it("is a usage error when it names no runner platform, wherever it comes from", () => {
    expect(caught(() => resolve({}, {}, { SANDBOX_RUN_PLATFORM: "linux/riscv64" })).shortMessage).toContain(
      'SANDBOX_RUN_PLATFORM names the platform "linux/riscv64"',
    );
    expect(caught(() => parseRunFlags({ platform: "arm" }, {})).code).toBe("usage");
    expect(parseRunFlags({ platform: "arm64" }, {}).platform).toBe("linux/arm64");
    expect(caught(() => parsePolicy({ ...loadPolicy("read-only"), platform: "arm64" }, "p.json")).code).toBe("usage");
  });
});

describe("placeOnEngine", () => {
  it("runs on the engine's own platform by default, with its runner image", () => {
    const planned = preparePlan(resolve({}), { image: runnerImageSpec("linux/amd64").tag });
    const placed = placeOnEngine(planned, engine, { ...amd64, platform: "linux/arm64", architecture: "aarch64" });
    expect(placed.emulated).toBe(false);
    expect(placed.planned.plan.platform).toBe("linux/arm64");
    expect(placed.planned.plan.image).toBe(runnerImageSpec("linux/arm64").tag);
  });

  it("keeps an image the caller chose, and the platform the caller chose (emulated)", () => {
    const planned = preparePlan(resolve({ platform: "linux/arm64", image: "sandbox-run/pi-apt:x" }), {
      image: "sandbox-run/pi-apt:x",
    });
    const placed = placeOnEngine(planned, engine, amd64);
    expect(placed).toMatchObject({
      emulated: true,
      planned: { plan: { platform: "linux/arm64", image: "sandbox-run/pi-apt:x" } },
    });
  });

  it("plans copy mode under emulation, saying why, and refuses bind mode there: its no-setuid filter cannot be installed under qemu (review, session 33)", () => {
    const other = process.arch === "arm64" ? "linux/amd64" : "linux/arm64";
    const planned = preparePlan(resolve({ platform: other }), { image: "x" });
    expect(planned.plan.workspaceMode).toBe("copy");
    expect(planned.plan.mounts).toEqual([]);
    expect(planned.copyModeReason).toMatch(
      /copy mode.*the run is emulated \(linux\/[a-z0-9]+ on this linux\/[a-z0-9]+ host\)/,
    );
    const error = caught(() => preparePlan(resolve({ platform: other, workspaceMode: "bind" }), { image: "x" }));
    expect(error.code).toBe("usage");
    expect(error.shortMessage).toMatch(/^Bind mode cannot run under emulation/);
    // The host's own platform keeps bind mode.
    const native = process.arch === "arm64" ? "linux/arm64" : "linux/amd64";
    expect(preparePlan(resolve({ platform: native }), { image: "x" }).plan.workspaceMode).toBe("bind");
  });

  it("refuses gVisor under emulation before anything is created", () => {
    const planned = preparePlan(resolve({ platform: "linux/arm64", runtime: "runsc" }), { image: "x" });
    const error = caught(() => placeOnEngine(planned, engine, amd64));
    expect(error.code).toBe("usage");
    expect(error.shortMessage).toContain("gVisor (runsc) cannot run linux/arm64 sandboxes");
  });

  it("takes an engine that does not say its architecture to be of this machine's platform", () => {
    const unsaid = { ...amd64, platform: undefined, architecture: undefined };
    const placed = placeOnEngine(preparePlan(resolve({}), { image: "x" }), engine, unsaid);
    expect(placed.planned.plan.platform).toBe(process.arch === "arm64" ? "linux/arm64" : "linux/amd64");
    expect(placed.emulated).toBe(false);
  });

  it("refuses an engine whose own architecture has no runner image, unless a platform is chosen", () => {
    const s390x = { ...amd64, platform: undefined, architecture: "s390x" };
    const error = caught(() => placeOnEngine(preparePlan(resolve({}), { image: "x" }), engine, s390x));
    expect(error.shortMessage).toContain("runs on s390x");
    expect(
      placeOnEngine(preparePlan(resolve({ platform: "linux/amd64" }), { image: "x" }), engine, s390x).emulated,
    ).toBe(true);
  });
});

describe("the image of a run's platform", () => {
  it("is refused when the engine's image under that name is of another platform, saying how to build one", async () => {
    const engineWith = {
      name: "local",
      imageDetails: async () => ({
        labels: { [IMAGE_LABEL_PI_VERSION]: "1.6.0" },
        platform: "linux/amd64",
        sizeBytes: 1,
      }),
    } as unknown as Engine;
    let error: unknown;
    try {
      await ensureRunnerImage(engineWith, { image: "sandbox-run/pi-apt:mine", platform: "linux/arm64" });
    } catch (e) {
      error = e;
    }
    expect(isSandboxRunError(error) && error.shortMessage).toBe(
      "The image sandbox-run/pi-apt:mine is linux/amd64, and the run is on linux/arm64.",
    );
    expect(isSandboxRunError(error) && error.hint).toContain("sandbox-run image build --platform linux/arm64");
    expect(await ensureRunnerImage(engineWith, { image: "sandbox-run/pi-apt:mine", platform: "linux/amd64" })).toEqual({
      tag: "sandbox-run/pi-apt:mine",
      piVersion: "1.6.0",
    });
  });
});

describe("the engine's create call", () => {
  it("carries the platform (a query parameter), and nothing when the plan has none", () => {
    const planned = preparePlan(resolve({ platform: "linux/arm64" }), { image: "img" });
    expect(dockerCreateOptions(containerSpecOf(planned.plan))).toMatchObject({ platform: "linux/arm64", Image: "img" });
    const plain = preparePlan(resolve({}), { image: "img" });
    expect(dockerCreateOptions(containerSpecOf(plain.plan))).not.toHaveProperty("platform");
  });

  it("turns the engine's refusals into errors that say what to do", () => {
    const { plan } = preparePlan(resolve({ platform: "linux/arm64" }), { image: "img-arm64" });
    const missing = containerFailure(new Error("(HTTP code 404) no such container - No such image: img-arm64"), plan);
    expect(missing.code).toBe("image-missing");
    expect(missing.shortMessage).toBe("The linux/arm64 runner image img-arm64 is missing.");
    expect(missing.hint).toContain("image build --platform linux/arm64");
    const format = containerFailure(
      new Error(
        "OCI runtime create failed: runc create failed: exec /opt/sandbox-run/node/bin/node: exec format error",
      ),
      plan,
      "start",
    );
    expect(format.code).toBe("docker-unavailable");
    expect(format.shortMessage).toContain("cannot run linux/arm64 programs");
    expect(format.hint).toContain("qemu-user-static");
  });
});
