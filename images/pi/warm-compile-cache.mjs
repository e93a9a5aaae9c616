// Build-time only (a RUN step of the Dockerfile): runs one scripted 2-turn task through the
// real launcher and Pi, so Node's compile cache holds every module and function a sandboxed
// run compiles (`pi --version` loads about half of them), and so the image build fails if the
// launcher cannot start Pi, run a tool and finish with the final tool.
//
// The stand-in for the host's model gateway is a unix socket in a temp directory, forwarded
// by the launcher exactly as in a run: it answers the liveness request and an OpenAI-style
// streamed chat completion, asking for one bash call and then the final tool.
//
// WARM_CACHE (a build argument) is "required" on the engine's own platform: a run that does not
// finish in WARM_CACHE_SECONDS fails the build. Under emulation it is "optional": the same bound,
// and a run that does not finish (slow, or Node crashed under qemu) leaves an empty cache and
// the build goes on; runs then compile Pi from source.
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";

const ROOT = "/opt/sandbox-run";
const PI_CLI = `${ROOT}/app/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js`;
const FINAL_TOOL = "sandbox_run_final_result";
const PORT = 18080;
const REQUIRED = process.env.WARM_CACHE !== "optional";
const BOUND_MS = Number(process.env.WARM_CACHE_SECONDS || 60) * 1000;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-warm-"));
const socketPath = path.join(dir, "gateway.sock");

function completion(res, body) {
  const turn = body.messages.filter((m) => m.role === "assistant").length;
  const call =
    turn === 0
      ? { name: "bash", arguments: JSON.stringify({ command: "echo warm" }) }
      : { name: FINAL_TOOL, arguments: JSON.stringify({ ok: true }) };
  const chunk = (delta, finish) => ({
    id: `warm-${turn}`,
    object: "chat.completion.chunk",
    created: 0,
    model: body.model,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  res.writeHead(200, { "content-type": "text/event-stream" });
  const send = (value) => res.write(`data: ${JSON.stringify(value)}\n\n`);
  send(chunk({ role: "assistant", content: "" }, null));
  send(chunk({ tool_calls: [{ index: 0, id: `call_${turn}`, type: "function", function: call }] }, null));
  send(chunk({}, "tool_calls"));
  send({
    id: `warm-${turn}`,
    object: "chat.completion.chunk",
    created: 0,
    model: body.model,
    choices: [],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  });
  res.end("data: [DONE]\n\n");
}

const server = http.createServer((req, res) => {
  if (req.url === "/__sandbox-run/alive") {
    res.writeHead(200);
    res.flushHeaders();
    return;
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => completion(res, JSON.parse(Buffer.concat(chunks).toString("utf8"))));
});
await new Promise((resolve) => server.listen(socketPath, resolve));

const config = {
  forwards: [{ port: PORT, socketPath }],
  livenessSocket: socketPath,
  agentDir: path.join(dir, "home", ".pi", "agent"),
  modelsJson: {
    providers: {
      warm: {
        baseUrl: `http://127.0.0.1:${PORT}/warm/v1`,
        api: "openai-completions",
        apiKey: "placeholder",
        models: [{ id: "warm", contextWindow: 32000, maxTokens: 4096 }],
      },
    },
  },
  piCli: PI_CLI,
  finalTool: {
    name: FINAL_TOOL,
    description: "Submit the final result.",
    parameters: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] },
  },
};

/** One Pi run through the launcher with the flags sandbox-run passes (src/pi/pi-args.ts). */
async function runPi() {
  const piArgs = [
    "--mode",
    "json",
    "--no-session",
    "--no-extensions",
    "--no-approve",
    "--no-skills",
    "--no-prompt-templates",
    "--no-themes",
    "--no-mcp",
    "--offline",
    "--no-context-files",
    "--model",
    "warm/warm",
    "--tools",
    `read,bash,edit,write,grep,find,ls,${FINAL_TOOL}`,
    "--extension",
    `${ROOT}/final-tool.mjs`,
    "--append-system-prompt",
    `Call ${FINAL_TOOL} when done.`,
  ];
  const child = spawn(process.execPath, [`${ROOT}/launcher.mjs`, ...piArgs], {
    cwd: dir,
    env: {
      PATH: process.env.PATH,
      HOME: path.join(dir, "home"),
      LANG: "C.UTF-8",
      PI_CODING_AGENT_DIR: config.agentDir,
      PI_OFFLINE: "1",
      PI_SKIP_VERSION_CHECK: "1",
      PI_TELEMETRY: "0",
      NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE,
      SANDBOX_RUN_CONFIG: JSON.stringify(config),
    },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const killer = setTimeout(() => child.kill("SIGKILL"), BOUND_MS);
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stdin.end("Warm the cache.");
  const code = await new Promise((resolve) => child.on("close", resolve));
  clearTimeout(killer);
  return { code, out };
}

const { code, out } = await runPi();
const finished = out
  .split("\n")
  .some(
    (line) => line.includes('"tool_execution_end"') && line.includes(FINAL_TOOL) && line.includes('"isError":false'),
  );
if (code !== 0 || !finished) {
  process.stderr.write(
    `warm-compile-cache: the scripted run did not finish within ${BOUND_MS / 1000} s (exit ${code}):\n${out.slice(-2000)}\n`,
  );
  if (REQUIRED) process.exit(1);
  // Whatever a killed run left is dropped: the image ships an empty cache, never a partial one.
  fs.rmSync(process.env.NODE_COMPILE_CACHE, { recursive: true, force: true });
  fs.rmSync(dir, { recursive: true, force: true });
  process.stderr.write("warm-compile-cache: optional here (emulated build); the image runs without a warm cache\n");
  process.exit(0);
}
server.closeAllConnections();
server.close();
fs.rmSync(dir, { recursive: true, force: true });
