// A record of 50 MB makes a page of bounded size that still draws: the first turns at once, more
// on request, folded parts built when opened, and what the page's cap left out marked where it was
// cut and said at the top. (How long it takes is measured by bench/show-page.ts, not asserted.)
import fs from "node:fs";
import path from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CliIo } from "../../src/cli/cli-io.js";
import { runCli } from "../../src/cli/program.js";
import { chromiumAvailable, launchBrowser, openPage } from "../support/browser.js";
import { tempDir, writeLargeRecord } from "../support/show-records.js";

/** The page's pools (16 MiB of text, 1.5 MiB of previews, 4 MiB of bodies, 2 MiB of outline, 256 KiB of header) and its frame. */
const PAGE_MAX_BYTES = 24 * 1024 * 1024;

describe.skipIf(!chromiumAvailable())("show: a 50 MB record", () => {
  let browser: Browser;
  const dir = tempDir("sandbox-run-show-large-");

  beforeAll(async () => {
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("makes a page under the cap that draws the first turns, more on request, and says what it cut", async () => {
    const record = writeLargeRecord(path.join(dir, "record"), 50);
    expect(record.bytes).toBeGreaterThan(50 * 1000 * 1000);
    const page = path.join(dir, "large.html");
    let stderr = "";
    const io: CliIo = {
      stdout: () => {},
      stderr: (t) => void (stderr += t),
      readStdin: async () => undefined,
      env: {},
      stderrIsTty: false,
    };
    expect(await runCli(["show", record.dir, "-o", page], io), stderr).toBe(0);
    const size = fs.statSync(page).size;
    expect(size).toBeLessThan(PAGE_MAX_BYTES);
    expect(size).toBeGreaterThan(4 * 1024 * 1024); // it holds real content, not an empty frame

    const visit = await openPage(browser, page);
    try {
      let text = await visit.text();
      expect(text).toContain(`Turns (${record.turns})`);
      expect(text).toContain("Turn 50");
      expect(text).not.toContain("Turn 51\n");
      expect(text).toMatch(/This page holds at most 16\.0 MiB of the record's text: \d+ texts are cut short/);
      expect(text).toMatch(/The model traffic's bodies take at most 4\.0 MiB of this page/);
      expect(await visit.page.locator("details[open]").count()).toBeLessThan(60);

      await visit.page.getByRole("button", { name: /show 50 more turns/ }).click();
      text = await visit.text();
      expect(text).toContain("Turn 100");
      // A late turn, past the budget: its output was cut, and the cut is marked.
      const more = visit.page.getByRole("button", { name: /more turns/ });
      while (await more.isVisible()) await more.click();
      expect(await visit.page.locator("article.turn").count()).toBe(record.turns);
      const last = visit.page.locator("article.turn").last();
      await last.locator("details.tool-call > summary").click();
      // The folded part is built on its toggle event, a task queued after the click (CI, session 44).
      await expect
        // biome-ignore lint/performance/useDomNodeTextContent: what is visible is the point
        .poll(() => last.innerText())
        .toMatch(/more characters? not on this page \(events\.jsonl holds them\)/);
      expect(visit.problems).toEqual([]);
      expect(visit.requests).toEqual([visit.url]);
    } finally {
      await visit.close();
    }
  });
});
