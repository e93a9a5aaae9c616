// `node --import tsx bench/show-page.ts [--mb=50] [--runs=3]`: what `sandbox-run show` costs on a
// large record, and whether its page stays responsive. Makes a record of about --mb MB (many turns,
// each with a long tool output and its model traffic), then per run: the built CLI's `show` (read,
// hash, reduce, write; wall time and peak RSS of the process), the page's size, and in Chromium
// (tests/support/browser.ts) the time from navigation to the drawn page, the time to open every
// tool call of the first page of turns, and the page's JS heap. Needs `npm run build` and Chromium.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { launchBrowser, openPage } from "../tests/support/browser.js";
import { tempDir, writeLargeRecord } from "../tests/support/show-records.js";
import { round, table } from "./stats.js";

const args = process.argv.slice(2);
const option = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.split("=")[1];
const MB = Number(option("mb") ?? 50);
const RUNS = Math.max(1, Number(option("runs") ?? 3));
const cli = fileURLToPath(new URL("../dist/cli/main.js", import.meta.url));
/** Loaded before the CLI: its peak RSS (KiB), printed to stderr when it exits. */
const REPORT_RSS = `data:text/javascript,${encodeURIComponent('process.on("exit", () => process.stderr.write(`maxrss ${process.resourceUsage().maxRSS}\\n`));')}`;

const dir = tempDir("sandbox-run-bench-show-");
const record = writeLargeRecord(path.join(dir, "record"), MB);
process.stderr.write(`record: ${(record.bytes / 1024 / 1024).toFixed(1)} MB, ${record.turns} turns\n`);
const browser = await launchBrowser();
const rows: Array<Record<string, number>> = [];
try {
  for (let run = 1; run <= RUNS; run++) {
    const started = performance.now();
    const shown = spawnSync(process.execPath, ["--import", REPORT_RSS, cli, "show", record.dir], { encoding: "utf8" });
    const showMs = performance.now() - started;
    if (shown.status !== 0) throw new Error(`show failed: ${shown.stderr}`);
    const rssMb = Number(/maxrss (\d+)/.exec(shown.stderr)?.[1] ?? 0) / 1024;
    const page = shown.stdout.trim();
    const visit = await openPage(browser, page);
    const drawn = await visit.page.evaluate(() => performance.now());
    const drawnMs = await visit.page.evaluate(() => {
      const entry = performance.getEntriesByType("navigation")[0] as PerformanceNavigationTiming;
      return entry.loadEventEnd;
    });
    const openMs = await visit.page.evaluate(() => {
      const t = performance.now();
      for (const details of document.querySelectorAll("details.tool-call")) (details as HTMLDetailsElement).open = true;
      return new Promise<number>((resolve) => setTimeout(() => resolve(performance.now() - t), 0));
    });
    const heapMb = await visit.page.evaluate(
      () =>
        ((performance as unknown as { memory?: { usedJSHeapSize: number } }).memory?.usedJSHeapSize ?? 0) / 1024 / 1024,
    );
    if (visit.problems.length > 0) throw new Error(`the page logged: ${visit.problems.join("; ")}`);
    await visit.close();
    rows.push({
      run,
      showMs: round(showMs),
      showRssMb: round(rssMb),
      pageMb: round(fs.statSync(page).size / 1024 / 1024, 2),
      loadMs: round(drawnMs),
      sinceNavigationMs: round(drawn),
      openFirstTurnsMs: round(openMs),
      heapMb: round(heapMb),
    });
  }
} finally {
  await browser.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
process.stdout.write(
  `${table(
    [
      "run",
      "show (ms)",
      "show peak RSS (MB)",
      "page (MB)",
      "page load (ms)",
      "open 50 tool calls (ms)",
      "JS heap (MB)",
    ],
    rows.map((r) => [r.run, r.showMs, r.showRssMb, r.pageMb, r.loadMs, r.openFirstTurnsMs, r.heapMb].map(String)),
  )}\n`,
);
