// `sandbox-run show` on the record of a real run (the built CLI, the real engine, image and Pi,
// the scripted model, the egress proxy refusing a host), opened from file:// in Chromium: what a
// person sees (the turns, tool names and outputs, the refused host, the diff lines, the schema
// check), folded parts opened and closed from the keyboard, nothing asked, logged or requested.
// Then the same record tampered with, as Markdown, replayed with its page in the folder, and a
// page refused inside the run's workspace.
import fs from "node:fs";
import path from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadRecord } from "../../src/replay/load-record.js";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import { chromiumAvailable, expandAll, launchBrowser, openPage } from "../support/browser.js";
import {
  containersOfRuns,
  dockerAvailable,
  makeWorkspace,
  modelsFor,
  runBuiltCli,
  startModel,
} from "../support/harness.js";
import { copyRecord } from "../support/record-files.js";
import { tempDir } from "../support/show-records.js";

const npmPolicy = path.resolve(import.meta.dirname, "../../policies/examples/npm-install.json");
const PAYLOAD = `<img src=x onerror="window.__pwned=1;alert(1)">`;
const verdict = { verdict: "approve", summary: "README tidied, answer.js added" };

describe.skipIf(!dockerAvailable() || !chromiumAvailable())("show: the page of a real run, in a real browser", () => {
  let server: ScriptedModelServer;
  let browser: Browser;
  let dir: string;
  let workspace: string;
  let record: string;
  let page: string;
  const runIds: string[] = [];

  beforeAll(async () => {
    server = await startModel({
      show: [
        {
          toolCalls: [
            {
              name: "bash",
              arguments: {
                command:
                  "cat README.md && sed -i 's/old line/new line/' README.md && printf 'export const answer = 42;\\n' > src/answer.js",
              },
            },
          ],
        },
        { toolCalls: [{ name: "bash", arguments: { command: `seq 1 300; printf '%s\\n' '${PAYLOAD}'` } }] },
        {
          toolCalls: [
            {
              name: "bash",
              arguments: {
                command: `node -e 'fetch("https://example.com/").then((r) => console.log("example", r.status), (e) => console.log("example failed:", e.cause?.code ?? e.message))'`,
              },
            },
          ],
        },
        { toolCalls: [{ name: "sandbox_run_final_result", arguments: verdict }] },
      ],
    });
    dir = tempDir("sandbox-run-show-real-");
    workspace = makeWorkspace({ "README.md": "# demo\nold line\n", "src/.keep": "" }, "sandbox-run-show-ws-");
    fs.writeFileSync(path.join(dir, "models.json"), JSON.stringify(modelsFor(server, ["show"])));
    fs.writeFileSync(
      path.join(dir, "schema.json"),
      JSON.stringify({
        type: "object",
        properties: { verdict: { type: "string", enum: ["approve", "reject"] }, summary: { type: "string" } },
        required: ["verdict", "summary"],
      }),
    );
    record = path.join(dir, "record");
    const run = await runBuiltCli([
      "--models",
      path.join(dir, "models.json"),
      "--model",
      "scripted/show",
      "--policy",
      npmPolicy,
      "--schema",
      path.join(dir, "schema.json"),
      "--cwd",
      workspace,
      "--record",
      record,
      "--json",
      "-q",
      "Tidy the README and add src/answer.js.",
    ]);
    const envelope = JSON.parse(run.stdout);
    runIds.push(envelope.runId);
    expect(envelope.ok, run.stderr).toBe(true);
    const shown = await runBuiltCli(["show", record]);
    expect(shown.status, shown.stderr).toBe(0);
    page = shown.stdout.trim();
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    expect(await containersOfRuns(runIds)).toEqual([]);
  });

  it("writes run.html next to the record's files, and replay still accepts the folder", () => {
    expect(page).toBe(path.join(fs.realpathSync(record), "run.html"));
    expect(fs.statSync(page).isFile()).toBe(true);
    expect(() => loadRecord(record)).not.toThrow();
  });

  it("shows the outcome, the turns with their tools and outputs, the refused host and the diff", async () => {
    const visit = await openPage(browser, page);
    try {
      const text = await visit.text();
      expect(text).toContain("✓ succeeded: structured result");
      expect(text).toMatch(/✓ integrity: all \d+ files match SHA256SUMS/);
      expect(text).toContain("✓ matches schema.json");
      expect(text).toContain('"summary": "README tidied, answer.js added"');
      for (const turn of ["Turn 1", "Turn 2", "Turn 3", "Turn 4"]) expect(text).toContain(turn);
      expect(text).toContain("bash");
      expect(text).toContain("sed -i 's/old line/new line/' README.md");
      expect(text).toContain("sandbox_run_final_result");
      // A short output is shown at once; the refusal is in the tool's output and in the decisions.
      expect(text).toContain("# demo\nold line");
      expect(text).toMatch(/example failed: /);
      expect(text).toMatch(/example\.com\t443\t0\t1\t/);
      expect(text).toContain("example.com is not in the policy's allowedDomains");
      // The diff, line by line.
      expect(text).toContain("-old line");
      expect(text).toContain("+new line");
      expect(text).toContain("src/answer.js");
      expect(text).toContain("+export const answer = 42;");
      // The timeline's rows.
      expect(text).toMatch(/phases\n/);
      expect(visit.problems).toEqual([]);
      expect(visit.dialogs).toEqual([]);
      expect(visit.requests).toEqual([visit.url]);
    } finally {
      await visit.close();
    }
  });

  it("long output is folded and opens and closes from the keyboard; the payload the tool printed stays text", async () => {
    const visit = await openPage(browser, page);
    try {
      expect(await visit.text()).not.toContain("\n250\n");
      const summary = visit.page.locator("details.tool-call > summary", { hasText: "seq 1 300" });
      await summary.focus();
      // The page draws a folded part when it opens (the toggle event comes after the key): poll.
      await visit.page.keyboard.press("Enter");
      await expect.poll(() => visit.text()).toContain("\n250\n");
      expect(await visit.text()).toContain(PAYLOAD);
      await visit.page.keyboard.press("Enter");
      await expect.poll(() => visit.text()).not.toContain("\n250\n");
      await visit.page.keyboard.press("Space");
      await expect.poll(() => visit.text()).toContain("\n250\n");
      await expandAll(visit.page);
      expect(await visit.page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
      expect(await visit.page.evaluate(() => document.querySelectorAll("img").length)).toBe(0);
      // The model traffic as the gateway relayed it: no credential, the scripted key nowhere.
      const text = await visit.text();
      expect(text).toContain("model exchange #1 POST");
      expect(text).not.toContain("sk-scripted-SECRET");
      expect(visit.problems).toEqual([]);
      expect(visit.dialogs).toEqual([]);
      expect(visit.requests).toEqual([visit.url]);
    } finally {
      await visit.close();
    }
  });

  it("a tampered copy gets the red banner naming the changed file", async () => {
    const copy = copyRecord(record, dir);
    fs.appendFileSync(path.join(copy, "changes.patch"), "+one more line nobody ran\n");
    const out = path.join(dir, "tampered.html");
    const shown = await runBuiltCli(["show", copy, "-o", out]);
    expect(shown.status).toBe(0);
    expect(shown.stderr).toContain("changes.patch does not match its sha256");
    const visit = await openPage(browser, out);
    try {
      const text = await visit.text();
      expect(text).toContain("This record does not match its SHA256SUMS.");
      expect(text).toContain("changes.patch does not match its sha256 in SHA256SUMS");
      expect(visit.problems).toEqual([]);
    } finally {
      await visit.close();
    }
  });

  it("--format md prints the summary for a CI log", async () => {
    const md = await runBuiltCli(["show", record, "--format", "md"]);
    expect(md.status).toBe(0);
    expect(md.stdout).toMatch(/^## sandbox-run `[0-9a-f]{12}` ✅ succeeded \(structured result\)/);
    expect(md.stdout).toContain("✓ matches schema.json");
    expect(md.stdout).toContain("⛔ `example.com:443` allowed 0, refused 1");
    expect(md.stdout).toContain("| `README.md` | modified | +1 | −1 |");
    expect(md.stdout).toContain("| `src/answer.js` | added | +1 | −0 |");
    // What the tool printed is there, inside code spans only (no Markdown renderer reads markup there).
    const lines = md.stdout.split("\n").filter((line) => line.includes("<img"));
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(line).toMatch(/`[^`]*<img[^`]*`/);
  });

  it("refuses to write the page inside the run's workspace", async () => {
    const shown = await runBuiltCli(["show", record, "-o", path.join(workspace, "run.html")]);
    expect(shown.status).toBe(2);
    expect(shown.stderr).toContain("which the sandbox held");
    expect(fs.existsSync(path.join(workspace, "run.html"))).toBe(false);
  });
});
