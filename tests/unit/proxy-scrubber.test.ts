// The response scrubber: exact sequences replaced wherever they fall in the stream, including
// across chunk boundaries, the longest match first, nothing else touched; a secret's base64 at
// any of base64's three alignments (inside a Basic credential whatever the user name's length),
// and a header value the proxy produced also without its scheme.
import { Readable } from "node:stream";
import { text } from "node:stream/consumers";
import { describe, expect, it } from "vitest";
import { headerForms, ScrubStream, scrubText, secretForms } from "../../src/util/scrubber.js";

const TOKEN = "ghp_REALtoken0123456789";
const replacements = [
  { find: TOKEN, replace: "PLACEHOLDER" },
  { find: `Bearer ${TOKEN}`, replace: "Bearer PLACEHOLDER-AS-SENT" },
];

const scrubbed = (chunks: string[]) =>
  text(Readable.from(chunks.map((c) => Buffer.from(c))).pipe(new ScrubStream(replacements)));

describe("ScrubStream", () => {
  const body = `a ${TOKEN} b Bearer ${TOKEN} c ${TOKEN}${TOKEN} end`;
  const expected = "a PLACEHOLDER b Bearer PLACEHOLDER-AS-SENT c PLACEHOLDERPLACEHOLDER end";

  it("replaces every occurrence in one chunk, preferring the longer match at the same place", async () => {
    expect(await scrubbed([body])).toBe(expected);
  });

  it("finds matches split across chunks, down to one byte per chunk", async () => {
    expect(await scrubbed([...body])).toBe(expected);
    for (let cut = 1; cut < body.length; cut += 3) {
      expect(await scrubbed([body.slice(0, cut), body.slice(cut)])).toBe(expected);
    }
  });

  it("passes everything else through unchanged, including a partial match at the very end", async () => {
    const tail = `nothing here ${TOKEN.slice(0, 10)}`;
    expect(await scrubbed([tail.slice(0, 5), tail.slice(5)])).toBe(tail);
    expect(await scrubbed([])).toBe("");
  });

  it("works on binary data", async () => {
    const bytes = Buffer.concat([Buffer.from([0, 255, 1]), Buffer.from(TOKEN), Buffer.from([254, 0])]);
    const out = await text(
      Readable.from([bytes.subarray(0, 7), bytes.subarray(7)]).pipe(new ScrubStream(replacements)),
    );
    expect(Buffer.from(out, "latin1").includes(Buffer.from(TOKEN))).toBe(false);
  });
});

describe("scrubText", () => {
  it("replaces in header values", () => {
    expect(scrubText(`x ${TOKEN} y`, replacements)).toBe("x PLACEHOLDER y");
    expect(scrubText("unrelated", replacements)).toBe("unrelated");
  });
});

describe("secretForms: a value's base64 wherever it sits", () => {
  const VALUE = "QZX~WV!UTS%qpo^mlk*jih(gfe)dcbZY";
  const PLACEHOLDER = "sandbox-run-placeholder-GITHUB_TOKEN-00112233445566778899aabbccddeeff";
  const forms = secretForms(VALUE, PLACEHOLDER);
  const b64 = (s: string) => Buffer.from(s, "latin1").toString("base64");
  /** Every three-character piece of the value that survives in the decoded text. */
  const leaks = (decoded: string) =>
    Array.from({ length: VALUE.length - 2 }, (_, i) => VALUE.slice(i, i + 3)).filter((p) => decoded.includes(p));

  it("takes the value out of a Basic credential for user names of every length, with text before and after", () => {
    for (const user of ["x", "ab", "abc", "abcd", "x-access-token", "oauth2"]) {
      for (const before of ["", "a", "ab"]) {
        for (const after of ["", "z", "zz", ":more"]) {
          const encoded = b64(`${before}${user}:${VALUE}${after}`);
          const out = scrubText(`echo ${encoded} end`, forms);
          const decoded = Buffer.from(out.split(" ")[1]!, "base64").toString("latin1");
          expect(leaks(decoded), `${before}|${user}|${after}`).toEqual([]);
          // Neighbours keep their own bits: what precedes the value still decodes as it was.
          expect(decoded.startsWith(`${before}${user}:`), `${before}|${user}|${after}`).toBe(true);
        }
      }
    }
  });

  it("the same across chunk boundaries, one byte at a time", async () => {
    const body = `x ${b64(`abcd:${VALUE}:tail`)} y ${b64(`u:${VALUE}`)} z`;
    const whole = scrubText(body, forms);
    const streamed = await text(
      Readable.from([...Buffer.from(body)].map((b) => Buffer.from([b]))).pipe(new ScrubStream(forms)),
    );
    expect(streamed).toBe(whole);
    for (const word of streamed.split(" ")) expect(leaks(Buffer.from(word, "base64").toString("latin1"))).toEqual([]);
  });

  it("keeps the whole base64 of the value exact (it decodes to the placeholder), and leaves unrelated base64 alone", () => {
    expect(scrubText(b64(VALUE), forms)).toBe(b64(PLACEHOLDER));
    const other = b64("nothing secret in here at all, just text");
    expect(scrubText(other, forms)).toBe(other);
  });

  it("headerForms: the credential the proxy produced is also found without its scheme", () => {
    const produced = `Basic ${b64(`x:${VALUE}`)}`;
    const sent = `Basic ${b64(`x:${PLACEHOLDER}`)}`;
    const replaced = scrubText(`cred=${b64(`x:${VALUE}`)} header=${produced}`, headerForms(produced, sent));
    expect(replaced).toBe(`cred=${b64(`x:${PLACEHOLDER}`)} header=${sent}`);
    expect(headerForms(VALUE, PLACEHOLDER)).toEqual([{ find: VALUE, replace: PLACEHOLDER }]);
  });
});

describe("secretForms: a value as the common encoders escape it", () => {
  const VALUE = String.raw`Pa"ss\w0<rd>&'/+ x=REAL`;
  const PLACEHOLDER = "sandbox-run-placeholder-ODD-00112233445566778899aabbccddeeff";
  const forms = secretForms(VALUE, PLACEHOLDER);
  const u = (upper: boolean) => (c: string) =>
    `\\u00${upper ? c.charCodeAt(0).toString(16).toUpperCase() : c.charCodeAt(0).toString(16)}`;
  const json = JSON.stringify(VALUE).slice(1, -1);
  const pct = (upper: boolean) =>
    [...VALUE]
      .map((c) => {
        const code = c.charCodeAt(0).toString(16);
        return /[A-Za-z0-9\-._~]/.test(c) ? c : `%${upper ? code.toUpperCase() : code}`;
      })
      .join("");
  const html = (apos: string, quot = "&quot;") =>
    VALUE.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, quot).replace(/'/g, apos);
  /** What an upstream may echo the value as, each written by the encoder named. */
  const echoed: Record<string, string> = {
    "Node/Python JSON": json,
    "PHP JSON (\\/)": json.replace(/\//g, "\\/"),
    "Go JSON": json.replace(/[<>&]/g, u(false)),
    "Go JSON, upper-case hex": json.replace(/[<>&]/g, u(true)),
    Gson: json.replace(/[<>&=']/g, u(false)),
    ".NET JSON": JSON.stringify(VALUE)
      .slice(1, -1)
      .replace(/\\"/g, '"')
      .replace(/["<>&'+`]/g, u(true)),
    "every punctuation as \\u00xx": [...VALUE]
      .map((c) => (c === "\\" ? "\\\\" : /[A-Za-z0-9]/.test(c) ? c : u(false)(c)))
      .join(""),
    encodeURIComponent: encodeURIComponent(VALUE),
    "percent, lower-case hex": pct(false),
    "percent, upper-case hex": pct(true),
    "form encoding": new URLSearchParams({ v: VALUE }).toString().slice(2),
    "HTML &#39;": html("&#39;"),
    "HTML &#x27;": html("&#x27;"),
    "HTML (Go) &#34;": html("&#39;", "&#34;"),
    "HTML text": VALUE.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"),
  };

  const unescapeDash = (s: string) => s.replace(/\\u002d/gi, "-");

  it("finds each form, and leaves the placeholder in its place written the same way", () => {
    for (const [encoder, form] of Object.entries(echoed)) {
      expect(form, encoder).not.toBe(VALUE);
      const out = scrubText(`before ${form} after`, forms);
      // (the encoder that escapes every punctuation character writes the placeholder's "-" as \u002d)
      expect(unescapeDash(out), encoder).toBe(`before ${PLACEHOLDER} after`);
    }
  });

  it("lists only forms that differ from the value, each once", () => {
    const finds = forms.map((f) => f.find);
    expect(new Set(finds).size).toBe(finds.length);
    expect(finds.filter((f) => f === VALUE)).toHaveLength(1);
    // A value no encoder escapes has no escaped forms: the value and its base64 alone.
    expect(secretForms("ghpREALtoken0123456789", "P-1234567890").map((f) => f.find)).toHaveLength(5);
  });

  it("finds every form split across two chunks at every place, and one byte at a time", async () => {
    const body = Object.values(echoed).join(" | ");
    const expected = Object.values(echoed)
      .map(() => PLACEHOLDER)
      .join(" | ");
    const run = (chunks: Buffer[]) => text(Readable.from(chunks).pipe(new ScrubStream(forms)));
    const bytes = Buffer.from(body);
    expect(unescapeDash(await run([...bytes].map((b) => Buffer.from([b]))))).toBe(expected);
    for (let cut = 1; cut < bytes.length; cut++) {
      expect(unescapeDash(await run([bytes.subarray(0, cut), bytes.subarray(cut)]))).toBe(expected);
    }
  });

  it("holds back only what may begin a match: a chunk that cannot is passed on whole", async () => {
    const stream = new ScrubStream(forms);
    const out: string[] = [];
    stream.on("data", (c: Buffer) => out.push(c.toString()));
    stream.write(Buffer.from('data: {"text":"hello"}\n\n'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(out.join("")).toBe('data: {"text":"hello"}\n\n');
    // The start of a form waits for what follows; here it is not the value after all.
    stream.write(Buffer.from("x Pa"));
    await new Promise((resolve) => setImmediate(resolve));
    expect(out.join("")).toBe('data: {"text":"hello"}\n\nx ');
    stream.end(Buffer.from("ssword"));
    await new Promise((resolve) => stream.on("end", resolve));
    expect(out.join("")).toBe('data: {"text":"hello"}\n\nx Password');
  });

  it("with many secrets (50 of 40 characters, 1 MiB in 16 KiB chunks) finds each one, also across a chunk's end", async () => {
    // What it costs is the bench's to measure, never a test's (about 60 ms here, 1,100 forms).
    const values = Array.from({ length: 50 }, (_, i) => `S${i}"\\<&>'/+=-${"k".repeat(20)}${i}REAL`);
    const all = values.flatMap((value, i) => secretForms(value, `placeholder-${i}`));
    // Secret i starts 20 bytes before the end of chunk i: every one of them is split between two chunks.
    const whole = Buffer.from(`${"x".repeat(16 * 1024 - 1)}\n`.repeat(64));
    for (const [i, value] of values.entries()) whole.write(value, (i + 1) * 16 * 1024 - 20, "latin1");
    const chunks = Array.from({ length: 64 }, (_, i) => whole.subarray(i * 16 * 1024, (i + 1) * 16 * 1024));
    const out = await text(Readable.from(chunks).pipe(new ScrubStream(all)));
    for (const [i, value] of values.entries()) {
      expect(out.includes(value), `secret ${i} left`).toBe(false);
      expect(out.includes(`placeholder-${i}`), `placeholder ${i} missing`).toBe(true);
    }
  });
});
