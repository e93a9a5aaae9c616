// The one task every variant runs, so the variants differ only in where Pi runs: a scripted
// model asks for one bash call, then calls the final tool. Also the Pi flags, models.json and
// final-tool extension for the variants that start Pi themselves (host, plain `docker run`).
import fs from "node:fs";
import path from "node:path";
import type { JsonSchema } from "../src/agent.js";
import { buildPiArgs, FINAL_TOOL_DESCRIPTION, FINAL_TOOL_NAME } from "../src/pi/pi-args.js";
import { loadPolicy } from "../src/policy/load-policy.js";
import { IMAGE_PATHS } from "../src/sandbox-contract.js";
import type { Script } from "../src/scripted-model/scripted-model-server.js";

export const PROVIDER = "scripted";
export const TASK_MODEL = "bench-task";
export const STREAM_MODEL = "bench-stream";
/** Times gateway round trips from inside the sandbox (the copy section: relay vs bind-mounted socket). */
export const RTT_MODEL = "bench-rtt";
/** A key that looks real: the gateway must keep it on the host (the scripted server ignores it). */
export const API_KEY = "sk-bench-not-a-real-key";

export const TASK_PROMPT = "Run `echo hello` with bash, then report what it printed with the final tool.";
export const TASK_SCHEMA: JsonSchema = {
  type: "object",
  properties: { printed: { type: "string" } },
  required: ["printed"],
  additionalProperties: false,
};
export const TASK_RESULT = { printed: "hello" };

/** Prints a nanosecond timestamp every 200 ms: each line says when Pi's bash saw it. */
export const STREAM_COMMAND = "for i in 1 2 3 4 5; do date +%s%N; sleep 0.2; done";

/**
 * Inside the sandbox: 200 sequential requests to the gateway (a path it refuses at once, so no
 * upstream is involved) over one keep-alive connection, then 100 on fresh connections.
 */
export const RTT_COMMAND = `node -e '
const http = require("http");
const time = async (n, agent) => {
  const t = [];
  for (let i = 0; i < n; i++) {
    const s = process.hrtime.bigint();
    await new Promise((ok, ko) => http.get({ host: "127.0.0.1", port: 18080, path: "/bench-rtt", agent }, (r) => { r.resume(); r.on("end", ok); }).on("error", ko));
    t.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  t.sort((a, b) => a - b);
  return t[Math.floor(n / 2)].toFixed(3);
};
(async () => {
  const keep = await time(200, new http.Agent({ keepAlive: true }));
  const fresh = await time(100, false);
  console.log("keep-alive=" + keep + " new-connection=" + fresh);
})();
'`;

function bashThenFinal(command: string, final: unknown): Script {
  return [
    { toolCalls: [{ name: "bash", arguments: { command } }] },
    { toolCalls: [{ name: FINAL_TOOL_NAME, arguments: final }] },
  ];
}

export function benchScripts(): Record<string, Script> {
  return {
    [TASK_MODEL]: bashThenFinal("echo hello", TASK_RESULT),
    [STREAM_MODEL]: bashThenFinal(STREAM_COMMAND, { printed: "timestamps" }),
    [RTT_MODEL]: bashThenFinal(RTT_COMMAND, { printed: "round trips" }),
  };
}

/** Pi's models.json with the scripted provider (the key is only ever seen by the scripted server). */
export function benchModelsJson(baseUrl: string): Record<string, unknown> {
  return {
    providers: {
      [PROVIDER]: {
        baseUrl,
        api: "openai-completions",
        apiKey: API_KEY,
        models: [TASK_MODEL, STREAM_MODEL, RTT_MODEL].map((id) => ({ id, contextWindow: 32000, maxTokens: 4096 })),
      },
    },
  };
}

/**
 * Pi's argv for a run started without the launcher: the exact flags sandbox-run passes, with
 * the final-tool extension replaced by a wrapper that sets the tool definition itself (inside
 * the sandbox the launcher does that).
 */
export function directPiArgs(model: string, extensionPath: string): string[] {
  const policy = loadPolicy("workspace-write");
  const args = buildPiArgs({
    model: `${PROVIDER}/${model}`,
    tools: policy.tools,
    finalToolName: FINAL_TOOL_NAME,
    finalToolExtension: IMAGE_PATHS.finalToolExtension,
    contextFiles: policy.contextFiles,
    extraArgs: [],
  });
  return args.map((arg) => (arg === IMAGE_PATHS.finalToolExtension ? extensionPath : arg));
}

/**
 * Writes an agent dir (models.json) and the final-tool wrapper extension into `dir`.
 * `finalToolModule` is where the wrapper imports images/pi/final-tool.mjs from: the repo's
 * copy on the host, the image's copy inside a plain container.
 */
export function writePiHome(
  dir: string,
  baseUrl: string,
  finalToolModule: string,
): { agentDir: string; extension: string } {
  const agentDir = path.join(dir, "agent");
  fs.mkdirSync(agentDir, { recursive: true });
  fs.writeFileSync(path.join(agentDir, "models.json"), JSON.stringify(benchModelsJson(baseUrl)));
  const extension = path.join(dir, "final-tool-wrapper.mjs");
  const definition = { name: FINAL_TOOL_NAME, description: FINAL_TOOL_DESCRIPTION, parameters: TASK_SCHEMA };
  fs.writeFileSync(
    extension,
    `import register from ${JSON.stringify(finalToolModule)};\n` +
      `globalThis.__sandboxRunFinalTool = ${JSON.stringify(definition)};\n` +
      "export default register;\n",
  );
  return { agentDir, extension };
}

/** The environment sandbox-run gives Pi, minus what only the sandbox needs. */
export const PI_ENV = { PI_OFFLINE: "1", PI_SKIP_VERSION_CHECK: "1", PI_TELEMETRY: "0", LANG: "C.UTF-8" };
