// `sandbox-run batch`'s tasks file and progress, without an engine: every bad line is reported
// with its number before anything starts; paths in a line are relative to the file; the progress
// is one bar on a terminal and plain lines elsewhere.
import { EventEmitter } from "node:events";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { batchCommand } from "../../src/cli/batch-command.js";
import { refuseUnrunnableBatch } from "../../src/cli/batch-preflight.js";
import { createBatchProgress } from "../../src/cli/batch-progress.js";
import { succeededId, succeededTaskIds } from "../../src/cli/batch-resume.js";
import { parseBatchTasks, readBatchTasks } from "../../src/cli/batch-tasks.js";

describe("the batch tasks file", () => {
  it("reads one task per line, paths relative to the file's folder, blank and // lines skipped", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-batch-"));
    fs.writeFileSync(path.join(dir, "review.schema.json"), JSON.stringify({ type: "object" }));
    const file = path.join(dir, "tasks.jsonl");
    fs.writeFileSync(
      file,
      [
        '{"id": "a", "prompt": "fix it", "cwd": "repo-a"}',
        "",
        "// the second task",
        '{"id": "b.2", "prompt": "review", "cwd": "/abs/repo-b", "schema": "review.schema.json", "policy": "read-only", "model": "p/m", "writable": ["out"], "timeout": 1.5}',
        '{"id": "c", "prompt": "x", "cwd": "c", "schema": {"type": "object"}, "policy": "policies/mine.yaml"}\r',
      ].join("\n"),
    );
    const tasks = readBatchTasks(file);
    expect(tasks.map((t) => [t.id, t.line])).toEqual([
      ["a", 1],
      ["b.2", 4],
      ["c", 5],
    ]);
    expect(tasks[0]!.options).toEqual({ cwd: path.join(dir, "repo-a") });
    expect(tasks[1]!.options).toEqual({
      cwd: "/abs/repo-b",
      schema: { type: "object" },
      configFiles: { schema: path.join(dir, "review.schema.json") },
      policy: "read-only",
      model: "p/m",
      additionalWritableDirectories: [path.join(dir, "out")],
      timeoutMs: 1500,
    });
    expect(tasks[2]!.options.policy).toBe(path.join(dir, "policies/mine.yaml"));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("reports every bad line with its number, and starts nothing", () => {
    const text = [
      '{"id": "a", "prompt": "p", "cwd": "."}',
      "{not json",
      '{"id": "a", "prompt": "p", "cwd": "."}',
      '{"id": "b", "cwd": "."}',
      '{"id": "-x", "prompt": "p", "cwd": ".", "colour": "red"}',
      '{"id": "t", "prompt": "p", "cwd": ".", "timeout": -1}',
      '{"id": "u", "prompt": "p", "cwd": ".", "timeout": 1e20}',
      // A NUL in any path (review, session 35: a policy path with one ended as "a bug in sandbox-run").
      '{"id": "n1", "prompt": "p", "cwd": ".", "policy": "p\\u0000"}',
      '{"id": "n2", "prompt": "p", "cwd": "a\\u0000b"}',
      '{"id": "n3", "prompt": "p", "cwd": ".", "writable": ["w\\u0000"]}',
      '{"id": "n4", "prompt": "p", "cwd": ".", "schema": "s\\u0000.json"}',
    ].join("\n");
    let message = "";
    try {
      parseBatchTasks(text, "/base", "tasks.jsonl");
    } catch (error) {
      message = (error as Error).message;
      expect((error as { code?: string }).code).toBe("usage");
    }
    expect(message).toContain("10 line(s) of tasks.jsonl cannot be run");
    expect(message).toContain("line 2: not JSON");
    expect(message).toContain('line 3: the id "a" is the id of line 1 too');
    expect(message).toContain("line 4: prompt:");
    expect(message).toMatch(/line 5: id: letters, digits.*Unrecognized key/);
    expect(message).toContain("line 6: timeout:");
    expect(message).toContain("line 7: timeout: is longer than a run may last (86400 seconds, a day)");
    expect(message).toContain("line 8: policy: holds a NUL character");
    expect(message).toContain("line 9: cwd: holds a NUL character");
    expect(message).toContain("line 10: writable.0: holds a NUL character");
    expect(message).toMatch(/line 11: schema: .*holds a NUL character/);
    expect(message).toContain("no task was started");
  });

  it("a BOM, blank lines and comment lines (# and //) are no tasks; a file of nothing else holds none (batch then exits 0)", () => {
    const tasks = parseBatchTasks(
      '\uFEFF{"id": "a", "prompt": "p", "cwd": "."}\r\n\n# nightly list\n  // generated\n{"id": "b", "prompt": "q", "cwd": "."}\n',
      "/base",
    );
    expect(tasks.map((t) => [t.id, t.line])).toEqual([
      ["a", 1],
      ["b", 5],
    ]);
    expect(parseBatchTasks("\uFEFF\n# none today\n\n", "/base")).toEqual([]);
  });

  it("a schema file that cannot be read is a usage error too", () => {
    expect(() =>
      parseBatchTasks('{"id": "a", "prompt": "p", "cwd": ".", "schema": "missing.json"}', "/nowhere"),
    ).toThrow(/line 1: .*missing\.json/);
  });
});

describe("a batch none of whose tasks can run", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-batch-"));
  fs.mkdirSync(path.join(dir, "repo"));
  const tasksOf = (...lines: Array<Record<string, unknown>>) =>
    parseBatchTasks(lines.map((l) => JSON.stringify({ prompt: "p", cwd: "repo", ...l })).join("\n"), dir);
  const preflight = (shared: Record<string, unknown>) => ({
    shared,
    env: { ANTHROPIC_API_KEY: "sk-test" },
    what: "tasks.jsonl",
  });
  const refusal = async (promise: Promise<void>) => {
    const error = await promise.then(
      () => undefined,
      (e: unknown) => e as { code?: string; shortMessage?: string; hint?: string },
    );
    expect(error?.code).toBe("usage");
    return error!;
  };

  it("is refused whole when a shared option fails every task: the reason once, its hint, nothing started", async () => {
    const tasks = tasksOf({ id: "a" }, { id: "b" }, { id: "c", policy: "read-only" });
    const error = await refusal(refuseUnrunnableBatch(tasks, preflight({ model: "no-slash" })));
    expect(error.shortMessage).toBe(
      'No task of tasks.jsonl can run: Model "no-slash" is not of the form provider/id (every task).',
    );
    expect(error.hint).toMatch(/^Pass a model as provider\/id.*no task was started\.$/);
    const models = await refusal(
      refuseUnrunnableBatch(tasks, preflight({ model: "p/m", models: path.join(dir, "none.json") })),
    );
    expect(models.shortMessage).toMatch(/^No task of tasks\.jsonl can run: Cannot read the models file .*none\.json/);
  });

  it("says each line's own reason when they differ", async () => {
    const tasks = tasksOf({ id: "a", model: "zz" }, { id: "b", cwd: "gone" }, { id: "c", cwd: "gone" });
    const error = await refusal(refuseUnrunnableBatch(tasks, preflight({ model: "anthropic/m" })));
    expect(error.shortMessage).toContain('line 1: Model "zz" is not of the form provider/id; lines 2, 3: The cwd ');
    expect(error.hint).toBe("Fix the shared options or the lines; no task was started.");
  });

  it("runs when one task can: the others fail in their turn and do not stop it", async () => {
    const tasks = tasksOf({ id: "a", cwd: "gone" }, { id: "b" });
    await expect(refuseUnrunnableBatch(tasks, preflight({ model: "anthropic/m" }))).resolves.toBeUndefined();
  });
});

describe("the batch progress", () => {
  it("writes plain lines when stderr is not a terminal", () => {
    const out: string[] = [];
    let now = 0;
    const progress = createBatchProgress((t) => out.push(t), { total: 2, tty: false, now: () => now });
    progress.started("a");
    now = 1500;
    progress.finished("a", { ok: true, ms: 1500, warm: true });
    progress.note("a warm sandbox was discarded, and another is made: no answer to a ping within 2000 ms");
    progress.started("b\x1b[31m");
    now = 3000;
    progress.finished("b\x1b[31m", { ok: false, ms: 1500, error: "timeout: The run did not finish" });
    progress.stop("sandbox-run: 1 of 2 task(s) succeeded");
    expect(out.join("")).toBe(
      [
        "[   0.0s] a: started",
        "[   1.5s] ok a in 1.5s, warm",
        "[   1.5s] a warm sandbox was discarded, and another is made: no answer to a ping within 2000 ms",
        "[   1.5s] b\\x1b[31m: started",
        "[   3.0s] failed b\\x1b[31m after 1.5s: timeout: The run did not finish",
        "[   3.0s] sandbox-run: 1 of 2 task(s) succeeded",
        "",
      ].join("\n"),
    );
  });

  it("redraws one bar on a terminal: done, failed, running and an ETA", () => {
    const out: string[] = [];
    let now = 0;
    const progress = createBatchProgress((t) => out.push(t), { total: 4, tty: true, columns: 100, now: () => now });
    progress.started("a");
    progress.started("b");
    now = 2000;
    progress.finished("a", { ok: true, ms: 2000 });
    const last = out[out.length - 1]!;
    expect(last).toContain("ok a in 2.0s\n");
    expect(last).toContain("[########----------------------] 1/4 · 1 done · 0 failed · 1 running · ETA 6s");
  });
});

describe("batch --resume: what an earlier batch's stdout says succeeded", () => {
  it("takes the ids of lines with ok: true, and nothing from a failure, a cut-short line or another line", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-resume-"));
    const file = path.join(dir, "results.jsonl");
    fs.writeFileSync(
      file,
      [
        JSON.stringify({ id: "a", ok: true, result: { done: true }, exitCode: 0 }),
        JSON.stringify({ id: "b", ok: false, error: { code: "timeout" }, exitCode: 124 }),
        JSON.stringify({ id: "c", ok: true, result: "x" }).slice(0, 20),
        "sandbox-run: 1 of 3 task(s) succeeded",
        JSON.stringify({ id: 7, ok: true }),
        JSON.stringify({ id: "d", ok: "true" }),
        `${JSON.stringify({ id: "e", ok: true, result: null })}\r`,
        "",
      ].join("\n"),
    );
    expect([...(await succeededTaskIds(file))].sort()).toEqual(["a", "e"]);
    expect(succeededId(JSON.stringify({ id: "b", ok: false }))).toBeUndefined();
  });

  it("counts a file that does not exist yet as no task done, and refuses one it cannot read", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-resume-"));
    expect((await succeededTaskIds(path.join(dir, "first-run.jsonl"))).size).toBe(0);
    const error = await succeededTaskIds(dir).then(
      () => undefined,
      (e: unknown) => e as { code?: string; shortMessage?: string; hint?: string },
    );
    expect(error?.code).toBe("usage");
    expect(error?.shortMessage).toBe(`The --resume file ${dir} cannot be read (not a regular file).`);
    expect(error?.hint).toContain(">> results.jsonl");
  });
});

describe("batch: its own files stay out of the tasks' folders", () => {
  it("the last answer for an id decides, and the results file is read only as a regular file at its name", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-resume-"));
    const file = path.join(dir, "results.jsonl");
    fs.writeFileSync(
      file,
      `${[
        JSON.stringify({ id: "a", ok: true }),
        JSON.stringify({ id: "b", ok: true }),
        JSON.stringify({ id: "a", ok: false, exitCode: 1 }),
      ].join("\n")}\n`,
    );
    expect([...(await succeededTaskIds(file))]).toEqual(["b"]);
    fs.symlinkSync(file, path.join(dir, "link.jsonl"));
    await expect(succeededTaskIds(path.join(dir, "link.jsonl"))).rejects.toThrow(/cannot be read \(ELOOP\)/);
  });

  it("another local user's results file or link is not obeyed: no task skipped, no folder made through the link", async () => {
    expect(process.geteuid?.(), "chown needs root (the unit tests run as root here and on CI)").toBe(0);
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-batch-others-"));
    const shared = path.join(root, "shared");
    fs.mkdirSync(shared, { mode: 0o1777 });
    fs.chmodSync(shared, 0o1777);
    // Their results file, saying task a already succeeded (mode 0666, or theirs at 0644).
    const planted = path.join(shared, "results.jsonl");
    fs.writeFileSync(planted, `${JSON.stringify({ id: "a", ok: true })}\n`, { mode: 0o666 });
    fs.chmodSync(planted, 0o666);
    fs.chownSync(planted, 1500, 1500);
    await expect(succeededTaskIds(planted)).rejects.toThrow(/cannot be read \(it belongs to uid 1500/);
    fs.chownSync(planted, 0, 0);
    await expect(succeededTaskIds(planted)).rejects.toThrow(/other users may write it \(mode 666\)/);
    fs.chmodSync(planted, 0o644);
    expect([...(await succeededTaskIds(planted))]).toEqual(["a"]);
    // Their link to a folder only root may enter: --record-dir through it makes nothing there.
    const victim = path.join(root, "victim");
    fs.mkdirSync(victim, { mode: 0o700 });
    const link = path.join(shared, "recs");
    fs.symlinkSync(victim, link);
    fs.lchownSync(link, 1500, 1500);
    const tasksFile = path.join(root, "tasks.jsonl");
    fs.mkdirSync(path.join(root, "proj"));
    fs.writeFileSync(tasksFile, `${JSON.stringify({ id: "a", prompt: "p", cwd: "proj" })}\n`);
    const io = { stdout: () => {}, stderr: () => {}, readStdin: async () => undefined, env: {}, stderrIsTty: false };
    const error = await batchCommand(
      tasksFile,
      { model: "scripted/x", recordDir: path.join(link, "run1", "x") },
      io,
    ).then(
      () => undefined,
      (e: unknown) => e as { code?: string; shortMessage?: string },
    );
    expect(error).toMatchObject({ code: "usage", shortMessage: expect.stringMatching(/made by uid 1500/) });
    expect(fs.readdirSync(victim)).toEqual([]);
  });

  it("refuses --record-dir or --resume inside any task's workspace or writable folder, before anything is made", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-batch-files-"));
    fs.mkdirSync(path.join(root, "proj", "sub"), { recursive: true });
    fs.mkdirSync(path.join(root, "out"));
    const tasksFile = path.join(root, "tasks.jsonl");
    fs.writeFileSync(
      tasksFile,
      `${[
        JSON.stringify({ id: "a", prompt: "p", cwd: "proj/sub" }),
        JSON.stringify({ id: "b", prompt: "p", cwd: "out", writable: ["proj"] }),
      ].join("\n")}\n`,
    );
    const io = { stdout: () => {}, stderr: () => {}, readStdin: async () => undefined, env: {}, stderrIsTty: false };
    const refused = (flags: Record<string, string>) =>
      batchCommand(tasksFile, { model: "scripted/x", ...flags }, io).then(
        () => undefined,
        (e: unknown) => e as { code?: string; shortMessage?: string },
      );
    const records = path.join(root, "proj", "records");
    expect(await refused({ recordDir: records })).toMatchObject({
      code: "usage",
      shortMessage: expect.stringMatching(/^--record-dir .* lies inside .*proj, a folder task "b" runs in/),
    });
    expect(fs.existsSync(records)).toBe(false);
    expect(await refused({ resume: path.join(root, "proj", "sub", "results.jsonl") })).toMatchObject({
      code: "usage",
      // proj/sub is task a's workspace, inside task b's writable proj: the outer one is named.
      shortMessage: expect.stringMatching(/^--resume .* lies inside .*proj, a folder task "b" runs in/),
    });
    // Through a link of the caller's to the same place: the same refusal.
    fs.symlinkSync(path.join(root, "proj"), path.join(root, "alias"));
    expect(await refused({ recordDir: path.join(root, "alias", "records") })).toMatchObject({ code: "usage" });
    // Through a link inside a task's folder (an earlier run's sandbox swapped a folder for it),
    // wherever it points: the same refusal, and nothing is made where it points.
    const victim = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-batch-victim-"));
    fs.symlinkSync(victim, path.join(root, "proj", "docs"));
    expect(await refused({ recordDir: path.join(root, "proj", "docs", "records") })).toMatchObject({
      code: "usage",
      shortMessage: expect.stringMatching(/^--record-dir .* lies inside .*proj, a folder task "b" runs in/),
    });
    expect(fs.readdirSync(victim)).toEqual([]);
  });

  it("refuses a policy, models or engines file inside another task's folder: that task's sandbox could rewrite it before it is read (review of isolation between runs)", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-batch-config-"));
    for (const dir of ["repo/policies", "other", "own"]) fs.mkdirSync(path.join(root, dir), { recursive: true });
    const policy = JSON.stringify({ extends: "read-only" });
    fs.writeFileSync(path.join(root, "repo/policies/review.json"), policy);
    fs.writeFileSync(path.join(root, "own/policy.json"), policy);
    fs.writeFileSync(path.join(root, "repo/models.json"), "{}");
    const io = { stdout: () => {}, stderr: () => {}, readStdin: async () => undefined, env: {}, stderrIsTty: false };
    const batch = (lines: object[], flags: Record<string, string> = {}) => {
      const file = path.join(root, "tasks.jsonl");
      fs.writeFileSync(file, `${lines.map((l) => JSON.stringify(l)).join("\n")}\n`);
      return batchCommand(file, { model: "scripted/x", ...flags }, io).then(
        () => undefined,
        (e: unknown) => e as { code?: string; shortMessage?: string },
      );
    };
    const fixRepo = { id: "fix-repo", prompt: "p", cwd: "repo" };
    expect(
      await batch([fixRepo, { id: "review", prompt: "p", cwd: "other", policy: "repo/policies/review.json" }]),
    ).toMatchObject({
      code: "usage",
      shortMessage: expect.stringMatching(
        /^the policy of task "review" .*review\.json lies inside .*repo, a folder task "fix-repo" runs in/,
      ),
    });
    expect(
      await batch([fixRepo, { id: "b", prompt: "p", cwd: "other" }], { models: path.join(root, "repo/models.json") }),
    ).toMatchObject({
      code: "usage",
      shortMessage: expect.stringMatching(
        /^--models .*models\.json lies inside .*repo, a folder task "fix-repo" runs in/,
      ),
    });
    expect(
      await batch([fixRepo, { id: "b", prompt: "p", cwd: "other" }], {
        policy: path.join(root, "repo/policies/review.json"),
      }),
    ).toMatchObject({
      code: "usage",
      shortMessage: expect.stringMatching(/^--policy /),
    });
    // The tasks file itself, which a rerun reads again after the first run's sandboxes ran.
    expect(
      await batch([{ id: "fix-root", prompt: "p", cwd: "." }], { resume: path.join(root, "..", "results.jsonl") }),
    ).toMatchObject({
      code: "usage",
      shortMessage: expect.stringMatching(
        /^the tasks file .*tasks\.jsonl lies inside .*, a folder task "fix-root" runs in/,
      ),
    });
    // In a first run too: a tasks file inside a task's folder is that tree's own file (a repository's
    // tasks.jsonl naming other folders and policies), refused as a policy file there is (review,
    // session 44), unless the caller accepts it.
    expect(await batch([{ id: "fix-root", prompt: "p", cwd: "." }])).toMatchObject({
      code: "usage",
      shortMessage: expect.stringMatching(
        /^The tasks file .*tasks\.jsonl lies inside .*, a folder task "fix-root" runs in: that tree would choose every task's folders, policy, model and schema/,
      ),
    });
    const allowed = await batch([{ id: "fix-root", prompt: "p", cwd: "." }], { allowWorkspaceConfig: true as never });
    expect(allowed?.shortMessage ?? "").not.toMatch(/tasks file/);
    // Accepted through the variable too, and said.
    let said = "";
    const viaEnv = await batchCommand(
      path.join(root, "tasks.jsonl"),
      { model: "scripted/x" },
      { ...io, env: { SANDBOX_RUN_ALLOW_WORKSPACE_CONFIG: "1" }, stderr: (text: string) => void (said += text) },
    ).then(
      () => undefined,
      (e: unknown) => e as { shortMessage?: string },
    );
    expect(viaEnv?.shortMessage ?? "").not.toMatch(/tasks file/);
    expect(said).toMatch(
      /^sandbox-run: warning: the tasks file .*tasks\.jsonl lies inside .*, a folder task "fix-root" runs in; read as that tree's own configuration/m,
    );
    // A task's policy in its own folder is the workspace-config rule's (refused when the task starts, unless allowed), not this one's.
    const own = await batch([fixRepo, { id: "own", prompt: "p", cwd: "own", policy: "own/policy.json" }]);
    expect(own?.shortMessage ?? "").not.toMatch(/a folder task .* runs in/);
  });
});

describe("batch: stopped before its first task, and many tasks at once", () => {
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-batch-stop-")));
  const modelsFile = path.join(root, "models.json");
  fs.writeFileSync(
    modelsFile,
    JSON.stringify({
      providers: { scripted: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", models: [{ id: "x" }] } },
    }),
  );
  const capture = () => {
    const out = { stdout: "", stderr: "" };
    const io = {
      stdout: (text: string) => void (out.stdout += text),
      stderr: (text: string) => void (out.stderr += text),
      readStdin: async () => undefined,
      env: {},
      stderrIsTty: false,
    };
    return { io, out };
  };

  it.each([
    ["SIGTERM", 143],
    ["SIGINT", 130],
  ] as const)(
    "%s while the tasks are checked: every task answered as not started with the batch's exit code %i, no sandbox made",
    async (name, code) => {
      fs.mkdirSync(path.join(root, "repo"), { recursive: true });
      const file = path.join(root, `tasks-${name}.jsonl`);
      fs.writeFileSync(file, ["a", "b", "c"].map((id) => JSON.stringify({ id, prompt: "p", cwd: "repo" })).join("\n"));
      const signals = new EventEmitter();
      const { io, out } = capture();
      // The batch reads and checks its tasks first; the signal lands while it awaits the first check
      // (before, Node's default handler ended the process there with no line at all).
      const done = batchCommand(file, { models: modelsFile, model: "scripted/x" }, io, signals);
      signals.emit(name);
      expect(await done).toBe(code);
      const lines = out.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));
      expect(lines.map((l) => [l.id, l.ok, l.exitCode, l.error.code, l.error.message])).toEqual(
        ["a", "b", "c"].map((id) => [id, false, code, "aborted", "Not started: the batch was interrupted."]),
      );
      expect(signals.listenerCount(name)).toBe(0);
    },
  );

  it("thousands of tasks sharing one policy file are checked in one resolution of it, not one scan of all folders per task", async () => {
    fs.copyFileSync(path.join(import.meta.dirname, "../../policies/read-only.json"), path.join(root, "policy.json"));
    const lines = Array.from({ length: 6000 }, (_, i) =>
      JSON.stringify({ id: `t${i}`, prompt: "p", cwd: `w/${i}`, policy: "policy.json" }),
    );
    fs.mkdirSync(path.join(root, "w/0"), { recursive: true });
    const file = path.join(root, "many.jsonl");
    fs.writeFileSync(file, lines.join("\n"));
    const signals = new EventEmitter();
    const { io, out } = capture();
    // Counted, not timed: the checks of all tasks' files resolve the shared file once.
    const lstat = vi.spyOn(fs, "lstatSync");
    try {
      const done = batchCommand(file, { models: modelsFile, model: "scripted/x" }, io, signals);
      signals.emit("SIGINT");
      expect(await done).toBe(130);
    } finally {
      lstat.mockRestore();
    }
    expect(lstat.mock.calls.length).toBeLessThan(200);
    expect(out.stdout.trim().split("\n")).toHaveLength(6000);
  });
});
