// The page's style sheet (inlined, allowed by the page's nonce). No fonts or images from anywhere:
// the system's fonts, and colours that follow the reader's light or dark setting.
export const PAGE_STYLE = `
:root { color-scheme: light dark; --bg: #fff; --fg: #1f2328; --dim: #656d76; --line: #d0d7de; --panel: #f6f8fa;
  --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; --add-bg: #dafbe1; --del-bg: #ffebe9; --hunk: #0969da;
  --phase: #8c959f; --turn: #54aeff; --model: #8250df; --tool: #bf8700; --badge: #ffd8b5; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #0d1117; --fg: #e6edf3; --dim: #8d96a0; --line: #30363d; --panel: #161b22; --ok: #3fb950;
    --bad: #f85149; --warn: #d29922; --add-bg: #12261e; --del-bg: #2d1214; --hunk: #58a6ff; --badge: #5a3a00; }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }
#run { max-width: 1200px; margin: 0 auto; padding: 16px 24px 48px; }
h1 { font-size: 22px; margin: 8px 0; }
h2 { font-size: 18px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 15px; margin: 16px 0 6px; }
h4 { font-size: 13px; margin: 10px 0 4px; color: var(--dim); }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
pre { margin: 0; padding: 8px 10px; background: var(--panel); border: 1px solid var(--line); border-radius: 6px;
  white-space: pre-wrap; overflow-wrap: anywhere; max-height: 70vh; overflow: auto; }
.dim, small { color: var(--dim); }
small { display: block; font-size: 12px; }
.bad { color: var(--bad); }
.warn { color: var(--warn); }
.cc { display: inline-block; padding: 0 3px; margin: 0 1px; border-radius: 3px; background: var(--badge);
  color: var(--fg); font-family: ui-monospace, monospace; font-size: 11px; }
.banner { padding: 10px 14px; border-radius: 6px; margin: 8px 0; border: 2px solid; }
.banner.tampered { border-color: var(--bad); background: var(--del-bg); color: var(--bad); }
.banner.unchecked { border-color: var(--warn); }
.banner ul { margin: 6px 0 0; }
.outcome { font-size: 16px; margin: 6px 0; padding: 8px 12px; border-radius: 6px; border: 1px solid var(--line); }
.outcome.ok { border-color: var(--ok); }
.outcome.ok .mark { color: var(--ok); font-weight: bold; }
.outcome.failed { border-color: var(--bad); }
.outcome.failed .mark { color: var(--bad); font-weight: bold; }
.outcome .message { margin-top: 4px; white-space: pre-wrap; }
.outcome .hint { color: var(--dim); margin-top: 4px; white-space: pre-wrap; }
.integrity.ok { color: var(--ok); margin: 4px 0; }
.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(240px, 1fr)); gap: 6px 18px; margin: 12px 0; }
.fact dt { color: var(--dim); font-size: 12px; }
.fact dd { margin: 0; overflow-wrap: anywhere; }
.notes { margin: 8px 0; padding: 8px 12px; background: var(--panel); border-radius: 6px; }
.notes ul { margin: 4px 0 0; }
nav { position: sticky; top: 0; background: var(--bg); padding: 6px 0; border-bottom: 1px solid var(--line); z-index: 2; }
button { font: inherit; font-size: 13px; padding: 3px 10px; margin-right: 6px; border: 1px solid var(--line);
  border-radius: 6px; background: var(--panel); color: var(--fg); cursor: pointer; }
button.more { margin: 6px 0; }
.timeline { border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; }
.timeline .row { display: flex; align-items: center; height: 20px; margin: 3px 0; }
.timeline .row-name { width: 80px; flex: none; color: var(--dim); font-size: 12px; }
.timeline .track { position: relative; flex: 1; height: 16px; }
.timeline .axis { border-bottom: 1px solid var(--line); }
.timeline .tick { position: absolute; font-size: 10px; color: var(--dim); transform: translateX(-50%); top: 0; }
.timeline .span { position: absolute; top: 1px; bottom: 1px; min-width: 2px; border-radius: 2px; overflow: hidden; }
.timeline .span-label { display: block; font-size: 10px; line-height: 14px; padding-left: 3px; color: #fff; white-space: nowrap; }
.span.phase { background: var(--phase); } .span.turn { background: var(--turn); opacity: .85; }
.span.model { background: var(--model); } .span.tool { background: var(--tool); }
.span.tool-error, .span.failure { background: var(--bad); min-width: 3px; }
.timeline .legend { font-size: 11px; color: var(--dim); margin-top: 4px; }
table { border-collapse: collapse; margin: 6px 0; width: 100%; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; overflow-wrap: anywhere; }
th { background: var(--panel); font-weight: 600; font-size: 12px; }
details { margin: 4px 0; border: 1px solid var(--line); border-radius: 6px; }
details > summary { cursor: pointer; padding: 4px 8px; list-style-position: inside; overflow-wrap: anywhere; }
details > summary:focus-visible { outline: 2px solid var(--hunk); }
details[open] > summary { border-bottom: 1px solid var(--line); }
details > .body { padding: 6px 10px; }
.turn { border-left: 3px solid var(--turn); padding: 4px 0 4px 12px; margin: 14px 0; }
.turn-head { margin-bottom: 4px; }
.model-text pre { background: transparent; border: none; padding: 2px 0; font-family: inherit; font-size: 14px; }
.tool { display: inline-block; font-size: 11px; padding: 0 6px; border-radius: 10px; background: var(--tool); color: #fff; }
.tool.final { background: var(--ok); }
.tool.model { background: var(--model); }
.tool-name { font-weight: 600; }
.summary-text { font-family: ui-monospace, monospace; font-size: 12px; color: var(--dim); }
.badge { font-size: 11px; padding: 0 6px; border-radius: 10px; border: 1px solid currentColor; margin-left: 4px; }
.status { display: inline-block; min-width: 64px; font-size: 11px; text-transform: uppercase; color: var(--dim); }
.status.added { color: var(--ok); } .status.deleted { color: var(--bad); }
.counts { margin-left: 8px; font-size: 12px; }
.counts .add { color: var(--ok); } .counts .del { color: var(--bad); }
pre.diff { padding: 0; }
pre.diff .line { display: block; min-height: 1.45em; padding: 0 10px; }
.line.add { background: var(--add-bg); } .line.del { background: var(--del-bg); }
.line.hunk { color: var(--hunk); } .line.meta { color: var(--dim); }
.cut { font-size: 12px; color: var(--warn); margin: 2px 0 6px; }
.check { margin: 4px 0 8px; } .check.ok { color: var(--ok); } .check.bad { color: var(--bad); }
.check.warn { color: var(--warn); }
strong.refused { color: var(--bad); }
footer { margin-top: 36px; color: var(--dim); font-size: 12px; border-top: 1px solid var(--line); padding-top: 8px; }
`;
