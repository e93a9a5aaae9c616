// `sandbox-run show` as a library operation: a run record (hostile input, read through
// show/record-reader.ts) as one self-contained page or a Markdown summary, written where asked
// (never inside a tree the recorded run's sandbox held) or handed back as text. A record that fails
// its checksum check is still shown; `integrity` says so.
import path from "node:path";
import { RECORD_PAGE } from "../record/record-format.js";
import { buildRunView } from "../show/build-run-view.js";
import { markdownSummary } from "../show/markdown-summary.js";
import { renderPage } from "../show/page-html.js";
import type { RunView } from "../show/run-view.js";
import { writeOutput } from "../show/write-output.js";
import { sandboxRunVersion } from "../util/package-version.js";

export interface ShowRecordOptions {
  /** html (default): the page; md: a Markdown summary. */
  format?: "html" | "md";
  /**
   * Where to write it: a file path, or "-" to only return it. Default: run.html in the record's
   * folder for the page, "-" for the summary.
   */
  output?: string;
}

export interface ShownRecord {
  /** Whether the record's files match its SHA256SUMS ("ok"), do not ("mismatch"), or could not be checked. */
  integrity: RunView["integrity"];
  /** The page or the summary. */
  content: string;
  /** The file it was written to, unless the output was "-". */
  written?: string;
  /** Set when the record is of a newer format than this version reads: what to say about the page. */
  newerFormat?: string;
}

export async function showRecord(recordDir: string, options: ShowRecordOptions = {}): Promise<ShownRecord> {
  const format = options.format ?? "html";
  const { view, heldTrees } = await buildRunView(recordDir, {
    madeBy: `sandbox-run ${sandboxRunVersion()}`,
    shownAs: recordDir,
  });
  const content = format === "md" ? markdownSummary(view) : renderPage(view);
  const target = options.output ?? (format === "md" ? "-" : path.join(recordDir, RECORD_PAGE));
  const newer = view.newerFormat ? { newerFormat: view.newerFormat } : {};
  if (target === "-") return { integrity: view.integrity, content, ...newer };
  const written = writeOutput(target, content, heldTrees, `The default is ${RECORD_PAGE} in the record's folder.`);
  return { integrity: view.integrity, content, written, ...newer };
}
