// Characters that change how text reads without being seen: C0 and C1 controls (tab and line feed
// aside), DEL, line and paragraph separators, the interlinear annotation marks, and every character
// Unicode calls default-ignorable (renderers draw it as nothing): the bidi marks, embeddings,
// overrides and isolates (a `\u202e` makes code read differently than it runs), zero-width and
// invisible characters, the byte-order mark, the soft hyphen, Hangul fillers (valid in JavaScript
// names), and the variation selectors and tag characters, whose runs can carry a whole payload that
// a decoder in plain sight runs. ZWJ and ZWNJ (U+200C, U+200D) are left alone between two
// characters outside ASCII, where emoji and several scripts need them; anywhere else (next to
// ASCII, at an end, in a run of joiners, which can carry a payload two characters at a time) they
// count too.
//
// Shared by what shows record text (show/visible-chars.ts: each as its escape) and what judges the
// names a run left (workspace/builtin-protections.ts). show/page-script.ts holds the same class as
// a literal (the page's script cannot import); a unit test checks that the two agree. The `u` flag
// is part of it: astral characters match whole.
export const INVISIBLE_SOURCE =
  "(?![\\u200c\\u200d])[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f\\u2028\\u2029\\ufff9-\\ufffb\\p{Default_Ignorable_Code_Point}]|(?<![^\\u0000-\\u007f\\u200c\\u200d])[\\u200c\\u200d]|[\\u200c\\u200d](?![^\\u0000-\\u007f\\u200c\\u200d])";
