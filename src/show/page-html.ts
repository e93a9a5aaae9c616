// The page: one HTML file that opens from file:// with nothing loaded from anywhere. Its markup is
// a constant shell; the only bytes from the record are inside the JSON data element, escaped so
// that no HTML parser state can be left from there (embedded-json.ts). Its own style sheet and
// script run because they carry this file's nonce, and the Content-Security-Policy allows
// nothing else: no other script (inline or not, no event handler attributes, no javascript:
// URLs), no style attribute, no connection, no frame, no form, images only as data: URLs, and no
// <base> that could move relative URLs. The policy is in a <meta> element before anything else.
import crypto from "node:crypto";
import { embeddedJson } from "./embedded-json.js";
import { pageScript } from "./page-script.js";
import { PAGE_STYLE } from "./page-style.js";
import type { RunView } from "./run-view.js";

export function contentSecurityPolicy(nonce: string): string {
  return [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src 'nonce-${nonce}'`,
    "img-src data:",
    "base-uri 'none'",
    "form-action 'none'",
  ].join("; ");
}

function newNonce(): string {
  return crypto.randomBytes(18).toString("base64url");
}

export function renderPage(view: RunView, nonce = newNonce()): string {
  if (!/^[A-Za-z0-9_-]{16,}$/.test(nonce)) throw new Error("a nonce must be 16 or more base64url characters");
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${contentSecurityPolicy(nonce)}">
<meta name="referrer" content="no-referrer">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sandbox-run run record</title>
<style nonce="${nonce}">${PAGE_STYLE}</style>
</head>
<body>
<main id="run"><noscript>This page draws the run with its own script, written into the file (it loads nothing from anywhere). Allow JavaScript for this file, or read the record's files (meta.json, events.jsonl, changes.patch) directly.</noscript></main>
<script type="application/json" id="run-data">${embeddedJson(view)}</script>
<script nonce="${nonce}">${pageScript()}</script>
</body>
</html>
`;
}
