// `sandbox-run show --format md`: the run in a few screens of Markdown, for a CI log, a GitHub job
// summary or a pull-request comment. Markdown renderers turn text into HTML, links and images, so
// nothing from the record is ever written as Markdown text: a short value goes into a code span
// (its backtick fence longer than any run of backticks in it, line breaks shown as ⏎, and `|`
// escaped inside tables), a long one into a fenced code block (fence longer than any inside).
// Renderers never read markup, links or autolinks inside code. Characters that hide or reorder
// text are written as escapes (visible-chars.ts), which also keeps a terminal safe when the
// summary is printed to one, and so are CI runners' log commands (`##[…]` anywhere, `::…` at a
// block line's start: util/runner-commands.ts): the README offers the summary for CI logs, and a
// `run:` step printing it gave the record's text the job's `::add-mask::` and `::stop-commands::`
// (red-team review, round 3, session 41). The whole summary stays under MAX_CHARS: a pull-request
// comment's limit.
import { escapeHashCommands, escapeLineCommands } from "../util/runner-commands.js";
import type { RunView, Shown } from "./run-view.js";
import { cut } from "./text-budget.js";
import { visibleText } from "./visible-chars.js";

export const MAX_CHARS = 60_000;
const INLINE_MAX = 160;
const BLOCK_MAX = 4_000;
const MAX_TURNS = 40;
const MAX_ROWS = 50;

/** A code span; `inTable` also escapes `|`, which GFM reads as a cell border even inside code. */
export function code(value: string, inTable = false, max = INLINE_MAX): string {
  let text = escapeHashCommands(visibleText(value)).replace(/\n/g, "⏎");
  if (text.length > max) text = `${cut(text, max)}…`;
  if (inTable) text = text.replace(/\|/g, "\\|");
  if (text === "") return "` `";
  const longest = Math.max(0, ...(text.match(/`+/g) ?? []).map((run) => run.length));
  const fence = "`".repeat(longest + 1);
  const pad = text.startsWith("`") || text.endsWith("`") || (text.startsWith(" ") && text.endsWith(" ")) ? " " : "";
  return `${fence}${pad}${text}${pad}${fence}`;
}

/** A fenced code block holding `value` as text. */
export function fenced(value: string, max = BLOCK_MAX): string {
  let text = escapeLineCommands(escapeHashCommands(visibleText(value)));
  if (text.length > max) text = `${cut(text, max)}\n… (${text.length - max} more characters on the page)`;
  const longest = Math.max(0, ...(text.match(/`+/g) ?? []).map((run) => run.length));
  const fence = "`".repeat(Math.max(3, longest + 1));
  return `${fence}text\n${text}\n${fence}`;
}

const shownText = (shown: Shown) =>
  shown.text + (shown.omitted ? `\n… (${shown.omitted} more characters in the record)` : "");

export function markdownSummary(view: RunView): string {
  const blocks: string[] = [];
  const o = view.outcome;
  const runFact = view.facts.find((f) => f.label === "run");
  const title =
    o.state === "ok"
      ? `✅ succeeded (${view.result?.kind === "text" ? "text result" : "structured result"})`
      : o.state === "failed"
        ? `❌ failed: ${code(o.error?.code ?? "unknown")}`
        : "❔ outcome unknown";
  blocks.push(`## sandbox-run ${runFact ? code(runFact.value) : ""} ${title}`.replace(/ {2,}/g, " "));
  if (view.integrity.state === "mismatch") {
    blocks.push(
      `> ⚠️ **This record does not match its SHA256SUMS**: it was changed after the run wrote it, or damaged. Read it as untrusted.\n${view.integrity.problems
        .slice(0, 10)
        .map((p) => `> - ${code(p)}`)
        .join("\n")}`,
    );
  } else if (view.integrity.state === "unchecked") {
    blocks.push("> ⚠️ This record has no usable SHA256SUMS: it cannot be checked.");
  } else blocks.push(`Integrity: all ${view.integrity.matched} files match SHA256SUMS.`);
  if (view.newerFormat) blocks.push(`> ⚠️ ${code(view.newerFormat, false, 1000)}`);

  if (o.state === "failed" && o.error) {
    blocks.push(
      `**Error**${o.error.limit ? ` (limit ${code(o.error.limit)})` : ""}:\n\n${fenced(shownText(o.error.message))}`,
    );
    if (o.error.hint) blocks.push(`**What to do:**\n\n${fenced(shownText(o.error.hint))}`);
  }

  const rows = view.facts
    .filter((f) => f !== runFact)
    .map((f) => `| ${f.label} | ${code(f.value, true)}${f.note ? ` ${code(f.note, true)}` : ""} |`);
  blocks.push(["| | |", "|---|---|", ...rows].join("\n"));

  if (view.result) {
    const check = view.result.check;
    const verdict =
      check.state === "valid"
        ? "✓ matches schema.json"
        : check.state === "invalid"
          ? `✗ does not match schema.json: ${code(check.detail ?? "", false, 400)}`
          : check.state === "no-schema"
            ? "no schema"
            : `schema not checked: ${code(check.detail ?? "", false, 400)}`;
    blocks.push(`### Result\n\n${verdict}\n\n${fenced(shownText(view.result.value))}`);
  }

  blocks.push(turnsBlock(view));
  blocks.push(decisionsBlock(view));
  blocks.push(changesBlock(view));
  const notes = [...view.recordNotes, ...view.pageNotes];
  if (notes.length > 0)
    blocks.push(
      `### Notes\n\n${notes
        .slice(0, 20)
        .map((n) => `- ${code(n, false, 300)}`)
        .join("\n")}`,
    );
  blocks.push(
    `_Made by ${code(view.madeBy)}. The whole run, turn by turn: \`sandbox-run show <record>\` writes run.html._`,
  );
  return joinWithin(blocks, MAX_CHARS);
}

function turnsBlock(view: RunView): string {
  const lines = [`### Turns (${view.turns.length})`, ""];
  for (const turn of view.turns.slice(0, MAX_TURNS)) {
    const parts: string[] = [];
    if (turn.text) parts.push(`says ${code(turn.text.text, false, 120)}`);
    for (const tool of turn.tools.slice(0, 10)) {
      const state = tool.isError ? " ✗" : "";
      parts.push(`${tool.final ? "final result" : code(tool.name)} ${code(tool.summary, false, 100)}${state}`);
    }
    if (turn.tools.length > 10) parts.push(`and ${turn.tools.length - 10} more tool calls`);
    if (turn.error) parts.push(`model error ${code(turn.error.text, false, 200)}`);
    lines.push(`${turn.index}. ${parts.length > 0 ? parts.join("; ") : "(nothing recorded)"}`);
  }
  if (view.turns.length > MAX_TURNS)
    lines.push("", `… and ${view.turns.length - MAX_TURNS} more turns (see the page).`);
  return lines.join("\n");
}

function decisionsBlock(view: RunView): string {
  const d = view.decisions;
  const lines = ["### Decisions", ""];
  lines.push(`- model gateway: ${d.gateway.requests} requests relayed, ${d.gateway.refused} refused`);
  for (const r of d.refusals.slice(0, MAX_ROWS)) {
    lines.push(`  - refused ${code(r.reason)} ${code(`${r.method} ${r.path}`)} ×${r.count}`);
  }
  if (d.egress.length === 0) lines.push("- network: no connection through the egress proxy");
  for (const e of d.egress.slice(0, MAX_ROWS)) {
    const counts = [`allowed ${e.allowed}`, `refused ${e.denied}`, ...(e.failed ? [`failed ${e.failed}`] : [])].join(
      ", ",
    );
    lines.push(
      `- ${e.denied > 0 ? "⛔" : "🌐"} ${code(`${e.host}:${e.port}`)} ${counts}${e.reasons.length ? ` ${code(e.reasons.join("; "))}` : ""}`,
    );
  }
  for (const s of d.secrets.slice(0, MAX_ROWS)) {
    lines.push(
      `- secret ${code(s.name)} for ${s.hosts.map((h) => code(h)).join(", ") || "(no host)"}: put into ${s.injected} requests`,
    );
  }
  if (d.violationCount > 0) {
    lines.push(`- ⛔ ${d.violationCount} protected paths changed (the run failed):`);
    for (const v of d.violations.slice(0, MAX_ROWS))
      lines.push(`  - ${code(v.path)} ${v.change ? code(v.change) : ""}`);
    if (d.restore) {
      const restored = d.restore.reverted.length + d.restore.removed.length + d.restore.modes.length;
      const left = d.restore.notRestored.length + d.restore.remaining.length;
      lines.push(`  - restored: ${restored}; not restored: ${left}`);
      for (const n of [...d.restore.notRestored, ...d.restore.remaining].slice(0, MAX_ROWS))
        lines.push(`    - NOT restored: ${code(n)}`);
    }
  } else lines.push("- workspace: no protected path changed");
  for (const l of d.limits.slice(0, MAX_ROWS))
    lines.push(`- ⏱ stopped by ${code(l.code)}${l.limit ? ` (${code(l.limit)})` : ""}: ${code(l.message, false, 300)}`);
  for (const c of d.contradictions.slice(0, 10)) lines.push(`- ⛔ contradiction: ${code(c, false, 300)}`);
  for (const h of d.handBack.slice(0, 10)) lines.push(`- ${code(h, false, 300)}`);
  // Host-run files and links, a stale image, an untrusted config: what the CLI warns of on stderr.
  for (const w of d.warnings.slice(0, 10)) lines.push(`- ⚠️ ${code(w, false, 1_000)}`);
  return lines.join("\n");
}

function changesBlock(view: RunView): string {
  const c = view.changes;
  const left = leftOutBlock(c.notes);
  if (c.files.length === 0 && c.changedFiles) {
    // No patch of the changes (hand-back branch: the checkout did not change, the branch holds
    // them), but the run's own list of what it changed.
    const f = c.changedFiles;
    const listed = [
      ...f.created.map((name) => ({ name, status: "added" })),
      ...f.modified.map((name) => ({ name, status: "modified" })),
      ...f.deleted.map((name) => ({ name, status: "deleted" })),
    ];
    const total = f.counts.created + f.counts.modified + f.counts.deleted;
    if (total > 0) {
      const rows = listed.slice(0, MAX_ROWS).map((f) => `| ${code(f.name, true)} | ${f.status} |`);
      return [
        `### Changed files (${total})`,
        "",
        "Not in the record's patch (with hand-back branch, the branch holds them): the run's own list.",
        "",
        "| file | change |",
        "|---|---|",
        ...rows,
        ...(total > rows.length ? ["", `… and ${total - rows.length} more files.`] : []),
        ...left,
      ].join("\n");
    }
  }
  if (c.missing) return "### Changed files\n\nThe record has no changes.patch.";
  if (c.totalFiles === 0)
    return [
      "### Changed files",
      "",
      left.length > 0 ? "The patch holds no change." : "The workspace did not change.",
      ...left,
    ].join("\n");
  const rows = c.files
    .slice(0, MAX_ROWS)
    .map((f) => `| ${code(f.name, true)} | ${f.status} | +${f.added} | −${f.removed} |`);
  const more = c.totalFiles - rows.length;
  return [
    `### Changed files (${c.totalFiles})`,
    "",
    "| file | change | added | removed |",
    "|---|---|---|---|",
    ...rows,
    ...(more > 0 ? ["", `… and ${more} more files (the page and changes.patch have them).`] : []),
    ...left,
  ].join("\n");
}

/** changes-notes.txt: what the patch left out (a file over its cap, a FIFO), which no row shows. */
function leftOutBlock(notes: Shown | undefined): string[] {
  if (!notes || notes.text.trim() === "") return [];
  const lines = notes.text.split("\n").filter((l) => l.trim() !== "");
  const shown = lines.slice(0, 10).map((l) => `- ${code(l, false, 300)}`);
  const more = lines.length - shown.length;
  return [
    "",
    "**Not in the patch** (changes-notes.txt; these files may have changed):",
    "",
    ...shown,
    ...(more > 0 || notes.omitted ? [`- … and more (the record's changes-notes.txt)`] : []),
  ];
}

/** Whole blocks, in order, while they fit: a cut never leaves a code fence open. */
function joinWithin(blocks: string[], max: number): string {
  const kept: string[] = [];
  let size = 0;
  const marker = "_(The summary is cut here to stay short; the page has everything.)_";
  for (const [i, block] of blocks.entries()) {
    const last = i === blocks.length - 1;
    if (size + block.length + 2 > max - (last ? 0 : marker.length + 2)) {
      kept.push(marker);
      break;
    }
    kept.push(block);
    size += block.length + 2;
  }
  return `${kept.join("\n\n")}\n`;
}
