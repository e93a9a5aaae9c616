// Nothing the model or the sandbox chose may act on the operator's terminal (issue 10, item 6):
// the live status line, error reports and a result printed to a terminal show control characters
// escaped.
import { describe, expect, it } from "vitest";
import { type CliIo, liveTerminal, progressTo } from "../../src/cli/cli-io.js";
import { createLiveStatus, fitToColumns } from "../../src/cli/live-status.js";
import { reportError } from "../../src/cli/report-error.js";
import { jsonText, terminalLine, terminalText } from "../../src/cli/terminal-text.js";
import { SandboxRunError } from "../../src/errors.js";
import type { RunEvent } from "../../src/index.js";
import { progressOf } from "../../src/pi/progress.js";
import { violationMessage } from "../../src/workspace/violation-message.js";

const OSC52 = "\x1b]52;c;ZXZpbA==\x07";
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

/** One of Pi's events as the live status gets it (`data` is Pi's JSON line). */
const piEvent = (seq: number, data: { type: string; [key: string]: unknown }): RunEvent => ({
  runId: "r",
  seq,
  time: seq,
  source: "pi",
  type: data.type,
  data: data as Record<string, unknown>,
  progress: progressOf(data),
});

/** One of the host's own (sandbox) events. */
const sandboxEvent = (seq: number, type: string, data: Record<string, unknown>): RunEvent => ({
  runId: "r",
  seq,
  time: seq,
  source: "sandbox",
  type,
  data,
});

/** A CLI io whose stderr is a terminal, and what was written to it. */
function terminalStderr(): { io: CliIo; err: () => string } {
  let err = "";
  const io: CliIo = {
    stdout: () => {},
    stderr: (s) => void (err += s),
    readStdin: async () => undefined,
    env: {},
    stderrIsTty: true,
  };
  return { io, err: () => err };
}

describe("terminal text", () => {
  it("escapes C0, C1, DEL and bidi controls; keeps line feeds and tabs only in multi-line text", () => {
    expect(terminalLine(`a${OSC52}b\u009b\u007f\u202ec\nd\te`)).toBe(
      "a\\x1b]52;c;ZXZpbA==\\x07b\\x9b\\x7f\\u202ec d e",
    );
    expect(terminalText("line 1\r\nline\t2\x1b[2K\n")).toBe("line 1\nline\t2\\x1b[2K\n");
  });

  // Review, session 34: a cached image tar's tags (the writer's choice) reached the Action's log in
  // the refusal, and GitHub's runner read `##[stop-commands]` and `::add-mask::` lines in them.
  it("an error's message and hint on stderr carry no workflow command GitHub's runner would obey", () => {
    const tags = "x ##[stop-commands]attacker, y\n::error file=ci.yml,line=1::owned\n  \t::add-mask::z";
    const shown = terminalStderr();
    reportError(
      new SandboxRunError("image-missing", `The tar names ${tags}: nothing was loaded.`, { hint: `Not ${tags}` }),
      shown.io,
    );
    const lines = shown.err().split("\n");
    expect(lines.some((line) => /^\s*::/.test(line) || line.includes("##["))).toBe(false);
    expect(shown.err()).toContain("#\\x23[stop-commands]attacker");
    expect(shown.err()).toContain("\\x3a:error file=ci.yml,line=1::owned");
    expect(shown.err()).toContain("\\x3a:add-mask::z");
    // A result's text keeps a line that starts with `::` (C++), with only `##[` escaped.
    expect(terminalText("::std::string s;\n##[x]")).toBe("::std::string s;\n#\\x23[x]");
  });

  it("running out of file descriptors is this host's limit, said with what to raise, never 'a bug' (review, session 34)", () => {
    const shown = terminalStderr();
    const error = Object.assign(new Error("EMFILE: too many open files, open '/x/bundle-chunk-1.js'"), {
      code: "EMFILE",
    });
    expect(reportError(error, shown.io)).toBe(2);
    expect(shown.err()).toContain("This process ran out of open files (ulimit -n): raise the limit (`ulimit -n 4096`)");
    expect(shown.err()).not.toContain("bug");
  });

  it("the live status line escapes what tools and the sandbox report", () => {
    let out = "";
    const live = createLiveStatus((s) => (out += s), { color: false, columns: 200 });
    const start = {
      type: "tool_execution_start",
      toolCallId: "t1",
      toolName: `bash${OSC52}`,
      args: { command: "x\x1b[1;1H" },
    };
    const end = { type: "tool_execution_end", toolCallId: "t1", toolName: `bash${OSC52}`, isError: false, result: {} };
    for (const [i, data] of [start, end].entries()) live.onEvent(piEvent(i, data));
    live.onEvent(sandboxEvent(2, "egress.denied", { host: `h${OSC52}` }));
    live.stop();
    // The status line's own sequences are "\r\x1b[K"; nothing else may be a control character.
    const withoutOwn = out.replaceAll("\r\x1b[K", "").replaceAll("\n", "");
    expect(withoutOwn).not.toMatch(CONTROL);
    expect(withoutOwn).toContain("bash\\x1b]52;c;ZXZpbA==\\x07");
    expect(withoutOwn).toContain("egress denied: h\\x1b]52");
  });

  it("the live status line never wraps: cut to fewer cells than the terminal has, wide characters counted as two and colour codes as none (red-team review, round 3, session 41)", () => {
    /** Cells a redraw takes: colour codes none, wide (CJK, fullwidth) characters two. */
    const cellsOf = (text: string) =>
      // biome-ignore lint/suspicious/noControlCharactersInRegex: removing the status line's own colour codes
      [...text.replace(/\x1b\[[0-9;]*m/g, "")].reduce((n, ch) => n + (/[\u1100-\uffff]/.test(ch) ? 2 : 1), 0);
    for (const color of [false, true]) {
      let out = "";
      const live = createLiveStatus((s) => (out += s), { color, columns: 80 });
      const start = {
        type: "tool_execution_start",
        toolCallId: "t1",
        toolName: "bash",
        args: { command: "Ｘ".repeat(60) },
      };
      live.onEvent(piEvent(0, start));
      live.onEvent(
        piEvent(1, { type: "tool_execution_end", toolCallId: "t1", toolName: "bash", isError: false, result: {} }),
      );
      live.onEvent(sandboxEvent(2, "egress.denied", { host: "Ｈ".repeat(100) }));
      live.stop();
      const redraws = out.split("\r\x1b[K").filter((line) => line !== "" && !line.includes("\n"));
      expect(redraws.length).toBeGreaterThan(0);
      for (const line of redraws) expect(cellsOf(line)).toBeLessThan(80);
      // The lines above it too (a finished tool, a denied host): cut, never wrapped to column 0.
      const above = out.split("\r\x1b[K").filter((line) => line.endsWith("\n"));
      expect(above).toHaveLength(2);
      for (const line of above) expect(cellsOf(line.slice(0, -1))).toBeLessThan(80);
      expect(redraws.some((line) => line.includes("…"))).toBe(true);
      // A short line is left whole.
      expect(fitToColumns("● 1.0s thinking", 80)).toBe("● 1.0s thinking");
    }
  });

  it("the live status names a trip as the plain lines do (an interrupt is 'stopped', not a limit), and is not used on TERM=dumb (review, session 33)", () => {
    let out = "";
    const live = createLiveStatus((s) => (out += s), { color: false, columns: 200 });
    for (const [seq, code] of ["aborted", "timeout", "disk"].entries())
      live.onEvent(sandboxEvent(seq, "limit.tripped", { code, message: `m-${code}` }));
    live.stop();
    expect(out).toContain("✗ stopped: m-aborted");
    expect(out).toContain("✗ timeout: m-timeout");
    expect(out).toContain("✗ limit: m-disk");
    expect(liveTerminal({ stderrIsTty: true, env: {} })).toBe(true);
    expect(liveTerminal({ stderrIsTty: true, env: { TERM: "dumb" } })).toBe(false);
    expect(liveTerminal({ stderrIsTty: false, env: {} })).toBe(false);
  });

  it("error reports escape paths the sandbox created, its stderr and the provider's message", () => {
    const { io, err } = terminalStderr();
    reportError(
      new SandboxRunError("limit", `The agent changed .github/x${OSC52}`, { stderrTail: `boom\x1b[2J`, hint: "h" }),
      io,
    );
    expect(err().replaceAll("\n", "")).not.toMatch(CONTROL);
    expect(err()).toContain("The agent changed .github/x\\x1b]52;c;ZXZpbA==\\x07");
    expect(err()).toContain("boom\\x1b[2J");
  });

  it("a failed run's names holding a line break are quoted: none starts a line of its own (review, session 36: a forged `sandbox-run: done` and a `::warning`)", () => {
    const { io, err } = terminalStderr();
    const error = new SandboxRunError("limit", "The agent changed .envrc.", { hint: "Look at it." });
    error.changedFiles = {
      created: ["a\nsandbox-run: done, the workspace is as it was", "b\n::warning title=x::from the sandbox", " c"],
      modified: [],
      deleted: [],
    };
    reportError(error, io);
    const lines = err().split("\n");
    expect(lines.filter((l) => /^(sandbox-run: done|::)/.test(l))).toEqual([]);
    expect(err()).toContain(
      '(+"a\\nsandbox-run: done, the workspace is as it was", +"b\\n::warning title=x::from the sandbox", +" c"; --json lists them)',
    );
  });

  it("a failed run says what it left in the workspace, its names escaped (session 29: only --json said it)", () => {
    const { io, err } = terminalStderr();
    const error = new SandboxRunError("timeout", "The run took longer than 30 s.", { hint: "Raise the timeout." });
    error.changedFiles = {
      created: ["partial.txt", `evil${OSC52}.txt`],
      modified: ["src/index.js"],
      deleted: [],
      truncated: { created: 40, modified: 1, deleted: 0 },
    };
    reportError(error, io);
    expect(err()).toContain(
      '  the run\'s changes stay in the workspace: 41 file(s) (+partial.txt, +"evil\\u001b]52;c;ZXZpbA==\\u0007.txt", ~src/index.js, and 38 more; --json lists them)\n  Raise the timeout.',
    );
    expect(err().replaceAll("\n", "")).not.toMatch(CONTROL);
    // Nothing changed: no such line.
    const quiet = terminalStderr();
    const none = new SandboxRunError("timeout", "The run took longer than 30 s.");
    none.changedFiles = { created: [], modified: [], deleted: [] };
    reportError(none, quiet.io);
    expect(quiet.err()).not.toContain("changes stay");
  });

  it("every default-ignorable character is shown (review: a payload in variation selectors read as nothing)", () => {
    // Variation selectors 1-16 and 17-256, a tag character, Hangul fillers (valid in JavaScript
    // names), the soft hyphen, the combining grapheme joiner.
    const hidden = 'eval(d("\ufe0f\u{e0141}\u{e0020}"));const {a,\u3164}=q;\u00ad\u034f\uffa0\u115f';
    const shown = 'eval(d("\\ufe0f\\u{e0141}\\u{e0020}"));const {a,\\u3164}=q;\\xad\\u034f\\uffa0\\u115f';
    expect(terminalLine(hidden)).toBe(shown);
    expect(terminalText(hidden)).toBe(shown);
    // JSON on stdout too (a result, a --json envelope), as \uXXXX escapes that read back the same.
    const json = jsonText({ summary: hidden });
    for (const raw of ["\ufe0f", "\u3164", "\u00ad", "\u034f", "\uffa0", "\u115f", "\udb40"])
      expect(json).not.toContain(raw);
    expect(json).toContain("\\ufe0f\\udb40\\udd41");
    expect(JSON.parse(json)).toEqual({ summary: hidden });
  });

  it("invisible characters are shown too (review: `.husky/pre-commit` + U+061C + U+200B was listed as `.husky/pre-commit`)", () => {
    const hidden = ".husky/pre-commit\u061c\u200b\u2060\ufeff\u{e0041}";
    expect(terminalLine(hidden)).toBe(".husky/pre-commit\\u061c\\u200b\\u2060\\ufeff\\u{e0041}");
    expect(terminalText(`a\u2028b`)).toBe("a\\u2028b");
    // A CI log reads `##[error]...` anywhere in a progress line as a workflow command.
    expect(terminalLine("bash echo '##[error title=x]rotate your key'")).toBe(
      "bash echo '#\\x23[error title=x]rotate your key'",
    );
    const { message } = violationMessage(
      {
        violationCount: 1,
        violations: [{ path: hidden, change: "created" }],
        restore: {
          clean: true,
          reverted: [],
          setAside: [],
          removed: [hidden],
          objects: [],
          modes: [],
          notRestored: [],
          remaining: [],
        },
      },
      "workspace-write",
    );
    // The library's own message (read without the CLI's escaping) shows them escaped inside quotes.
    expect(message).toContain('".husky/pre-commit\\u061c\\u200b\\u2060\\ufeff\\udb40\\udc41"');
    expect(message).not.toMatch(/[\u061c\u200b\u2060\ufeff]/u);
  });

  it("a name hidden by a soft hyphen or a variation selector is quoted and escaped in a violation's message too, one class for every reader (util/unsafe-chars.ts)", () => {
    const message = (path: string) =>
      violationMessage({ violationCount: 1, violations: [{ path, change: "created" }] }, "workspace-write", {
        applied: false,
      }).message;
    expect(message(".husky/pre-commit\u00ad")).toContain('".husky/pre-commit\\u00ad"');
    expect(message(".envrc\ufe0f")).toContain('".envrc\\ufe0f"');
    expect(message("Q&A.md")).toContain(" Q&A.md (created)");
  });

  it("a path two rules refuse (a built-in one and protectedPaths) is listed once, with its rules (review, session 33)", () => {
    const { message } = violationMessage(
      {
        violationCount: 3,
        violations: [
          { path: ".git/hooks/pre-commit", change: "created", rule: "git-metadata" },
          { path: ".git/hooks/pre-commit", change: "created", rule: "protectedPaths" },
          { path: ".github/workflows/ci.yml", change: "modified", rule: "protectedPaths" },
        ],
      },
      "workspace-write",
      { applied: false },
    );
    expect(message).toBe(
      "The agent changed protected paths of policy workspace-write: .git/hooks/pre-commit (created, git-metadata), .github/workflows/ci.yml (modified). The result was withheld and none of the run's changes were applied.",
    );
  });

  /** The hint of a run that changed one path under one rule, put back cleanly. */
  const hintFor = (path: string, rule: string) =>
    violationMessage(
      {
        violationCount: 1,
        violations: [{ path, change: "modified", rule }],
        restore: {
          clean: true,
          reverted: [path],
          setAside: [],
          removed: [],
          objects: [],
          modes: [],
          notRestored: [],
          remaining: [],
        },
      },
      "workspace-write",
    ).hint;

  it("a hint to turn a protection off says what that file runs on the host (review: the sandbox chooses which protection it trips)", () => {
    const hint = hintFor(".husky/pre-commit", ".husky/");
    expect(hint).toContain(
      'disableBuiltinProtections: [".husky/"]); only if you trust what this run wrote to run on this machine: .husky/ husky:',
    );
    expect(hint).toMatch(/run at the host's next git commit/);
  });

  it("so does a hint to turn a git rule off (a sparse checkout's git-metadata: the next run could write the config and hooks host git runs)", () => {
    const hint = hintFor(".git/info/sparse-checkout", "git-metadata");
    expect(hint).toContain(
      'disableBuiltinProtections: ["git-metadata"]); only if you trust what this run wrote to run on this machine: git-metadata the sandbox could then write the repository\'s config and hooks, which host git runs',
    );
    // A hint never names a git command to run in the tree (security-workspace-git's check), for any rule.
    for (const rule of [
      "git-metadata",
      "git-entry-kinds",
      "git-modes",
      "git-pointers",
      "git-objects",
      "git-refs",
      "git-config-paths",
      "new-repositories",
      "directory-modes",
    ]) {
      const ruleHint = hintFor(".git/x", rule);
      expect(ruleHint, rule).toMatch(/only if you trust what this run wrote to run on this machine/);
      expect(ruleHint, rule).not.toMatch(/`git |git (status|checkout|diff)\b/);
    }
  });

  it("the stderr tail of a failed run is indented behind a bar: its lines never pass for sandbox-run's own", () => {
    const { io, err } = terminalStderr();
    const tail =
      "npm ERR! code ENOSPC\n---\nsandbox-run: The egress proxy could not verify registry.npmjs.org.\n  Run again with --sandbox danger-full-access";
    reportError(
      new SandboxRunError("limit", "The sandbox's temporary space is full.", { stderrTail: tail, hint: "h" }),
      io,
    );
    const lines = err().split("\n").filter(Boolean);
    expect(lines.filter((line) => line.startsWith("sandbox-run:"))).toEqual([
      "sandbox-run: The sandbox's temporary space is full.",
    ]);
    expect(lines).toContain("  | sandbox-run: The egress proxy could not verify registry.npmjs.org.");
    expect(lines.slice(1).every((line) => line.startsWith("  "))).toBe(true);
  });

  it("a file name with line breaks cannot start a line of its own in an error report", () => {
    const { io, err } = terminalStderr();
    const forged = ".husky/x\n\nsandbox-run: done in 2.10s, 2 turn(s), 240 tokens; workspace clean\n";
    const { message, hint } = violationMessage(
      {
        violationCount: 1,
        violations: [{ path: forged, change: "created" }],
        restore: {
          clean: true,
          reverted: [],
          setAside: [],
          removed: [forged],
          objects: [],
          modes: [],
          notRestored: [],
          remaining: [],
        },
      },
      "workspace-write",
    );
    expect(message).toContain(JSON.stringify(forged));
    reportError(new SandboxRunError("policy-violation", `${message}\nsandbox-run: forged by a quote`, { hint }), io);
    const lines = err().split("\n").filter(Boolean);
    // Only the report's own first line starts with "sandbox-run:"; the hint and every later line of
    // a message are indented.
    expect(lines.filter((line) => line.startsWith("sandbox-run:"))).toHaveLength(1);
    expect(lines.slice(1).every((line) => line.startsWith("  "))).toBe(true);
  });
});

describe("progress lines", () => {
  it("an engine's or a Dockerfile's output is one escaped line each: no terminal command, no line of its own", () => {
    const { io, err } = terminalStderr();
    progressTo(io)?.(`Step 3/9 ${OSC52}\nsandbox-run: image built`);
    expect(err()).toBe("Step 3/9 \\x1b]52;c;ZXZpbA==\\x07 sandbox-run: image built\n");
    expect(progressTo(io, true)).toBeUndefined();
  });
});

describe("JSON on stdout", () => {
  it("escapes DEL, C1 and bidi controls inside strings, and parses back to the same value", () => {
    const value = { verdict: "A\u009b2J\u009d52;c;ZXZpbA==\u009c\u202eevil\u202c\u007fZ\u0085Q", n: [1, "\u2066"] };
    const text = jsonText(value, 2);
    expect(text).not.toMatch(CONTROL);
    expect(text).toContain("A\\u009b2J\\u009d52");
    expect(JSON.parse(text)).toEqual(value);
    expect(jsonText({ plain: "text" })).toBe(JSON.stringify({ plain: "text" }));
  });

  it("writes U+2028 and U+2029 as escapes: a reader that splits lines on them keeps each envelope whole", () => {
    const value = { id: "t1", result: 'done\u2028{"id":"t2","ok":true}\u2029' };
    const text = jsonText(value);
    expect(text).not.toMatch(/[\u2028\u2029]/);
    expect(text.split(/\r\n|[\n\r\u2028\u2029]/)).toHaveLength(1);
    expect(JSON.parse(text)).toEqual(value);
    // Invisible characters too, as on a terminal (review: a zero-width space after a hook's name).
    const hidden = { path: ".husky/pre-commit\u200b\u2060\ufeff\u{e0041}" };
    expect(jsonText(hidden)).toBe('{"path":".husky/pre-commit\\u200b\\u2060\\ufeff\\udb40\\udc41"}');
    expect(JSON.parse(jsonText(hidden))).toEqual(hidden);
  });
});
