// What `sandbox-run show` reads from a record and makes of it, without a browser: the capped,
// no-follow reader and its checksum verdict, the page's data from records of every kind (failed,
// unknown fields, older format, hand-made), the patch's files, the size budget, the schema check.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { buildRunView } from "../../src/show/build-run-view.js";
import { embeddedJson } from "../../src/show/embedded-json.js";
import { markdownSummary } from "../../src/show/markdown-summary.js";
import { renderPage } from "../../src/show/page-html.js";
import { patchView } from "../../src/show/patch-view.js";
import { RecordReader } from "../../src/show/record-reader.js";
import { checkResult } from "../../src/show/schema-check.js";
import { cut, TextBudget } from "../../src/show/text-budget.js";
import { rehash } from "../support/record-files.js";
import { event, tempDir, turnEvents, writeRecord } from "../support/show-records.js";

const build = (dir: string) => buildRunView(dir, { madeBy: "sandbox-run test" });

describe("the record reader", () => {
  it("checks every file against SHA256SUMS, reporting instead of refusing", () => {
    const dir = writeRecord(path.join(tempDir("show-reader-"), "r"), {});
    const reader = RecordReader.open(dir);
    expect(reader.file("meta.json")?.text).toContain('"format": 2');
    expect(reader.integrity()).toMatchObject({ state: "ok", problems: [] });
    reader.close();

    fs.appendFileSync(path.join(dir, "prompt.txt"), " and also delete everything");
    fs.writeFileSync(path.join(dir, "extra.txt"), "planted");
    fs.rmSync(path.join(dir, "changes.patch"));
    fs.writeFileSync(path.join(dir, "run.html"), "a page show wrote earlier: not part of the record");
    const again = RecordReader.open(dir);
    expect(again.integrity()).toEqual({
      state: "mismatch",
      matched: expect.any(Number),
      problems: [
        "extra.txt is not listed in SHA256SUMS",
        "prompt.txt does not match its sha256 in SHA256SUMS",
        "changes.patch is listed in SHA256SUMS but missing",
      ],
    });
    again.close();
  });

  it("a line of more JSON values than it parses is left out like an over-long one (review: 93 MB of {} took 3.2 GB)", () => {
    const dir = writeRecord(path.join(tempDir("show-reader-"), "r"), {});
    fs.appendFileSync(path.join(dir, "events.jsonl"), `{"type":"x","a":[${"{},".repeat(2_100_000)}{}]}\n`);
    rehash(dir);
    const reader = RecordReader.open(dir);
    const seen: string[] = [];
    reader.lines("events.jsonl", {
      line: (text, n) => void seen.push(`line ${n}: ${text.length}`),
      tooLong: (n, bytes) => void seen.push(`too long ${n}: ${bytes}`),
    });
    reader.close();
    expect(seen.at(-1)).toMatch(/^too long \d+: \d{7}$/);
    expect(seen.slice(0, -1).every((line) => line.startsWith("line "))).toBe(true);
  });

  it("reads at most its budget of a record: a file past it is shown up to the cut and named as not checked", () => {
    const dir = writeRecord(path.join(tempDir("show-reader-"), "r"), {});
    fs.writeFileSync(path.join(dir, "result.json"), `"${"x".repeat(300 * 1024)}"`);
    fs.writeFileSync(path.join(dir, "huge.bin"), Buffer.alloc(2 * 1024 * 1024));
    rehash(dir);
    const budget = 256 * 1024;
    const reader = RecordReader.open(dir, { maxEntries: 64, maxReadBytes: budget });
    expect(reader.file("meta.json")?.text).toContain('"format": 2');
    const result = reader.file("result.json");
    expect(result!.text.length).toBeGreaterThan(0);
    expect(result!.text.length).toBeLessThan(budget);
    const { state, problems } = reader.integrity();
    expect(state).toBe("mismatch");
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /^result\.json was cut after [\d.]+ KiB: show reads at most 256 KiB of a record, so it is not checked against SHA256SUMS$/,
        ),
        "huge.bin was not read: show reads at most 256 KiB of a record, so it is not checked against SHA256SUMS",
      ]),
    );
    reader.close();
  });

  it("looks at no more names than a record has room for: past that only a record's own files are read", () => {
    const dir = writeRecord(path.join(tempDir("show-reader-"), "r"), {});
    for (let i = 0; i < 40; i++) fs.writeFileSync(path.join(dir, `planted-${i}`), "x");
    const reader = RecordReader.open(dir, { maxEntries: 30, maxReadBytes: 1 << 30 });
    expect(reader.file("meta.json")?.text).toContain('"format": 2');
    const { problems } = reader.integrity();
    expect(problems).toContain(
      "the folder holds more than 30 entries (a record has about a dozen): only the files a record has are read",
    );
    expect(problems.some((p) => p.startsWith("planted-"))).toBe(false);
    reader.close();
  });

  it("never follows a link, never blocks on a FIFO, and says so", () => {
    const dir = writeRecord(path.join(tempDir("show-reader-"), "r"), {});
    const secret = path.join(path.dirname(dir), "secret.txt");
    fs.writeFileSync(secret, "host secret");
    fs.rmSync(path.join(dir, "result.json"));
    fs.symlinkSync(secret, path.join(dir, "result.json"));
    fs.rmSync(path.join(dir, "prompt.txt"));
    execFileSync("mkfifo", [path.join(dir, "prompt.txt")]);
    // A device (a record extracted as root may hold one) is never opened: this one has no driver,
    // so an open would have failed with ENXIO and said "cannot be read".
    fs.rmSync(path.join(dir, "schema.json"), { force: true });
    execFileSync("mknod", [path.join(dir, "schema.json"), "c", "240", "7"]);
    const reader = RecordReader.open(dir);
    expect(reader.file("result.json")).toBeUndefined();
    expect(reader.file("prompt.txt")).toBeUndefined();
    expect(reader.file("schema.json")).toBeUndefined();
    expect(reader.integrity().problems).toEqual(
      expect.arrayContaining([
        "result.json is a symbolic link (not followed)",
        "prompt.txt is not a regular file (not read)",
        "schema.json is not a regular file (not read)",
      ]),
    );
    reader.close();
  });

  it("keeps a file up to its cap and says how much is left out; no SHA256SUMS means unchecked", () => {
    const dir = writeRecord(path.join(tempDir("show-reader-"), "r"), { prompt: "p".repeat(5000) });
    fs.rmSync(path.join(dir, "SHA256SUMS"));
    const reader = RecordReader.open(dir);
    expect(reader.file("prompt.txt", 1000)).toEqual({ text: "p".repeat(1000), omittedBytes: 4000 });
    expect(reader.integrity().state).toBe("unchecked");
    reader.close();
  });

  it("refuses a folder that is no record, and a file, with what to do", () => {
    const dir = tempDir("show-reader-");
    expect(() => RecordReader.open(dir)).toThrow(/does not look like a run record/);
    fs.writeFileSync(path.join(dir, "f"), "x");
    expect(() => RecordReader.open(path.join(dir, "f"))).toThrow(/is a file, not a run record folder/);
    expect(() => RecordReader.open(path.join(dir, "missing"))).toThrow(/Cannot read the run record .*ENOENT/);
  });

  it("splits JSONL on LF only, strips one CR, and gives a last unterminated line", () => {
    const dir = writeRecord(path.join(tempDir("show-reader-"), "r"), {});
    fs.writeFileSync(path.join(dir, "events.jsonl"), "a\r\nb\u2028c\n\nd");
    rehash(dir);
    const reader = RecordReader.open(dir);
    const lines: string[] = [];
    reader.lines("events.jsonl", { line: (t) => void lines.push(t), tooLong: () => {} });
    expect(lines).toEqual(["a", "b\u2028c", "", "d"]);
    reader.close();
  });
});

describe("the page's data", () => {
  it("a failed run: the error with its hint, the limit, the turns that ran, unknown fields listed", async () => {
    const dir = writeRecord(path.join(tempDir("show-view-"), "r"), {
      error: {
        code: "limit",
        message: "The sandbox asked for model response 3.",
        hint: "Raise maxTurns.",
        limit: "turns",
      },
      meta: {
        runId: "abcdefabcdef",
        warm: true,
        handBack: { mode: "branch", branch: "sandbox-run/abc", commit: "1234567" },
        futureField: { x: 1 },
      },
      policy: {
        name: "p",
        network: "allowlist",
        runtime: "runsc",
        secrets: { GH_TOKEN: { hosts: ["api.github.com"] } },
      },
      events: [
        event(0, 1, "sandbox", "engine.chosen", { engine: "local", address: "unix:///var/run/docker.sock" }),
        event(1, 2, "sandbox", "container.created", {}),
        event(2, 3, "sandbox", "container.started", {}),
        ...turnEvents(
          { seq: 3, time: 10 },
          {
            text: "Let me look.",
            tools: [{ id: "c1", name: "bash", args: { command: "ls\nrm -rf x" }, output: "a\nb" }],
          },
        ),
        event(20, 100, "sandbox", "egress.denied", {
          host: "evil.example",
          port: 443,
          reason: "not allowed",
          repeated: 4,
        }),
        event(21, 101, "sandbox", "egress.allowed", { host: "api.github.com", port: 443, reason: "ok" }),
        event(22, 102, "sandbox", "egress.injected", {
          host: "api.github.com",
          port: 443,
          reason: "ok",
          secret: "GH_TOKEN",
        }),
        event(23, 103, "sandbox", "gateway.refused", {
          method: "POST",
          path: "/x",
          status: 429,
          reason: "turn-budget",
          refused: "over",
        }),
        event(24, 104, "sandbox", "gateway.refused", {
          method: "POST",
          path: "/x",
          status: 429,
          reason: "turn-budget",
          refused: "over",
        }),
        event(25, 105, "sandbox", "replay.policy-differs", { difference: "network open vs none" }),
        event(26, 106, "sandbox", "limit.tripped", { code: "limit", limit: "turns", message: "over the budget" }),
        event(27, 107, "sandbox", "run.failed", { code: "limit", limit: "turns", message: "over the budget" }),
        "not an event",
      ],
    });
    fs.appendFileSync(path.join(dir, "events.jsonl"), "{not json\n");
    rehash(dir);
    const { view, heldTrees } = await build(dir);
    expect(view.outcome).toEqual({
      state: "failed",
      error: {
        code: "limit",
        message: { text: "The sandbox asked for model response 3." },
        hint: { text: "Raise maxTurns." },
        limit: "turns",
      },
    });
    expect(view.facts).toEqual(
      expect.arrayContaining([
        { label: "run", value: "abcdefabcdef" },
        { label: "warm or cold", value: "warm (a pre-started container)" },
        { label: "hand-back", value: "branch, branch sandbox-run/abc, commit 1234567" },
        { label: "engine", value: "local", note: "unix:///var/run/docker.sock" },
        { label: "runtime", value: "runc" },
      ]),
    );
    expect(view.turns).toHaveLength(1);
    expect(view.turns[0]).toMatchObject({
      text: { text: "Let me look." },
      tools: [{ name: "bash", summary: "ls …", output: { text: "a\nb" } }],
    });
    expect(view.decisions.egress).toEqual([
      expect.objectContaining({ host: "evil.example", port: "443", denied: 5, allowed: 0, reasons: ["not allowed"] }),
      expect.objectContaining({ host: "api.github.com", allowed: 1, injected: 1, secrets: ["GH_TOKEN"] }),
    ]);
    expect(view.decisions.secrets).toEqual([{ name: "GH_TOKEN", hosts: ["api.github.com"], injected: 1 }]);
    expect(view.decisions.refusals).toEqual([expect.objectContaining({ reason: "turn-budget", count: 2 })]);
    expect(view.decisions.limits).toEqual([{ code: "limit", limit: "turns", message: "over the budget" }]);
    expect(view.otherEvents).toEqual([expect.objectContaining({ type: "replay.policy-differs", count: 1 })]);
    expect(view.otherMeta).toEqual([{ key: "futureField", value: { text: '{\n  "x": 1\n}' } }]);
    expect(view.pageNotes).toContain("2 lines of events.jsonl are not events: not shown.");
    expect(view.timeline.rows.map((r) => r.name)).toEqual(["phases", "turns", "tools", "failure"]);
    expect(heldTrees).toEqual(["/nonexistent/workspace"]);
  });

  it("names the platform a run's plan asked for (an emulated arm64 run), and none where the plan left it to the engine", async () => {
    const emulated = writeRecord(path.join(tempDir("show-view-"), "r"), {
      plan: { runId: "0123456789ab", runtime: "runc", workspaceMode: "copy", platform: "linux/arm64" },
    });
    expect((await build(emulated)).view.facts).toContainEqual({ label: "platform", value: "linux/arm64" });
    const native = writeRecord(path.join(tempDir("show-view-"), "r"), {});
    expect((await build(native)).view.facts.map((f) => f.label)).not.toContain("platform");
  });

  it("a format 1 record (no model traffic, no meta fields): a page that says what is missing", async () => {
    const dir = writeRecord(path.join(tempDir("show-view-"), "r"), { meta: { format: undefined } });
    fs.rmSync(path.join(dir, "exchanges.jsonl"));
    fs.rmSync(path.join(dir, "replay.json"));
    rehash(dir);
    const { view } = await build(dir);
    expect(view.outcome.state).toBe("ok");
    expect(view.integrity.state).toBe("ok");
    expect(view.pageNotes.join("\n")).toContain("has no exchanges.jsonl");
    expect(view.facts).toContainEqual({ label: "record format", value: "1" });
  });

  it("a record of a newer format than this version reads: the page and the summary say so first, naming the version that wrote it (review, session 33: shown as any other run)", async () => {
    const dir = writeRecord(path.join(tempDir("show-view-"), "r"), {
      meta: { format: 3, versions: { sandboxRun: "0.2.0\u001b[31m", pi: "1.7.0", node: "24" } },
    });
    const { view } = await build(dir);
    expect(view.newerFormat).toMatch(
      /^This record has format 3, newer than this sandbox-run reads \(2\); it was written by sandbox-run 0\.2\.0.*: show it with that version or a newer one\.$/,
    );
    expect(markdownSummary(view)).toContain("> ⚠️ `This record has format 3");
    expect(markdownSummary(view)).toContain("show it with that version or a newer one.`");
    expect(renderPage(view)).toContain(embeddedJson(view.newerFormat));
    const current = await build(writeRecord(path.join(tempDir("show-view-"), "r"), {}));
    expect(current.view.newerFormat).toBeUndefined();
  });

  it("an entry the check after the restore still found is counted and named as not restored (review, session 29: the summary said 0)", async () => {
    const dir = writeRecord(path.join(tempDir("show-remaining-"), "r"), {
      error: { code: "policy-violation", message: "The agent changed protected paths" },
      events: [
        event(1, 10, "sandbox", "policy.violation", {
          count: 2,
          protectedPaths: [
            { path: "made_\uFFFD.txt", change: "unreadable", rule: "walk" },
            { path: ".envrc", change: "created", rule: "protected-path" },
          ],
          restore: {
            reverted: [],
            removed: [".envrc"],
            modes: [],
            notRestored: [],
            clean: false,
            remaining: [{ path: "made_\uFFFD.txt", change: "unreadable", rule: "walk" }],
          },
        }),
      ],
    });
    const { view } = await build(dir);
    expect(view.decisions.restore?.remaining).toEqual(["made_\uFFFD.txt: still unreadable"]);
    const summary = markdownSummary(view);
    expect(summary).toContain("restored: 1; not restored: 1");
    expect(summary).toContain("NOT restored: `made_\uFFFD.txt: still unreadable`");
  });

  it("the page and the job summary say what the CLI's note says: files, links or names the run left that host tools read, follow or misread (red-team review, round 3, session 41)", async () => {
    const dir = writeRecord(path.join(tempDir("show-host-run-"), "r"), {
      events: [
        event(1, 10, "sandbox", "workspace.host-run-files", {
          reason: "host-run file changed",
          count: 3,
          files: [
            { path: "dist/notes.txt", change: "created", why: 'a link to "/home/runner/.git-credentials"' },
            { path: ".npmrc", change: "modified", why: "npm reads it" },
          ],
        }),
      ],
    });
    const { view } = await build(dir);
    expect(view.decisions.warnings).toEqual([expect.stringContaining("dist/notes.txt (created: a link to")]);
    const summary = markdownSummary(view);
    expect(summary).toContain("⚠️");
    expect(summary).toContain("/home/runner/.git-credentials");
    expect(summary).toContain("and 1 more");
  });

  it("keeps the host's warnings, the host-run one first, when Pi's events (which the sandbox can forge) used up the page's outline (second fix review, round 3, session 41)", async () => {
    const hostRun = event(100_000, 1e9, "sandbox", "workspace.host-run-files", {
      reason: "host-run file changed",
      count: 1,
      files: [{ path: "dist/notes.txt", change: "created", why: 'a link to "/etc/shadow"' }],
    });
    const stale = event(99_999, 1e9, "sandbox", "image.stale", { warning: "the image is stale" });
    const dir = writeRecord(path.join(tempDir("show-host-run-flood-"), "r"), {
      events: [...floodEvents(5, 500), stale, hostRun],
    });
    const { view } = await buildRunView(dir, { madeBy: "sandbox-run test", outlineBytes: 50_000 });
    expect(view.pageNotes.join(" ")).toContain("more are not drawn");
    expect(view.decisions.warnings[0]).toContain("dist/notes.txt (created: a link to");
    expect(view.decisions.warnings).toContain("the image is stale");
    expect(markdownSummary(view)).toContain("/etc/shadow");
  });

  it("the job summary lists the run's changed files when the patch is empty (hand-back branch: the branch holds them)", async () => {
    const dir = writeRecord(path.join(tempDir("show-branch-"), "r"), {
      meta: {
        handBack: "branch",
        changedFiles: {
          created: ["src/new.ts"],
          modified: [".github/actions/setup/action.yml", "package.json"],
          deleted: ["old.txt"],
        },
      },
    });
    const summary = markdownSummary((await build(dir)).view);
    expect(summary).toContain("### Changed files (4)");
    expect(summary).toContain("| `.github/actions/setup/action.yml` | modified |");
    expect(summary).toContain("| `src/new.ts` | added |");
    expect(summary).toContain("| `old.txt` | deleted |");
    expect(summary).not.toContain("did not change");
    // Nothing changed, nothing listed: as before.
    const none = markdownSummary((await build(writeRecord(path.join(tempDir("show-branch-"), "r"), {}))).view);
    expect(none).toContain("The workspace did not change.");
  });

  it("counts every changed file and shows what the patch left out (review: files past the caps, or over 4 MiB, vanished from the page and the summary)", async () => {
    const part = (name: string) =>
      `diff --git a/${name} b/${name}\nnew file mode 100644\n--- /dev/null\n+++ b/${name}\n@@ -0,0 +1 @@\n+x\n`;
    const names = [
      ...Array.from({ length: 4499 }, (_, i) => `gen/f${String(i).padStart(4, "0")}.txt`),
      "zzz-backdoor.sh",
    ];
    const dir = writeRecord(path.join(tempDir("show-caps-"), "r"), {
      patch: names.map(part).join(""),
      extra: { "changes-notes.txt": "after: dist/index.js skipped: 4718695 bytes (more than 4 MiB)\n" },
    });
    const { view } = await build(dir);
    expect(view.changes.totalFiles).toBe(4500);
    expect(view.changes.files.length + view.changes.omittedFiles.length).toBeLessThan(4500);
    const summary = markdownSummary(view);
    expect(summary).toContain("### Changed files (4500)");
    expect(summary).toContain(`… and ${4500 - 50} more files`);
    expect(summary).toContain("**Not in the patch**");
    expect(summary).toContain("`after: dist/index.js skipped: 4718695 bytes (more than 4 MiB)`");
    // The run's own lists, cut at 10,000 by the run: the counts it gave are what the views say.
    const branch = writeRecord(path.join(tempDir("show-caps-"), "r"), {
      meta: {
        handBack: "branch",
        changedFiles: {
          created: Array.from({ length: 2500 }, (_, i) => `c${i}`),
          modified: [],
          deleted: [],
          truncated: { created: 12_345, modified: 0, deleted: 0 },
        },
      },
    });
    const branchView = (await build(branch)).view;
    expect(branchView.changes.changedFiles?.counts).toEqual({ created: 12_345, modified: 0, deleted: 0 });
    expect(markdownSummary(branchView)).toContain("### Changed files (12345)");
    expect(markdownSummary(branchView)).toContain(`… and ${12_345 - 50} more files.`);
  });

  it("checks the result against the schema again", async () => {
    const schema = { type: "object", properties: { n: { type: "number" } }, required: ["n"] };
    const good = await build(writeRecord(path.join(tempDir("show-view-"), "r"), { schema, result: { n: 1 } }));
    expect(good.view.result?.check).toEqual({ state: "valid" });
    const bad = await build(writeRecord(path.join(tempDir("show-view-"), "r"), { schema, result: { n: "one" } }));
    expect(bad.view.result?.check).toMatchObject({ state: "invalid", detail: expect.stringContaining("n:") });
  });

  it("JSON nested too deeply for the stack (result, schema, an event): a page that says so, never a crash", async () => {
    const deep = (open: string, leaf: string, close: string) =>
      `${open.repeat(100_000)}${leaf}${close.repeat(100_000)}`;
    const arrays = await build(
      writeRecord(path.join(tempDir("show-deep-"), "r"), { extra: { "result.json": deep("[", "", "]") } }),
    );
    expect(arrays.view.result?.value.text).toBe("result.json nests deeper than 256 levels: not shown");
    expect(arrays.view.pageNotes).toContain("result.json nests deeper than 256 levels: not shown.");
    expect(renderPage(arrays.view)).toContain("nests deeper than 256 levels");
    expect(markdownSummary(arrays.view)).toContain("nests deeper than 256 levels");

    const objects = await build(
      writeRecord(path.join(tempDir("show-deep-"), "r"), {
        schema: { type: "object" },
        extra: { "result.json": deep('{"a":', "1", "}") },
      }),
    );
    expect(objects.view.result?.check).toEqual({
      state: "not-checked",
      detail: "result.json nests deeper than 256 levels: not shown",
    });

    // Events are not read as whole files: a deep line is parsed, and shown as a note where it is drawn.
    const lines = [
      ...turnEvents({ seq: 0, time: 0 }, { tools: [{ id: "c1", name: "bash", args: "DEEP", output: "ok" }] }),
      event(9, 100, "sandbox", "newer.event", { nested: "DEEP" }),
    ].map((e) => JSON.stringify(e).replaceAll('"DEEP"', deep('{"a":', "1", "}")));
    const events = await build(
      writeRecord(path.join(tempDir("show-deep-"), "r"), { extra: { "events.jsonl": `${lines.join("\n")}\n` } }),
    );
    const deepArgs = JSON.parse(deep('{"a":', "1", "}")) as unknown;
    expect(events.view.turns[0]!.tools[0]!.args.text).toBe("(a value nested too deeply to show)");
    expect(events.view.otherEvents[0]!.data.text).toBe("(a value nested too deeply to show)");
    expect(() => renderPage(events.view)).not.toThrow();

    expect(await checkResult({ type: "object" }, deepArgs)).toEqual({
      state: "not-checked",
      detail: expect.stringMatching(/^the result or schema cannot be written out: Maximum call stack size exceeded/),
    });
  });

  it("stops a schema check that would not end (a pattern a record chose)", async () => {
    const schema = { type: "object", properties: { s: { type: "string", pattern: "^(a+)+$" } } };
    const check = await checkResult(schema, { s: `${"a".repeat(40)}!` }, 500);
    expect(check).toEqual({ state: "not-checked", detail: expect.stringContaining("did not finish in 0.5 s") });
  });
});

describe("the patch's files", () => {
  it("names, kinds and counts, quoted names decoded", () => {
    const patch = [
      "diff --git a/src/a.ts b/src/a.ts",
      "index 1..2 100644",
      "--- a/src/a.ts",
      "+++ b/src/a.ts",
      "@@ -1,2 +1,2 @@",
      "-old",
      "--- not a header inside a hunk",
      "+new",
      " same",
      'diff --git "a/caf\\303\\251 \\"x\\".txt" "b/caf\\303\\251 \\"x\\".txt"',
      "new file mode 100644",
      "--- /dev/null",
      '+++ "b/caf\\303\\251 \\"x\\".txt"',
      "@@ -0,0 +1 @@",
      "+hi",
      "diff --git a/gone.txt b/gone.txt",
      "deleted file mode 100644",
      "--- a/gone.txt",
      "+++ /dev/null",
      "@@ -1 +0,0 @@",
      "-bye",
      "diff --git a/old.txt b/new.txt",
      "similarity index 100%",
      "rename from old.txt",
      "rename to new.txt",
      "diff --git a/img.png b/img.png",
      "Binary files a/img.png and b/img.png differ",
      "",
    ].join("\n");
    const { files } = patchView(patch, new TextBudget());
    expect(
      files.map(({ name, oldName, status, added, removed }) => ({ name, oldName, status, added, removed })),
    ).toEqual([
      { name: "src/a.ts", oldName: undefined, status: "modified", added: 1, removed: 2 },
      { name: 'café "x".txt', oldName: undefined, status: "added", added: 1, removed: 0 },
      { name: "gone.txt", oldName: undefined, status: "deleted", added: 0, removed: 1 },
      { name: "new.txt", oldName: "old.txt", status: "renamed", added: 0, removed: 0 },
      { name: "img.png", oldName: undefined, status: "binary", added: 0, removed: 0 },
    ]);
  });
});

describe("the page's budget", () => {
  it("cuts each text to its cap, then to what is left, then to a preview, then to nothing", () => {
    const budget = new TextBudget(1000, 100);
    expect(budget.take("x".repeat(50), 10)).toEqual({ text: "x".repeat(10), omitted: 40 });
    const second = budget.take("y".repeat(2000), 5000);
    expect(second.text.length).toBeLessThan(1000);
    expect(second.omitted).toBe(2000 - second.text.length);
    const preview = budget.take("z".repeat(2000), 5000);
    expect(preview.text.length).toBeGreaterThan(0);
    expect(preview.text.length).toBeLessThanOrEqual(98);
    budget.take("w".repeat(2000), 5000);
    expect(budget.take("v".repeat(10), 5000)).toEqual({ text: "", omitted: 10 });
    expect(budget.starved).toBe(4);
  });

  it("bounds the page whatever the number of turns, tool calls, spans and decisions (labels of 300 '<')", async () => {
    // Each item's names are short texts of their own (not the budget's long texts): a flood of
    // items with long labels once made a 73 MB page of a 50 MB record. With the pools scaled down
    // (text, previews, bodies, outline, header: 576 KiB in all), the page's data from a 5 MB record
    // must stay within them (and a few KiB of its own fields); a larger record costs no more, since
    // every drawn item is charged. The page is that data in a constant frame.
    const pools = { textBytes: 256 << 10, previewBytes: 64 << 10, bodyBytes: 64 << 10, outlineBytes: 160 << 10 };
    const headerBytes = 32 << 10;
    const dir = writeRecord(path.join(tempDir("show-flood-"), "r"), { events: floodEvents(4, 250) });
    expect(fs.statSync(path.join(dir, "events.jsonl")).size).toBeGreaterThan(5_000_000);
    const { view } = await buildRunView(dir, { madeBy: "sandbox-run test", ...pools, headerBytes });
    const data = Buffer.byteLength(embeddedJson(view));
    expect(data).toBeLessThan(Object.values(pools).reduce((a, b) => a + b, headerBytes) + 16 * 1024);
    expect(data).toBeGreaterThan(pools.outlineBytes); // real content, not an empty page
    expect(renderPage(view)).toContain(embeddedJson(view));
    expect(view.turns.length).toBeGreaterThan(0);
    expect(view.turns[0]!.tools[0]!.name).toBe("<".repeat(300));
    expect(view.pageNotes.join("\n")).toMatch(
      /This page draws at most 160 KiB of turns, tool calls.*: \d+ more are not drawn/,
    );
    expect(view.pageNotes.join("\n")).toMatch(/tool calls are not drawn/);
  });

  it("never splits a surrogate pair", () => {
    expect(cut("ab😀c", 3)).toBe("ab");
    expect(cut("ab😀c", 4)).toBe("ab😀");
  });
});

/** `turns` turns of `tools` tool calls each, every name, id and path 300 '<', and decisions as long. */
function floodEvents(turns: number, tools: number): unknown[] {
  const long = (c: string) => c.repeat(300);
  const events: unknown[] = [];
  let seq = 0;
  for (let t = 0; t < turns; t++) {
    const calls = Array.from({ length: tools }, (_, i) => ({
      id: `${t}-${i}${long("<")}`.slice(0, 300),
      name: long("<"),
      args: { path: long("<") },
      output: "",
    }));
    const turn = turnEvents({ seq, time: t * 1e6 }, { tools: calls });
    seq += turn.length;
    events.push(...turn);
    for (let i = 0; i < tools; i++) {
      const at = t * 1e6 + i;
      events.push(
        event(seq++, at, "sandbox", "gateway.request", { method: long("<"), path: `/${long("<")}`, durationMs: 1 }),
        event(seq++, at, "sandbox", "gateway.refused", {
          reason: long("<"),
          path: `${i}${long("<")}`,
          refused: long("<"),
        }),
        event(seq++, at, "sandbox", "egress.denied", { host: `${t}.${i}${long("<")}`, port: 443, reason: long("<") }),
      );
    }
  }
  return events;
}
