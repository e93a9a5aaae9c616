// `sandbox-run demo`: the whole pipeline (image, container, gateway, streamed events,
// schema-validated result) against a scripted model bundled with the package, so a new user
// sees it work before having any provider key.
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { ContainerPiAgent } from "../container-pi-agent.js";
import { usageError } from "../errors.js";
import { DEMO_MODEL_ID, DEMO_PROVIDER, demoSchema, demoScript } from "../demo/demo-model.js";
import { startScriptedModelServer } from "../scripted-model/scripted-model-server.js";
import type { CliIo } from "./cli-io.js";
import { EXIT } from "./exit-codes.js";
import type { CommandContext } from "./lazy-command.js";
import { createProgressReporter } from "./progress-reporter.js";

/** `sandbox-run demo`'s action. */
export function demoCommand({ io }: CommandContext, flags: { runtime?: string; quiet?: boolean }): Promise<number> {
  if (flags.runtime && flags.runtime !== "runc" && flags.runtime !== "runsc")
    throw usageError(`--runtime must be runc or runsc, not "${flags.runtime}".`);
  return runDemo(io, { quiet: flags.quiet, runtime: flags.runtime as "runc" | "runsc" | undefined });
}

export async function runDemo(
  io: CliIo,
  options: { quiet?: boolean; runtime?: "runc" | "runsc" } = {},
): Promise<number> {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-demo-"));
  const workspace = path.join(scratch, "workspace");
  const hostSecretPath = path.join(scratch, "host-secret.txt");
  const key = `sk-demo-${crypto.randomBytes(12).toString("hex")}`;
  fs.mkdirSync(workspace);
  fs.writeFileSync(path.join(workspace, "README.md"), "# demo project\n");
  fs.writeFileSync(path.join(workspace, "main.py"), "print('hello from the demo workspace')\n");
  fs.writeFileSync(hostSecretPath, "this host file is outside the workspace and must stay unreadable\n");

  const server = await startScriptedModelServer({ scripts: { [DEMO_MODEL_ID]: demoScript({ hostSecretPath, key }) } });
  const say = (line: string) => options.quiet || io.stderr(`${line}\n`);
  try {
    say(`demo: scripted model at ${server.baseUrl}; workspace ${workspace}`);
    const agent = new ContainerPiAgent({
      autoBuildImage: true,
      onProgress: options.quiet ? undefined : (line) => io.stderr(`${line}\n`),
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
    const details = await agent.runDetailed("Look around the workspace, then test the sandbox's limits and report.", {
      cwd: workspace,
      model: `${DEMO_PROVIDER}/${DEMO_MODEL_ID}`,
      schema: demoSchema,
      runtime: options.runtime,
      onEvent: options.quiet ? undefined : createProgressReporter((line) => io.stderr(`${line}\n`)),
    });
    const upstreamSawKey = server.requests.every((r) => r.headers.authorization === `Bearer ${key}`);
    io.stdout(`${JSON.stringify(details.result, null, 2)}\n`);
    say(
      `demo: done in ${(details.durationMs / 1000).toFixed(2)}s on ${details.image}; ` +
        `the model server received the real key on every request: ${upstreamSawKey ? "yes" : "NO"}; the container is gone.`,
    );
    return EXIT.ok;
  } finally {
    await server.close();
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}
