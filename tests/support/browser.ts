// A real browser for the page tests: Debian's Chromium (scripts/setup-host.sh and .ci/run install
// it) driven by playwright-core, with no browser download. Each page is opened from file:// in a
// fresh context that records what a person would not see: every request the page makes, every
// console message of level error or warning (a blocked script or style is one), every uncaught
// error, every dialog and every new window. Requests other than the page itself are also aborted,
// so a test that fails still sends nothing anywhere.
import fs from "node:fs";
import { pathToFileURL } from "node:url";
import { type Browser, chromium, type Page } from "playwright-core";

export const CHROMIUM = process.env.SANDBOX_RUN_CHROMIUM ?? "/usr/bin/chromium";

/** Chromium is installed; on CI its absence is a failure, never a skip. */
export function chromiumAvailable(): boolean {
  const present = fs.existsSync(CHROMIUM);
  if (!present && process.env.CI)
    throw new Error(`The page tests need Chromium at ${CHROMIUM} on CI (scripts/setup-host.sh installs it)`);
  return present;
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // Root on CI needs --no-sandbox; the rest keep Chromium from calling home on a closed network.
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

export interface PageVisit {
  page: Page;
  url: string;
  /** Every request the page made, the page itself included. */
  requests: string[];
  /** Console errors and warnings, uncaught errors. */
  problems: string[];
  dialogs: string[];
  popups: number;
  /** What a person sees: document.body.innerText. */
  text(): Promise<string>;
  close(): Promise<void>;
}

export async function openPage(browser: Browser, file: string): Promise<PageVisit> {
  const context = await browser.newContext();
  const url = pathToFileURL(file).href;
  const visit = {
    url,
    requests: [] as string[],
    problems: [] as string[],
    dialogs: [] as string[],
    popups: 0,
  };
  context.on("request", (request) => void visit.requests.push(request.url()));
  context.on("page", () => void visit.popups++);
  await context.route(
    () => true,
    (route) => (route.request().url() === url ? route.continue() : route.abort()),
  );
  const page = await context.newPage();
  visit.popups = 0;
  page.on("console", (message) => {
    if (message.type() === "error" || message.type() === "warning")
      visit.problems.push(`console ${message.type()}: ${message.text()}`);
  });
  page.on("pageerror", (error) => void visit.problems.push(`page error: ${error.message}`));
  page.on("dialog", (dialog) => {
    visit.dialogs.push(`${dialog.type()}: ${dialog.message()}`);
    void dialog.dismiss();
  });
  await page.goto(url, { waitUntil: "load" });
  return {
    ...visit,
    page,
    get requests() {
      return visit.requests;
    },
    get popups() {
      return visit.popups;
    },
    // innerText, not textContent: what is rendered and visible, as a person reads it.
    // biome-ignore lint/performance/useDomNodeTextContent: innerText is the point
    text: () => page.evaluate(() => document.body.innerText),
    close: () => context.close(),
  };
}

/** Opens every folded part, again and again (parts inside parts), until none is closed. */
export async function expandAll(page: Page): Promise<void> {
  for (let round = 0; round < 10; round++) {
    const opened = await page.evaluate(() => {
      const closed = [...document.querySelectorAll("details:not([open])")];
      for (const details of closed) (details as HTMLDetailsElement).open = true;
      return closed.length;
    });
    if (opened === 0) return;
    // toggle events are queued: let them run.
    await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 0)));
  }
}
