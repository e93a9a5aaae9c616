// The escaping `sandbox-run show` relies on, without a browser: the page's data element, the page's
// frame (record text only inside the data), its script (self-contained, nothing that ends a script
// element), the Markdown summary (record text only inside code), and the characters shown as escapes.
import { describe, expect, it } from "vitest";
import { embeddedJson } from "../../src/show/embedded-json.js";
import { code, fenced, MAX_CHARS, markdownSummary } from "../../src/show/markdown-summary.js";
import { contentSecurityPolicy, renderPage } from "../../src/show/page-html.js";
import { pageScript } from "../../src/show/page-script.js";
import type { RunView } from "../../src/show/run-view.js";
import { bytesOf } from "../../src/show/text-budget.js";
import { INVISIBLE_SOURCE, visibleText } from "../../src/show/visible-chars.js";

const HOSTILE = [
  "</script><script>alert(1)</script>",
  "</SCRIPT >",
  "<!-- <script>",
  "<img src=x onerror=alert(1)>",
  "a\u2028b\u2029c",
  "&lt;&amp;",
  "[link](javascript:alert(1)) ![img](http://x/y.png) <http://x> www.example.com https://example.com",
  "| a | b |\n|---|---|",
  "```\n# heading\n```",
  "\u001b]52;c;ZWNobyBwd25lZA==\u0007 \u202e \ud800 lone",
  "`code` ``two`` ```three```",
  "\u009b31m C1 CSI \u009d0;title\u009c \u007f \u061c \u200e \u2066 \u2069",
];

function view(text: string): RunView {
  const shown = { text };
  return {
    view: 1,
    madeBy: "sandbox-run test",
    record: text,
    integrity: { state: "mismatch", matched: 1, problems: [text] },
    outcome: { state: "failed", error: { code: text, message: shown, hint: shown, limit: text } },
    facts: [
      { label: "run", value: text },
      { label: "model", value: text, note: text },
    ],
    recordNotes: [text],
    pageNotes: [],
    prompt: shown,
    timeline: {
      totalMs: 10,
      rows: [{ name: "phases", spans: [{ startMs: 0, endMs: 5, label: text, kind: "phase" }] }],
    },
    turns: [
      {
        index: 1,
        startMs: 0,
        text: shown,
        error: shown,
        tools: [{ id: text, name: text, args: shown, summary: text, output: shown, isError: true }],
        exchanges: [],
      },
    ],
    looseExchanges: [],
    decisions: {
      gateway: { requests: 1, refused: 1, bytesUp: 0, bytesDown: 0 },
      refusals: [{ reason: text, text, method: text, path: text, status: text, count: 1 }],
      egress: [
        { host: text, port: text, allowed: 0, denied: 1, failed: 0, injected: 0, reasons: [text], secrets: [text] },
      ],
      secrets: [{ name: text, hosts: [text], injected: 1 }],
      violations: [{ path: text, change: text, rule: text }],
      violationCount: 1,
      restore: { reverted: [text], removed: [], modes: [], notRestored: [text], remaining: [text] },
      handBack: [text],
      limits: [{ code: text, limit: text, message: text }],
      contradictions: [text],
      invalidRecords: { count: 1, previews: [text] },
      warnings: [text],
      replay: [{ type: text, text }],
    },
    changes: {
      files: [{ name: text, oldName: text, status: "renamed", added: 1, removed: 0, body: shown }],
      omittedFiles: [text],
      totalFiles: 2,
      missing: false,
    },
    result: { kind: "structured", value: shown, check: { state: "invalid", detail: text } },
    otherEvents: [{ timeMs: 1, type: text, data: shown, count: 1 }],
    otherMeta: [{ key: text, value: shown }],
  };
}

describe("the page's data element", () => {
  it("holds no '<', '>' or '&', no U+2028/2029, DEL, C1 or bidi control, and reads back unchanged", () => {
    for (const text of HOSTILE) {
      const json = embeddedJson({ text, nested: [text] });
      expect(json).not.toMatch(/[<>&\u2028\u2029]/);
      // Nor what acts on a terminal (`show -o -`) or reorders text: DEL, C1, bidi controls.
      expect(json).not.toMatch(/[\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/);
      expect(JSON.parse(json)).toEqual({ text, nested: [text] });
    }
  });
});

describe("the page's frame", () => {
  it("has the strict policy first, and record text only inside the data element", () => {
    for (const text of HOSTILE) {
      const page = renderPage(view(text), "nonce0123456789abcdefXY");
      const head = page.slice(0, page.indexOf("<style"));
      expect(head).toContain(`content="${contentSecurityPolicy("nonce0123456789abcdefXY")}"`);
      const start = page.indexOf('<script type="application/json" id="run-data">');
      const end = page.indexOf("</script>", start);
      // The data element ends where the page put its end: the first </script> after it is its own.
      expect(page.slice(end)).toMatch(/^<\/script>\n<script nonce="nonce0123456789abcdefXY">/);
      const outside = page.slice(0, start) + page.slice(end);
      expect(outside).not.toContain(text);
      expect((page.match(/<script/gi) ?? []).length).toBe(2);
    }
    expect(contentSecurityPolicy("N1234567890123456")).toBe(
      "default-src 'none'; script-src 'nonce-N1234567890123456'; style-src 'nonce-N1234567890123456'; img-src data:; base-uri 'none'; form-action 'none'",
    );
  });

  it("gets a new nonce for every page", () => {
    const nonces = new Set(
      Array.from({ length: 5 }, () => /script-src 'nonce-([^']+)'/.exec(renderPage(view("x")))![1]),
    );
    expect(nonces.size).toBe(5);
  });

  it("has a self-contained script that cannot end its own element and never parses markup", () => {
    const script = pageScript();
    expect(script).not.toMatch(/<\/script|<!--/i);
    expect(script).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/);
    expect(script).not.toMatch(/\bhref\b|\bsrc\b|setAttribute\("style"/);
    // The page draws the same characters as escapes as the Markdown summary does.
    expect(script).toContain(`/${INVISIBLE_SOURCE}/gu`);
    // It runs alone: parsing it defines nothing it does not bring.
    expect(() => new Function(script)).not.toThrow();
  });
});

describe("characters that hide or reorder text", () => {
  it("are shown as their escapes; line breaks and tabs stay, a joiner between ASCII letters does not", () => {
    expect(visibleText("a\u202eb\u2066c\u200bd\u001b[31me\u0007\r\nf\tg\u200dh\ufeffi\u2028j\u0085k")).toBe(
      "a\\u202eb\\u2066c\\u200bd\\x1b[31me\\x07\nf\tg\\u200dh\\ufeffi\\u2028j\\x85k",
    );
    expect(visibleText("lone\rCR")).toBe("lone\\x0dCR");
  });

  it('every default-ignorable character too, astral ones whole (review: a payload in variation selectors read as `""`)', () => {
    const payload = [...Buffer.from("run")].map((b) => String.fromCodePoint(0xe0100 + b - 16)).join("");
    expect(visibleText(`eval(d("${payload}"))`)).toBe('eval(d("\\u{e0162}\\u{e0165}\\u{e015e}"))');
    expect(visibleText("const {a,\u3164}=q;\u00ad\u034f\ufe0f\u{e0041}\u180b\u{1d173}")).toBe(
      "const {a,\\u3164}=q;\\xad\\u034f\\ufe0f\\u{e0041}\\u180b\\u{1d173}",
    );
    // Joiners stay between two characters outside ASCII (emoji sequences and several scripts need
    // them), and are shown elsewhere: a run of them carries a payload two characters at a time.
    expect(visibleText("\u{1f469}\u200d\u{1f4bb}")).toBe("\u{1f469}\u200d\u{1f4bb}");
    expect(visibleText('decode("\u200c\u200d\u200c")')).toBe('decode("\\u200c\\u200d\\u200c")');
    expect(visibleText("a\u200db\u{1f469}\u200d")).toBe("a\\u200db\u{1f469}\\u200d");
  });
});

describe("the Markdown summary", () => {
  /** What a renderer reads as Markdown: the text with every code span and fenced block taken out. */
  function outsideCode(md: string): string {
    let rest = md.replace(/^(`{3,})text\n[\s\S]*?\n\1$/gm, "");
    rest = rest.replace(/(`+)(?!`)[\s\S]*?[^`]\1(?!`)/g, "");
    return rest;
  }

  it("puts record text in code spans and fences only", () => {
    for (const text of HOSTILE) {
      const md = markdownSummary(view(text));
      const outside = outsideCode(md);
      expect(outside).not.toMatch(/<|\]\(|!\[|https?:|www\.|javascript:/);
      // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
      expect(md).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e\u2028\u2029]/);
    }
  });

  it("passes no CI runner log command on: no line starts with '::' after its indent, and no '##[' anywhere (red-team review, round 3, session 41)", () => {
    // Behind any white space the runner trims too (.NET's TrimStart: a no-break space, U+3000; fix review, session 41).
    const text =
      "ok\n::add-mask::hidden\n  ::stop-commands::tok\n##[error]forged ##[group]x\n::error file=a.ts::forged\n\u00a0::add-mask::nbsp\n\u3000\u2003::stop-commands::wide";
    const md = markdownSummary(view(text));
    expect(md).not.toMatch(/^\s*::/mu);
    expect(md).not.toContain("##[");
    // Shown, escaped, where the record had them.
    expect(md).toContain("\\x3a:add-mask::hidden");
    expect(md).toContain("#\\x23[error]forged");
  });

  it("code spans outlast the backticks inside, escape table pipes and keep to one line", () => {
    expect(code("a ``b`` c")).toBe("```a ``b`` c```");
    expect(code("`x`")).toBe("`` `x` ``");
    expect(code("a|b\nc", true)).toBe("`a\\|b⏎c`");
    expect(code("")).toBe("` `");
    expect(code("x".repeat(500))).toHaveLength(160 + 3);
  });

  it("fences outlast the fences inside", () => {
    expect(fenced("```\nx\n````")).toBe("`````text\n```\nx\n````\n`````");
  });

  it("stays under a pull-request comment's size, whatever the record holds", () => {
    const big = view("y".repeat(10_000));
    big.turns = Array.from({ length: 2_000 }, (_, i) => ({ ...big.turns[0]!, index: i + 1 }));
    big.changes.files = Array.from({ length: 5_000 }, () => big.changes.files[0]!);
    const md = markdownSummary(big);
    expect(md.length).toBeLessThanOrEqual(MAX_CHARS);
    // Cut between blocks: every fence it opened, it closed.
    expect((md.match(/^`{3,}/gm) ?? []).length % 2).toBe(0);
  });
});

describe("the page's size accounting", () => {
  it("counts exactly the bytes a text takes in the page's data", () => {
    for (const text of [
      ...HOSTILE,
      "",
      "plain",
      "é😀",
      "\ud800",
      "a\udc00b",
      "\u2028\u2029",
      '"\\',
      "\u0000\u001f\n",
    ]) {
      expect(bytesOf(text), JSON.stringify(text)).toBe(Buffer.byteLength(embeddedJson(text)));
    }
  });
});
