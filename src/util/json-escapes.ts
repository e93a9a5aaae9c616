// JSON text written where a person or a line reader may meet it (stdout, a record's files): what
// JSON.stringify leaves raw in a string (it escapes only U+0000-U+001F) written as `\uXXXX`: DEL,
// the C1 controls (U+009B and U+009D are CSI and OSC to terminals that read UTF-8 that way), the
// line and paragraph separators (readers that split lines on them, Python's `splitlines()` among
// them, cut a JSON line in pieces), the interlinear annotation marks and every default-ignorable
// character (bidi marks, variation selectors, tag characters...), as on the terminal. Such
// characters occur only inside strings, where the escape is the same value: JSON.parse gives back
// exactly what JSON.stringify was given.
const UNSAFE_IN_JSON = /[\u007f-\u009f\u2028\u2029\ufff9-\ufffb\p{Default_Ignorable_Code_Point}]/gu;

/** `json` (JSON.stringify's output) with every such character escaped. */
export function escapeUnsafeInJson(json: string): string {
  return json.replace(
    UNSAFE_IN_JSON,
    // Each UTF-16 unit (a tag character is two): JSON's \uXXXX escapes read back to the same text.
    (ch) =>
      Array.from({ length: ch.length }, (_, i) => `\\u${ch.charCodeAt(i).toString(16).padStart(4, "0")}`).join(""),
  );
}
