// Makes the README's picture of a run's page (docs/show-page.png) from a real run: the built CLI,
// the real engine, image and Pi, the scripted model standing in for a provider (a small "fix the
// failing test" task, one request the egress proxy refuses), then `sandbox-run show` and Chromium.
//   npm run build && node --import tsx scripts/show-screenshot.ts [out.png]
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startScriptedModelServer } from "../src/scripted-model/scripted-model-server.js";
import { launchBrowser, openPage } from "../tests/support/browser.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const out = path.resolve(process.argv[2] ?? path.join(root, "docs/show-page.png"));
const cli = path.join(root, "dist/cli/main.js");

/** The built CLI, without blocking this process (the scripted model answers from here). */
function runBuiltCli(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("error", reject);
    child.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

const bash = (command: string) => ({ toolCalls: [{ name: "bash", arguments: { command } }] });

const server = await startScriptedModelServer({
  scripts: {
    fix: [
      bash("cat src/sum.js; node --test 2>&1 | grep -E '^(✔|✖|ℹ (pass|fail))'"),
      bash("sed -i 's/return a - b;/return a + b;/' src/sum.js && cat src/sum.js"),
      bash("node --test 2>&1 | grep -E '^(✔|✖|ℹ (pass|fail))'"),
      bash(
        `node -e 'fetch("https://example.com/").then((r) => console.log(r.status), (e) => console.log("example.com refused:", e.cause?.message ?? e.message))'`,
      ),
      {
        toolCalls: [
          {
            name: "sandbox_run_final_result",
            arguments: {
              verdict: "fixed",
              summary: "sum() subtracted its arguments; it adds them now and the test passes.",
            },
          },
        ],
      },
    ],
  },
});
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-screenshot-"));
try {
  const workspace = path.join(dir, "repo");
  fs.mkdirSync(path.join(workspace, "src"), { recursive: true });
  fs.mkdirSync(path.join(workspace, "test"));
  fs.writeFileSync(path.join(workspace, "src/sum.js"), "export function sum(a, b) {\n  return a - b;\n}\n");
  fs.writeFileSync(
    path.join(workspace, "test/sum.test.js"),
    'import { test } from "node:test";\nimport assert from "node:assert";\nimport { sum } from "../src/sum.js";\n\ntest("sum adds", () => assert.equal(sum(2, 3), 5));\n',
  );
  fs.writeFileSync(path.join(workspace, "package.json"), '{ "type": "module" }\n');
  fs.writeFileSync(
    path.join(dir, "models.json"),
    JSON.stringify({
      providers: {
        scripted: {
          baseUrl: server.baseUrl,
          api: "openai-completions",
          apiKey: "sk-screenshot",
          models: [{ id: "fix", contextWindow: 32000, maxTokens: 4096 }],
        },
      },
    }),
  );
  fs.writeFileSync(
    path.join(dir, "schema.json"),
    JSON.stringify({
      type: "object",
      properties: { verdict: { type: "string", enum: ["fixed", "not-fixed"] }, summary: { type: "string" } },
      required: ["verdict", "summary"],
    }),
  );
  const record = path.join(dir, "record");
  const run = await runBuiltCli([
    "--models",
    path.join(dir, "models.json"),
    "--model",
    "scripted/fix",
    "--policy",
    path.join(root, "policies/examples/npm-install.json"),
    "--schema",
    path.join(dir, "schema.json"),
    "--cwd",
    workspace,
    "--record",
    record,
    "-q",
    "The test fails: fix src/sum.js.",
  ]);
  if (run.status !== 0) throw new Error(`the run failed: ${run.stderr}`);
  const shown = await runBuiltCli(["show", record]);
  if (shown.status !== 0) throw new Error(`show failed: ${shown.stderr}`);
  const browser = await launchBrowser();
  try {
    const visit = await openPage(browser, shown.stdout.trim());
    // The whole page in one tall viewport (a full-page capture would draw the sticky navigation
    // bar where the viewport ended).
    const height = await visit.page.evaluate(() => document.documentElement.scrollHeight);
    await visit.page.setViewportSize({ width: 1100, height });
    await visit.page.evaluate(() => window.scrollTo(0, 0));
    await visit.page.screenshot({ path: out });
    if (visit.problems.length > 0 || visit.requests.length !== 1)
      throw new Error(`the page misbehaved: ${visit.problems}`);
    await visit.close();
  } finally {
    await browser.close();
  }
  process.stderr.write(`wrote ${out}\n`);
} finally {
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
