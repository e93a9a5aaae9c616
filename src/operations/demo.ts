// `sandbox-run demo`: the whole pipeline (image, container, gateway, streamed events,
// schema-validated result) against a scripted model bundled with the package, so a new user
// sees it work before having any provider key.
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { ContainerPiAgent } from "../container-pi-agent.js";
import { DEMO_MODEL_ID, DEMO_PROVIDER, demoSchema, demoScript } from "../demo/demo-model.js";
import type { RunDetails } from "../run/execute-run.js";
import type { RunEventListener } from "../run/run-events.js";
import { startScriptedModelServer } from "../scripted-model/scripted-model-server.js";

export interface DemoOptions {
  runtime?: "runc" | "runsc";
  /** Lines about what the demo does (where the scripted model and the workspace are). */
  say?: (line: string) => void;
  /** Image build progress, when the runner image has to be built first. */
  onProgress?: (line: string) => void;
  onEvent?: RunEventListener;
  /**
   * Stops the demo: its sandbox is stopped and removed and its scratch folder too; it then rejects
   * with a SandboxRunError "aborted" (the CLI's Ctrl-C).
   */
  signal?: AbortSignal;
}

export interface DemoOutcome {
  details: RunDetails;
  /** The scripted model server got the real key on every request (the sandbox only held a placeholder). */
  upstreamSawKey: boolean;
}

/** The demo run: a scratch workspace, the bundled scripted model, one sandboxed call; all removed after. */
export async function runDemo(options: DemoOptions = {}): Promise<DemoOutcome> {
  const { signal } = options;
  signal?.throwIfAborted();
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-demo-"));
  let server: Awaited<ReturnType<typeof startScriptedModelServer>> | undefined;
  let agent: ContainerPiAgent | undefined;
  try {
    const workspace = path.join(scratch, "workspace");
    const hostSecretPath = path.join(scratch, "host-secret.txt");
    const key = `sk-demo-${crypto.randomBytes(12).toString("hex")}`;
    fs.mkdirSync(workspace);
    fs.writeFileSync(path.join(workspace, "README.md"), "# demo project\n");
    fs.writeFileSync(path.join(workspace, "main.py"), "print('hello from the demo workspace')\n");
    fs.writeFileSync(hostSecretPath, "this host file is outside the workspace and must stay unreadable\n");

    server = await startScriptedModelServer({ scripts: { [DEMO_MODEL_ID]: demoScript({ hostSecretPath, key }) } });
    options.say?.(`demo: scripted model at ${server.baseUrl}; workspace ${workspace}`);
    agent = new ContainerPiAgent({
      autoBuildImage: true,
      // One call (SANDBOX_RUN_WARM makes its sandbox, and no refill after it).
      warm: { calls: 1 },
      onProgress: options.onProgress,
      models: {
        providers: {
          [DEMO_PROVIDER]: {
            baseUrl: server.baseUrl,
            api: "openai-completions",
            apiKey: key,
            models: [{ id: DEMO_MODEL_ID }],
          },
        },
      },
    });
    // Aborted at any point (an image build, the sandbox's start, the model's turns), the run
    // rejects with a SandboxRunError "aborted" once its sandbox is stopped and removed.
    const details = await agent.runDetailed("Look around the workspace, then test the sandbox's limits and report.", {
      cwd: workspace,
      model: `${DEMO_PROVIDER}/${DEMO_MODEL_ID}`,
      schema: demoSchema,
      runtime: options.runtime,
      onEvent: options.onEvent,
      signal,
    });
    const upstreamSawKey = server.requests.every((r) => r.headers.authorization === `Bearer ${key}`);
    return { details, upstreamSawKey };
  } finally {
    // Warm sandboxes (SANDBOX_RUN_WARM) the call did not use go too.
    await agent?.close().catch(() => {});
    await server?.close().catch(() => {});
    // The workspace and the host file the agent tries to read: never left behind, whatever happened.
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}
