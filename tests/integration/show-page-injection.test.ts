// Hostile records in a real browser. Every byte of a record is written by code we do not trust
// (the model, the repository's own tools, whoever edited the folder), so records here carry
// script payloads in every place a record has text: the model's words, tool names, arguments and
// output, file names in the patch, host names the egress proxy judged, the gateway's refusals, the
// model traffic's headers and bodies, the result, the prompt, meta.json's keys, event types, and
// the names of files in the folder. The page opens from file:// in Chromium with every part
// unfolded, and: no dialog, no request but the page itself (a canary server on this host sees
// nothing), no console error (a blocked script or style would be one), no global the payloads
// set, no element of theirs in the page, and every payload readable as text.
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CliIo } from "../../src/cli/cli-io.js";
import { runCli } from "../../src/cli/program.js";
import { chromiumAvailable, expandAll, launchBrowser, openPage, type PageVisit } from "../support/browser.js";
import { event, tempDir, turnEvents, writeRecord } from "../support/show-records.js";

async function show(args: string[]) {
  let stdout = "";
  let stderr = "";
  const io: CliIo = {
    stdout: (t) => void (stdout += t),
    stderr: (t) => void (stderr += t),
    readStdin: async () => undefined,
    env: {},
    stderrIsTty: false,
  };
  const code = await runCli(["show", ...args], io);
  return { code, stdout, stderr };
}

describe.skipIf(!chromiumAvailable())(
  "hostile records: the page shows their payloads as text, and nothing runs",
  () => {
    let browser: Browser;
    let canary: http.Server;
    const canaryHits: string[] = [];
    let host = "";
    let payloads: string[] = [];
    let hostile = "";
    const BIDI = "access\u202e gnp.exe\u2066 zero\u200bwidth";
    const OSC52 = "\u001b]52;c;ZWNobyBwd25lZA==\u0007";
    const SEPARATORS = "line\u2028sep\u2029para";
    // A payload in variation selectors (one per byte), as a decoder in plain sight would run it.
    const SELECTORS = `eval(d("${[...Buffer.from("run me")].map((b) => String.fromCodePoint(0xe0100 + b - 16)).join("")}"))`;
    const dir = tempDir("sandbox-run-show-hostile-");

    beforeAll(async () => {
      canary = http.createServer((req, res) => {
        canaryHits.push(req.url ?? "");
        res.end("pwned");
      });
      await new Promise<void>((resolve) => canary.listen(0, "127.0.0.1", resolve));
      host = `http://127.0.0.1:${(canary.address() as AddressInfo).port}`;
      payloads = [
        `<img src="${host}/img" onerror="window.__pwned='img';alert('img')">`,
        `</script><script>window.__pwned='script';alert('script')</script>`,
        `javascript:window.__pwned='js';alert('js')`,
        `<a href="javascript:window.__pwned='a'">click me</a>`,
        `<svg onload="window.__pwned='svg'"><script>alert('svg')</script></svg>`,
        `</style><style>body{background:url(${host}/css)}</style>`,
        `<meta http-equiv="refresh" content="0;url=${host}/refresh">`,
        `<base href="${host}/base/">`,
        `{{constructor.constructor('window.__pwned="tpl"')()}} \${alert('tpl')} <%= 7*7 %>`,
        `<!-- <script>alert('comment')</script>`,
        `<iframe src="${host}/frame"></iframe><object data="${host}/obj"></object><link rel=stylesheet href="${host}/l.css">`,
        `"><img src=x onerror=alert('attr')>'`,
      ];
      hostile = payloads.join(" ");
      browser = await launchBrowser();
    });
    afterAll(async () => {
      await browser?.close();
      await new Promise((resolve) => canary?.close(resolve));
    });

    /** Every check of "nothing ran", after every part was opened. */
    async function expectNothingRan(visit: PageVisit): Promise<void> {
      await expandAll(visit.page);
      // Buttons that draw more (long texts, more turns) too.
      await visit.page.evaluate(() => {
        for (const button of document.querySelectorAll("button.more")) (button as HTMLButtonElement).click();
      });
      await expandAll(visit.page);
      await new Promise((resolve) => setTimeout(resolve, 300)); // a meta refresh or a late load would show by now
      expect(visit.dialogs).toEqual([]);
      expect(visit.problems).toEqual([]);
      expect(visit.requests).toEqual([visit.url]);
      expect(visit.popups).toBe(0);
      expect(canaryHits).toEqual([]);
      expect(visit.page.url()).toBe(visit.url);
      expect(await visit.page.evaluate(() => (window as unknown as { __pwned?: string }).__pwned)).toBeUndefined();
      // The page's own elements only: none of the payloads' tags exist anywhere in it.
      const census = await visit.page.evaluate(() => ({
        foreign: document.querySelectorAll(
          "img, svg, iframe, object, embed, a, base, form, link, input, body meta, body style, frame, video, audio",
        ).length,
        scripts: document.querySelectorAll("script").length,
        styles: document.querySelectorAll("style").length,
        metas: document.querySelectorAll("meta").length,
      }));
      expect(census).toEqual({ foreign: 0, scripts: 2, styles: 1, metas: 4 });
    }

    it("a record with payloads in every text field: all of them shown as text, nothing runs or loads", async () => {
      const record = path.join(dir, "hostile");
      const toolName = `<img src=x onerror="window.__pwned='tool'">`;
      const file = `src/<svg onload="window.__pwned='file'">.ts`;
      writeRecord(record, {
        prompt: `Fix it. ${hostile}`,
        meta: {
          ok: true,
          runId: "0123456789ab",
          model: `scripted/<script>alert('model')</script>`,
          [`<img src=x onerror="window.__pwned='metakey'">`]: hostile,
          changedFiles: { created: [file], modified: [], deleted: [] },
          usage: { input: 1, output: 2, totalTokens: 3, cost: 0 },
        },
        policy: {
          name: `<b>policy</b>`,
          network: "allowlist",
          runtime: "runc",
          secrets: { [`TOKEN<script>alert(1)</script>`]: { hosts: [`<img src=x onerror=alert('secret')>.example`] } },
        },
        schema: { type: "object", properties: { summary: { type: "string" } }, required: ["summary"] },
        result: { summary: `${hostile} ${BIDI} ${OSC52} ${SEPARATORS}` },
        patch: [
          `diff --git a/${file} b/${file}`,
          "new file mode 100644",
          "--- /dev/null",
          `+++ b/${file}`,
          "@@ -0,0 +1,4 @@",
          `+${payloads[1]}`,
          `+${BIDI}`,
          `+${SELECTORS}`,
          `+run:${"\u{e0141}".repeat(20)}:end`,
          "",
        ].join("\n"),
        events: [
          event(0, 1, "sandbox", "run.planned", { model: "scripted/m", runtime: "runc", policy: "x" }),
          event(1, 5, "sandbox", "container.created", {}),
          event(2, 9, "sandbox", "container.started", {}),
          ...turnEvents(
            { seq: 3, time: 20 },
            {
              text: `I will run this: ${hostile} ${BIDI} ${OSC52} ${SEPARATORS}`,
              tools: [
                {
                  id: "call_1",
                  name: "bash",
                  args: { command: hostile },
                  output: `${hostile}\n${OSC52}\n${"x\n".repeat(40)}`,
                },
                { id: "call_2", name: toolName, args: { path: hostile }, output: hostile, isError: true },
              ],
            },
          ),
          event(20, 200, "sandbox", "egress.denied", {
            host: `<img src=x onerror="window.__pwned='host'">.example`,
            port: 443,
            method: "CONNECT",
            reason: hostile,
          }),
          event(21, 201, "sandbox", "egress.denied", {
            host: "javascript:alert(1)",
            port: 80,
            method: "GET",
            reason: "not allowed",
            repeated: 2,
          }),
          event(22, 202, "sandbox", "egress.injected", {
            host: "api.example",
            port: 443,
            method: "POST",
            reason: "x",
            secret: `TOKEN<script>alert(1)</script>`,
          }),
          event(23, 203, "sandbox", "gateway.refused", {
            method: "POST",
            path: `/x/${hostile}`,
            status: 403,
            reason: "leaves-origin",
            refused: hostile,
          }),
          event(24, 204, "sandbox", `<img src=x onerror="window.__pwned='type'">`, { any: hostile }),
          event(25, 205, "sandbox", "policy.violation", {
            protectedPaths: [{ path: `.git/hooks/${payloads[0]}`, change: "modified", rule: hostile }],
            count: 1,
            restore: { reverted: [`.git/hooks/${payloads[0]}`], removed: [], modes: [], notRestored: [] },
          }),
          event(26, 206, "sandbox", "limit.tripped", { code: "limit", limit: "turns", message: hostile }),
          event(27, 300, "sandbox", "container.exited", { exitCode: 0 }),
          event(28, 310, "sandbox", "container.removed", {}),
        ],
        exchanges: [
          {
            seq: 1,
            routeId: "scripted",
            api: "openai-completions",
            path: `/scripted/${payloads[0]}`,
            status: 200,
            relay: "complete",
            startedMs: 10,
            durationMs: 5,
            reply: {
              text: hostile,
              toolCalls: [{ id: "c", name: toolName, argumentsJson: JSON.stringify({ x: hostile }) }],
              complete: true,
            },
            request: {
              method: "POST",
              target: `/scripted/${payloads[2]}`,
              headers: {
                [`x-${"<img src=x onerror=alert(9)>"}`]: hostile,
                authorization: "Bearer sk-should-never-show",
              },
              body: { text: JSON.stringify({ messages: [{ role: "user", content: hostile }] }) },
              bodyTruncated: false,
            },
            response: {
              status: 200,
              headers: { "content-type": `text/html; ${payloads[6]}` },
              chunks: [
                { atMs: 1, text: `data: ${hostile}\n\n` },
                { atMs: 2, base64: Buffer.from(`${payloads[4]}\xff`, "latin1").toString("base64") },
              ],
              bodyTruncated: false,
            },
          },
        ],
      });
      const page = path.join(dir, "hostile.html");
      const shown = await show([record, "-o", page]);
      expect(shown.code, shown.stderr).toBe(0);

      const visit = await openPage(browser, page);
      try {
        await expectNothingRan(visit);
        const text = await visit.text();
        for (const payload of payloads) expect(text).toContain(payload);
        expect(text).toContain(toolName);
        expect(text).toContain(`<img src=x onerror="window.__pwned='host'">.example`);
        expect(text).toContain("javascript:alert(1)");
        expect(text).toContain(`src/<svg onload="window.__pwned='file'">.ts`);
        expect(text).toContain(`<img src=x onerror="window.__pwned='type'">`);
        expect(text).toContain(`<img src=x onerror="window.__pwned='metakey'">`);
        // Hidden and reordering characters are drawn as their escapes.
        expect(text).toContain("access\\u202e gnp.exe\\u2066 zero\\u200bwidth");
        expect(text).toContain("\\x1b]52;c;ZWNobyBwd25lZA==\\x07");
        expect(text).toContain("line\\u2028sep\\u2029para");
        // Default-ignorable characters too; a long run shows its first eight and a count.
        expect(text).toContain('eval(d("\\u{e0162}\\u{e0165}\\u{e015e}\\u{e0110}\\u{e015d}\\u{e0155}"))');
        expect(text).toContain(`run:${"\\u{e0141}".repeat(8)}…+12:end`);
        // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
        expect(text).not.toMatch(/[\u202e\u2066\u200b\u2028\u2029\u001b\u0007]/);
        // A credential header a (hand-made) record holds is named, never shown.
        expect(text).toContain("headers not shown (they look like credentials): authorization");
        expect(text).not.toContain("sk-should-never-show");
      } finally {
        await visit.close();
      }
    });

    it("a tampered record whose file names are payloads: the red banner names them as text", async () => {
      const record = writeRecord(path.join(dir, "tampered"), { events: [event(0, 1, "sandbox", "run.planned", {})] });
      fs.writeFileSync(path.join(record, `<img src=x onerror="window.__pwned='name'">`), hostile);
      fs.appendFileSync(
        path.join(record, "events.jsonl"),
        `${JSON.stringify(event(1, 2, "sandbox", "container.created", {}))}\n`,
      );
      const page = path.join(dir, "tampered.html");
      const shown = await show([record, "-o", page]);
      expect(shown.code).toBe(0);
      expect(shown.stderr).toContain("warning: the record does not match its SHA256SUMS");
      const visit = await openPage(browser, page);
      try {
        await expectNothingRan(visit);
        const text = await visit.text();
        expect(text).toContain("This record does not match its SHA256SUMS.");
        expect(text).toContain(`<img src=x onerror="window.__pwned='name'"> is not listed in SHA256SUMS`);
        expect(text).toContain("events.jsonl does not match its sha256 in SHA256SUMS");
        const banner = await visit.page.evaluate(() => {
          const element = document.querySelector(".banner.tampered");
          return element ? getComputedStyle(element).borderTopColor : "";
        });
        expect(banner).toMatch(/^rgb\((2\d\d|1\d\d), \d{1,2}, \d{1,2}\)$/); // red
      } finally {
        await visit.close();
      }
    });

    it("the page's own policy holds: an inline script, a style attribute, a fetch and an image added later are all refused", async () => {
      const record = writeRecord(path.join(dir, "plain"), {});
      const page = path.join(dir, "plain.html");
      expect((await show([record, "-o", page])).code).toBe(0);
      const visit = await openPage(browser, page);
      try {
        expect(visit.problems).toEqual([]);
        const probe = await visit.page.evaluate(async (target) => {
          const refused: string[] = [];
          document.addEventListener("securitypolicyviolation", (e) => refused.push(e.effectiveDirective));
          const script = document.createElement("script");
          script.textContent = "window.__pwned = 'inline'";
          document.body.append(script);
          const styled = document.createElement("div");
          styled.setAttribute("style", "width: 123px");
          document.body.append(styled);
          const image = document.createElement("img");
          image.src = `${target}/probe.png`;
          document.body.append(image);
          let fetched = "refused";
          try {
            await fetch(`${target}/fetch`);
            fetched = "fetched";
          } catch {}
          await new Promise((resolve) => setTimeout(resolve, 200));
          return {
            inline: (window as unknown as { __pwned?: string }).__pwned ?? "none",
            width: styled.getBoundingClientRect().width === 123,
            fetched,
            refused: [...new Set(refused)].sort(),
          };
        }, host);
        // Each was refused by the page's Content-Security-Policy itself (not only by this test's
        // network guard, which would also fail the fetch).
        expect(probe).toEqual({
          inline: "none",
          width: false,
          fetched: "refused",
          refused: ["connect-src", "img-src", "script-src-elem", "style-src-attr"],
        });
        expect(canaryHits).toEqual([]);
      } finally {
        await visit.close();
      }
    });
  },
);
