// The page's own script: it reads the run's data from the page (a JSON script element) and draws
// it. Everything it draws came from a record, and a record is hostile: text only ever reaches the
// page through text nodes (createTextNode / textContent), never innerHTML, never an attribute that
// a browser acts on (no href, no src, no style attribute: positions are set through the CSSOM,
// which the page's Content-Security-Policy allows). Characters that hide or reorder text are drawn
// as visible escapes. Folded parts (tool output, model traffic, diffs) are built the first time
// they are opened, so a large record draws quickly.
//
// `pageScript()` is written into the page as the source of `pageMain`: the function must be
// self-contained (no imports, no module-level names). Node has no DOM types here, so the few DOM
// members it uses are declared below, for this file only.
import type { ExchangeView, Fact, RunView, Shown, TimelineView, ToolView, TurnView } from "./run-view.js";

interface DomEvent {
  key?: string;
  preventDefault(): void;
}
interface DomNode {
  textContent: string | null;
}
interface DomElement extends DomNode {
  className: string;
  id: string;
  hidden: boolean;
  open: boolean;
  tabIndex: number;
  style: Record<string, string>;
  append(...nodes: Array<DomNode | string>): void;
  replaceChildren(...nodes: Array<DomNode | string>): void;
  setAttribute(name: string, value: string): void;
  addEventListener(type: string, listener: (event: DomEvent) => void): void;
  remove(): void;
  scrollIntoView(options?: unknown): void;
}
declare const document: {
  createElement(tag: string): DomElement;
  createTextNode(text: string): DomNode;
  getElementById(id: string): DomElement | null;
  body: DomElement;
  title: string;
};

/** The page's script, as it is written into the page. */
export function pageScript(): string {
  // A bundler's helpers (esbuild's __name, when tests load this file from source) are not in the page.
  return `"use strict";\nvar __name = function (target) { return target; };\n(${pageMain.toString()})();\n`;
}

function pageMain(): void {
  const INVISIBLE =
    // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
    /(?![\u200c\u200d])[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\ufff9-\ufffb\p{Default_Ignorable_Code_Point}]|(?<![^\u0000-\u007f\u200c\u200d])[\u200c\u200d]|[\u200c\u200d](?![^\u0000-\u007f\u200c\u200d])/gu;
  /** A run of invisible characters longer than this shows its first few and a count, not a badge each. */
  const INVISIBLE_RUN_SHOWN = 8;
  const TURNS_PER_PAGE = 50;
  const PREVIEW_CHARS = 3000;
  const SMALL_CHARS = 600;
  const SMALL_LINES = 12;
  const OPEN_DIFF_CHARS = 20_000;
  const OPEN_DIFF_FILES = 10;

  type Child = DomNode | string | undefined | false;

  /** An element with a class and children; strings become text nodes (never markup). */
  function el(tag: string, className?: string, ...children: Child[]): DomElement {
    const node = document.createElement(tag);
    if (className) node.className = className;
    for (const child of children) {
      if (child === undefined || child === false) continue;
      node.append(typeof child === "string" ? visible(child) : child);
    }
    return node;
  }

  /** Text as nodes: hidden and reordering characters drawn as escapes in a badge. */
  function visible(text: string): DomElement {
    const out = document.createElement("span");
    const source = text.replace(/\r\n/g, "\n");
    let last = 0;
    let run = 0; // invisible characters in a row so far
    INVISIBLE.lastIndex = 0;
    for (let match = INVISIBLE.exec(source); match; match = INVISIBLE.exec(source)) {
      if (match.index > last) {
        out.append(document.createTextNode(source.slice(last, match.index)));
        run = 0;
      }
      last = match.index + match[0].length;
      if (++run > INVISIBLE_RUN_SHOWN) {
        // The rest of the run: one badge with its length (a payload in variation selectors can be
        // thousands of characters long).
        let more = 1;
        for (let next = INVISIBLE.exec(source); next && next.index === last; next = INVISIBLE.exec(source)) {
          more++;
          last = next.index + next[0].length;
        }
        INVISIBLE.lastIndex = last;
        out.append(badge(`…+${more}`, `${more} more invisible characters from the record`));
        continue;
      }
      const code = match[0].codePointAt(0)!;
      const hex = code.toString(16);
      const shownAs =
        code > 0xffff ? `\\u{${hex}}` : code <= 0xff ? `\\x${hex.padStart(2, "0")}` : `\\u${hex.padStart(4, "0")}`;
      out.append(badge(shownAs, `invisible character U+${hex.toUpperCase().padStart(4, "0")} from the record`));
    }
    if (last < source.length) out.append(document.createTextNode(source.slice(last)));
    return out;
  }

  function badge(text: string, title: string): DomElement {
    const node = document.createElement("span");
    node.className = "cc";
    node.textContent = text;
    node.setAttribute("title", title);
    return node;
  }

  function plural(n: number, word: string): string {
    return `${n.toLocaleString("en")} ${word}${n === 1 ? "" : "s"}`;
  }

  function ms(value: number): string {
    return value < 1000 ? `${Math.round(value)} ms` : `${(value / 1000).toFixed(value < 10_000 ? 2 : 1)} s`;
  }

  function cutMark(shown: Shown, where: string): DomElement | undefined {
    if (!shown.omitted) return undefined;
    return el("div", "cut", `… ${plural(shown.omitted, "more character")} not on this page (${where} holds them)`);
  }

  /** A block of record text, with the mark of what was cut. */
  function block(shown: Shown, where: string, className = "text"): DomElement {
    return el("div", "", el("pre", className, shown.text), cutMark(shown, where));
  }

  /** A long text: the first part shown, the rest one click away. */
  function previewBlock(shown: Shown, where: string): DomElement {
    if (shown.text.length <= PREVIEW_CHARS) return block(shown, where);
    const pre = el("pre", "text", shown.text.slice(0, PREVIEW_CHARS));
    const more = el("button", "more", `show all ${plural(shown.text.length, "character")}`);
    more.addEventListener("click", () => {
      pre.replaceChildren(visible(shown.text));
      more.remove();
    });
    return el("div", "", pre, more, cutMark(shown, where));
  }

  /**
   * A folded part: built the first time it is opened (`open`: opened at once, for small parts).
   * Keyboard: Enter or Space on its summary.
   */
  function fold(summary: Child[], build: () => DomElement, className = "", open = false): DomElement {
    const details = el("details", className, el("summary", "", ...summary));
    let built = false;
    const ensureBuilt = () => {
      if (!details.open || built) return;
      built = true;
      details.append(el("div", "body", build()));
    };
    details.addEventListener("toggle", ensureBuilt);
    if (open) {
      details.open = true;
      ensureBuilt();
    }
    return details;
  }

  /** Small enough to show without a click: a few short lines. */
  function small(...texts: Array<Shown | undefined>): boolean {
    let chars = 0;
    let lines = 0;
    for (const t of texts) {
      if (!t) continue;
      if (t.omitted) return false;
      chars += t.text.length;
      lines += t.text.split("\n").length;
    }
    return chars <= SMALL_CHARS && lines <= SMALL_LINES;
  }

  function section(id: string, title: string, ...children: Child[]): DomElement {
    const node = el("section", "", el("h2", "", title), ...children);
    node.id = id;
    return node;
  }

  function table(head: string[], rows: Child[][]): DomElement {
    const t = el("table", "", el("thead", "", el("tr", "", ...head.map((h) => el("th", "", h)))));
    const body = el("tbody");
    for (const row of rows) body.append(el("tr", "", ...row.map((cell) => el("td", "", cell))));
    t.append(body);
    return t;
  }

  function list(items: string[], className = ""): DomElement {
    return el("ul", className, ...items.map((item) => el("li", "", item)));
  }

  // ---- header ---------------------------------------------------------------------------------

  function header(view: RunView): DomElement {
    const head = el("header");
    if (view.integrity.state === "mismatch") {
      head.append(
        el(
          "div",
          "banner tampered",
          el("strong", "", "This record does not match its SHA256SUMS."),
          " It was changed after the run wrote it, or damaged: read everything below as untrusted.",
          list(view.integrity.problems),
        ),
      );
    } else if (view.integrity.state === "unchecked") {
      head.append(
        el(
          "div",
          "banner unchecked",
          el("strong", "", "This record cannot be checked: "),
          list(view.integrity.problems),
        ),
      );
    }
    if (view.newerFormat) head.append(el("div", "banner unchecked", el("strong", "", view.newerFormat)));
    const runFact = view.facts.find((f) => f.label === "run");
    head.append(el("h1", "", `sandbox-run ${runFact ? `run ${runFact.value}` : "run record"}`));
    head.append(outcome(view));
    if (view.integrity.state === "ok") {
      head.append(
        el("div", "integrity ok", `✓ integrity: all ${plural(view.integrity.matched, "file")} match SHA256SUMS`),
      );
    }
    head.append(facts(view.facts.filter((f) => f !== runFact)));
    if (view.recordNotes.length > 0) {
      head.append(
        el("div", "notes", el("strong", "", "The run could not record everything: "), list(view.recordNotes)),
      );
    }
    if (view.pageNotes.length > 0) {
      head.append(el("div", "notes", el("strong", "", "This page leaves out: "), list(view.pageNotes)));
    }
    return head;
  }

  function outcome(view: RunView): DomElement {
    const o = view.outcome;
    if (o.state === "ok") {
      return el(
        "div",
        "outcome ok",
        el("span", "mark", "✓"),
        ` succeeded: ${view.result?.kind === "text" ? "text result" : view.result ? "structured result" : "result"}`,
      );
    }
    if (o.state === "failed" && o.error) {
      const e = o.error;
      return el(
        "div",
        "outcome failed",
        el(
          "div",
          "",
          el("span", "mark", "✗"),
          " failed: ",
          el("code", "", e.code),
          e.limit ? ` (limit: ${e.limit})` : undefined,
          e.exitCode ? ` · exit code ${e.exitCode}` : undefined,
        ),
        el("div", "message", e.message.text),
        e.hint ? el("div", "hint", "→ ", e.hint.text) : undefined,
        e.stderrTail ? fold(["stderr (last lines)"], () => block(e.stderrTail!, "error.json")) : undefined,
      );
    }
    return el(
      "div",
      "outcome unknown",
      "? the record does not say how the run ended (no meta.json, result.json or error.json)",
    );
  }

  function facts(items: Fact[]): DomElement {
    const dl = el("dl", "facts");
    for (const fact of items) {
      dl.append(
        el(
          "div",
          "fact",
          el("dt", "", fact.label),
          el("dd", "", fact.value, fact.note ? el("small", "", fact.note) : undefined),
        ),
      );
    }
    return dl;
  }

  // ---- timeline -------------------------------------------------------------------------------

  function timeline(view: TimelineView): DomElement {
    const box = el("div", "timeline");
    const total = Math.max(view.totalMs, 1);
    const pct = (value: number) => `${Math.min(100, Math.max(0, (value / total) * 100))}%`;
    const axis = el("div", "track axis");
    const step = niceStep(total / 8);
    for (let t = 0; t <= total; t += step) {
      const tick = el("span", "tick", ms(t));
      tick.style.left = pct(t);
      axis.append(tick);
    }
    box.append(el("div", "row", el("span", "row-name", ""), axis));
    for (const row of view.rows) {
      const track = el("div", "track");
      for (const span of row.spans) {
        const bar = el("span", `span ${span.kind}`);
        bar.style.left = pct(span.startMs);
        bar.style.width = pct(span.endMs - span.startMs);
        bar.setAttribute(
          "title",
          `${span.label}: ${ms(span.startMs)} → ${ms(span.endMs)} (${ms(span.endMs - span.startMs)})`,
        );
        if (row.name === "phases" && span.endMs - span.startMs > total / 12)
          bar.append(el("span", "span-label", span.label));
        track.append(bar);
      }
      box.append(el("div", "row", el("span", "row-name", row.name), track));
    }
    box.append(el("div", "legend", `0 → ${ms(total)}, to scale; hover a bar for its times`));
    return box;
  }

  function niceStep(rough: number): number {
    const power = 10 ** Math.floor(Math.log10(Math.max(rough, 1)));
    for (const m of [1, 2, 5, 10]) if (m * power >= rough) return m * power;
    return 10 * power;
  }

  // ---- result ---------------------------------------------------------------------------------

  function result(view: RunView): DomElement | undefined {
    const r = view.result;
    if (!r) return undefined;
    const check = r.check;
    const verdict =
      check.state === "valid"
        ? el("div", "check ok", "✓ matches schema.json (checked again for this page)")
        : check.state === "invalid"
          ? el("div", "check bad", "✗ does not match schema.json: ", check.detail ?? "")
          : check.state === "no-schema"
            ? el(
                "div",
                "check",
                r.kind === "text" ? "a text result (the run had no schema)" : "no schema.json in the record",
              )
            : el("div", "check warn", "not checked: ", check.detail ?? "");
    return section(
      "result",
      "Result",
      verdict,
      previewBlock(r.value, "result.json"),
      r.schema ? fold(["schema.json"], () => block(r.schema!, "schema.json")) : undefined,
    );
  }

  // ---- decisions ------------------------------------------------------------------------------

  function decisions(view: RunView): DomElement {
    const d = view.decisions;
    const parts: Child[] = [];
    const g = d.gateway;
    parts.push(
      el("h3", "", "Model gateway"),
      el(
        "p",
        "",
        `${plural(g.requests, "request")} relayed (${Math.round(g.bytesUp / 1024)} KiB up, ${Math.round(g.bytesDown / 1024)} KiB down), ${plural(g.refused, "request")} refused.`,
      ),
    );
    if (d.refusals.length > 0) {
      parts.push(
        table(
          ["refused", "request", "status", "times", "why"],
          d.refusals.map((r) => [el("code", "", r.reason), `${r.method} ${r.path}`, r.status, String(r.count), r.text]),
        ),
      );
    }
    parts.push(el("h3", "", "Network (egress proxy)"));
    if (d.egress.length === 0) parts.push(el("p", "", "No connection was attempted through the egress proxy."));
    else {
      parts.push(
        table(
          ["host", "port", "allowed", "refused", "failed", "secrets put in", "why refused or failed"],
          d.egress.map((e) => [
            el("code", "", e.host),
            e.port,
            String(e.allowed),
            e.denied > 0 ? el("strong", "refused", String(e.denied)) : "0",
            String(e.failed),
            e.secrets.length > 0 ? `${e.secrets.join(", ")} (${e.injected})` : "",
            e.reasons.join("; "),
          ]),
        ),
      );
    }
    if (d.secrets.length > 0) {
      parts.push(
        el("h3", "", "Secrets (by name and host; values are never recorded)"),
        table(
          ["secret", "for hosts", "put into requests"],
          d.secrets.map((s) => [el("code", "", s.name), s.hosts.join(", "), String(s.injected)]),
        ),
      );
    }
    parts.push(el("h3", "", "Workspace"));
    if (d.violationCount === 0) parts.push(el("p", "", "No protected path was changed."));
    else {
      parts.push(
        el(
          "p",
          "bad",
          `${plural(d.violationCount, "protected path")} changed: the run failed and the result was withheld.`,
        ),
        table(
          ["path", "change", "rule"],
          d.violations.map((v) => [el("code", "", v.path), v.change, v.rule ?? ""]),
        ),
      );
      const r = d.restore;
      if (r) {
        const restored: string[] = [
          ...r.reverted.map((p) => `put back: ${p}`),
          ...r.removed.map((p) => `removed: ${p}`),
          ...r.modes.map((p) => `mode set back: ${p}`),
          ...r.notRestored.map((p) => `NOT restored: ${p}`),
          ...r.remaining.map((p) => `NOT restored: ${p}`),
        ];
        parts.push(el("p", "", r.clean === false ? "Restored in part:" : "What was restored:"), list(restored));
      }
    }
    if (d.handBack.length > 0) parts.push(list(d.handBack));
    if (d.limits.length > 0) {
      parts.push(
        el("h3", "", "Limits"),
        table(
          ["stopped by", "limit", "message"],
          d.limits.map((l) => [el("code", "", l.code), l.limit ?? "", l.message]),
        ),
      );
    }
    if (d.contradictions.length > 0) parts.push(el("h3", "", "Contradictions"), list(d.contradictions, "bad"));
    if (d.invalidRecords.count > 0) {
      parts.push(
        el("h3", "", `${plural(d.invalidRecords.count, "line")} on Pi's output were not events`),
        list(d.invalidRecords.previews, "mono"),
      );
    }
    if (d.replay.length > 0) parts.push(el("h3", "", "Replay"), list(d.replay.map((r) => `${r.type}: ${r.text}`)));
    if (d.warnings.length > 0) parts.push(el("h3", "", "Warnings"), list(d.warnings));
    return section("decisions", "Decisions", ...parts);
  }

  // ---- changes --------------------------------------------------------------------------------

  function changes(view: RunView): DomElement {
    const c = view.changes;
    const parts: Child[] = [];
    const f = c.changedFiles;
    const listedTotal = f ? f.counts.created + f.counts.modified + f.counts.deleted : 0;
    if (c.missing) parts.push(el("p", "", "The record has no changes.patch."));
    else if (c.totalFiles === 0)
      parts.push(
        el(
          "p",
          "",
          listedTotal > 0
            ? "The record's patch holds no change (with hand-back branch the branch holds them): the run's own list is below."
            : c.notes
              ? "The patch holds no change; what it left out is below."
              : "The workspace did not change.",
        ),
      );
    for (const [index, file] of c.files.entries()) {
      parts.push(
        fold(
          [
            el("span", `status ${file.status}`, file.status),
            " ",
            el("code", "", file.name),
            file.oldName ? el("span", "dim", " ← ", file.oldName) : undefined,
            el("span", "counts", el("span", "add", ` +${file.added}`), el("span", "del", ` −${file.removed}`)),
          ],
          () => diffBody(file.body),
          "file",
          index < OPEN_DIFF_FILES && file.body.text.length <= OPEN_DIFF_CHARS,
        ),
      );
    }
    if (c.omittedFiles.length > 0)
      parts.push(el("p", "", `Not drawn (over the page's cap): `), list(c.omittedFiles, "mono"));
    const unnamed = c.totalFiles - c.files.length - c.omittedFiles.length;
    if (unnamed > 0)
      parts.push(
        el(
          "p",
          "cut",
          `… and ${plural(unnamed, "more file")} of the patch, neither drawn nor named here: changes.patch has them.`,
        ),
      );
    if (c.notes)
      parts.push(fold(["what the patch left out (changes-notes.txt)"], () => block(c.notes!, "changes-notes.txt")));
    if (f) {
      const all = [
        ...f.created.map((n) => `created  ${n}`),
        ...f.modified.map((n) => `modified ${n}`),
        ...f.deleted.map((n) => `deleted  ${n}`),
      ];
      const unlisted = listedTotal - all.length;
      if (listedTotal > 0)
        parts.push(
          fold([`changed files as the run reported them (${listedTotal})`], () =>
            el(
              "div",
              "",
              list(all, "mono"),
              unlisted > 0
                ? el("p", "cut", `… and ${plural(unlisted, "more file")} the record does not name.`)
                : undefined,
            ),
          ),
        );
    }
    return section("changes", "Workspace changes", ...parts);
  }

  function diffBody(body: Shown): DomElement {
    const pre = el("pre", "diff");
    for (const line of body.text.split("\n")) {
      const first = line.charAt(0);
      const kind = line.startsWith("@@")
        ? "hunk"
        : first === "+" && !line.startsWith("+++ ")
          ? "add"
          : first === "-" && !line.startsWith("--- ")
            ? "del"
            : first === " " || line === ""
              ? "ctx"
              : "meta";
      pre.append(el("span", `line ${kind}`, line));
    }
    return el("div", "", pre, cutMark(body, "changes.patch"));
  }

  // ---- turns ----------------------------------------------------------------------------------

  function turns(view: RunView): DomElement {
    const box = section("turns", `Turns (${view.turns.length})`);
    if (view.prompt) box.append(el("div", "prompt", el("h3", "", "Prompt"), previewBlock(view.prompt, "prompt.txt")));
    const listBox = el("div", "turn-list");
    box.append(listBox);
    let shown = 0;
    const more = el("button", "more", "");
    const next = () => {
      const end = Math.min(view.turns.length, shown + TURNS_PER_PAGE);
      for (; shown < end; shown++) listBox.append(turn(view.turns[shown]!));
      more.textContent = `show ${Math.min(TURNS_PER_PAGE, view.turns.length - shown)} more turns (${view.turns.length - shown} left)`;
      more.hidden = shown >= view.turns.length;
    };
    more.addEventListener("click", next);
    box.append(more);
    next();
    if (view.looseExchanges.length > 0) {
      box.append(
        el("h3", "", `Model exchanges outside the turns (${view.looseExchanges.length})`),
        ...view.looseExchanges.map((x) => exchange(x)),
      );
    }
    return box;
  }

  function turn(t: TurnView): DomElement {
    const head = el(
      "div",
      "turn-head",
      el("strong", "", `Turn ${t.index}`),
      el("span", "dim", ` at ${ms(t.startMs)}${t.endMs !== undefined ? `, ${ms(t.endMs - t.startMs)}` : ""}`),
      t.usage ? el("span", "dim", ` · ${t.usage.input ?? 0} in / ${t.usage.output ?? 0} out tokens`) : undefined,
      t.stopReason ? el("span", "dim", ` · stop: ${t.stopReason}`) : undefined,
    );
    const box = el("article", "turn", head);
    if (t.thinking) box.append(fold(["thinking"], () => block(t.thinking!, "events.jsonl")));
    if (t.text) box.append(el("div", "model-text", previewBlock(t.text, "events.jsonl")));
    if (t.error) box.append(el("div", "bad", "model error: ", t.error.text));
    for (const tool of t.tools) box.append(toolCall(tool));
    for (const x of t.exchanges) box.append(exchange(x));
    return box;
  }

  function toolCall(tool: ToolView): DomElement {
    const state = tool.isError
      ? el("span", "badge bad", "error")
      : tool.output === undefined
        ? el("span", "badge warn", "no output recorded")
        : undefined;
    return fold(
      [
        el("span", tool.final ? "tool final" : "tool", tool.final ? "final result" : "tool"),
        " ",
        el("code", "tool-name", tool.name),
        " ",
        el("span", "summary-text", tool.summary),
        state ? " " : undefined,
        state,
        tool.startMs !== undefined && tool.endMs !== undefined
          ? el("span", "dim", ` ${ms(tool.endMs - tool.startMs)}`)
          : undefined,
      ],
      () =>
        el(
          "div",
          "",
          el("h4", "", "arguments"),
          block(tool.args, "events.jsonl"),
          el("h4", "", tool.isError ? "output (an error)" : "output"),
          tool.output ? block(tool.output, "events.jsonl") : el("p", "dim", "(none recorded)"),
          tool.otherParts ? el("p", "dim", `not shown: ${tool.otherParts.join(", ")}`) : undefined,
        ),
      "tool-call",
      small(tool.args, tool.output),
    );
  }

  function exchange(x: ExchangeView): DomElement {
    return fold(
      [
        el("span", "tool model", "model exchange"),
        ` #${x.seq} ${x.method} `,
        el("code", "", x.target),
        ` → ${x.status} ${x.relay}, ${ms(x.durationMs)}`,
        x.chain ? el("span", "dim", ` · ${x.chain}`) : undefined,
        x.scrubbed ? el("span", "badge warn", "credential removed") : undefined,
      ],
      () => {
        const body = el("div");
        if (x.reply) {
          body.append(
            el("h4", "", `reply as the gateway parsed it${x.reply.stopReason ? ` (stop: ${x.reply.stopReason})` : ""}`),
          );
          if (x.reply.text.text) body.append(block(x.reply.text, "exchanges.jsonl"));
          for (const call of x.reply.toolCalls)
            body.append(el("div", "", "tool call ", el("code", "", call.name)), block(call.args, "exchanges.jsonl"));
          if (x.reply.error) body.append(el("p", "bad", x.reply.error));
        }
        if (x.omitted) body.append(el("p", "warn", `bytes not recorded: ${x.omitted}`));
        if (x.hiddenHeaders.length > 0) {
          body.append(el("p", "warn", `headers not shown (they look like credentials): ${x.hiddenHeaders.join(", ")}`));
        }
        body.append(
          fold([`request headers (${x.requestHeaders.length})`], () => headers(x.requestHeaders)),
          x.requestBody
            ? fold([`request body${x.requestBodyCut ? " (cut by the record)" : ""}`], () =>
                block(x.requestBody!, "exchanges.jsonl"),
              )
            : "",
          fold([`response headers (${x.responseHeaders.length})`], () => headers(x.responseHeaders)),
          x.responseBody
            ? fold([`response body${x.responseBodyCut ? " (cut by the record)" : ""}`], () =>
                block(x.responseBody!, "exchanges.jsonl"),
              )
            : "",
        );
        return body;
      },
      "exchange",
    );
  }

  function headers(lines: Array<{ name: string; value: string }>): DomElement {
    return table(
      ["header", "value"],
      lines.map((h) => [el("code", "", h.name), h.value]),
    );
  }

  // ---- other ----------------------------------------------------------------------------------

  function other(view: RunView): DomElement | undefined {
    if (view.otherEvents.length === 0 && view.otherMeta.length === 0) return undefined;
    const parts: Child[] = [];
    if (view.otherEvents.length > 0) {
      parts.push(el("h3", "", "Other events"));
      for (const e of view.otherEvents) {
        parts.push(
          fold(
            [el("code", "", e.type), ` at ${ms(e.timeMs)}${e.count > 1 ? ` (${e.count} times; the first shown)` : ""}`],
            () => block(e.data, "events.jsonl"),
          ),
        );
      }
    }
    if (view.otherMeta.length > 0) {
      parts.push(el("h3", "", "Other fields of meta.json"));
      for (const m of view.otherMeta) parts.push(fold([el("code", "", m.key)], () => block(m.value, "meta.json")));
    }
    return section("other", "More from the record", ...parts);
  }

  /** Buttons to the sections the page has (a failed run has no result). */
  function nav(sections: Array<DomElement | undefined>): DomElement {
    const bar = el("nav");
    for (const target of sections) {
      if (!target) continue;
      const button = el("button", "", target.id.charAt(0).toUpperCase() + target.id.slice(1));
      button.addEventListener("click", () => target.scrollIntoView());
      bar.append(button);
    }
    return bar;
  }

  const root = document.getElementById("run")!;
  try {
    const data = document.getElementById("run-data");
    const view = JSON.parse(data?.textContent ?? "null") as RunView;
    if (view?.view !== 1) throw new Error("this page's data is not in a shape this page reads");
    const runFact = view.facts.find((f) => f.label === "run");
    document.title = `sandbox-run ${runFact ? runFact.value : "run"} · ${view.outcome.state}`;
    const parts = [
      section("timeline", "Timeline", timeline(view.timeline)),
      result(view),
      decisions(view),
      changes(view),
      turns(view),
    ];
    root.replaceChildren(
      header(view),
      nav(parts),
      ...parts.filter((part): part is DomElement => part !== undefined),
      other(view) ?? "",
      el(
        "footer",
        "",
        `Made by ${view.madeBy} from the record ${view.record}. This page loads nothing from the network; everything on it is text from the record, shown as text.`,
      ),
    );
  } catch (error) {
    root.replaceChildren(el("p", "bad", `This page could not be drawn: ${(error as Error).message}`));
  }
}
