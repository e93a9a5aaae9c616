// `sandbox-run batch` as a user runs it (the built CLI, the real engine, real Pi, warm sandboxes):
// one --json envelope per task on stdout as each ends, a failing task does not stop the others,
// exit 0 only when all succeeded, records per task under --record-dir; SIGINT stops the running
// tasks, answers every id, and leaves no container behind.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { LABEL_MANAGED, LABEL_OWNER_PID, LABEL_WARM } from "../../src/sandbox-contract.js";
import {
  bashThenFinal,
  builtCli,
  containerEvents,
  docker,
  makeWorkspace,
  modelsFor,
  startModel,
} from "../support/harness.js";

const server = await startModel();
afterAll(() => server.close());

/** The built CLI as a child process (its pid names its containers). */
function batch(args: string[], options: { onStderr?: (text: string) => void; cwd?: string; input?: string } = {}) {
  return cli(["batch", ...args], options);
}

function cli(
  args: string[],
  options: { onStderr?: (text: string) => void; env?: NodeJS.ProcessEnv; cwd?: string; input?: string } = {},
) {
  const child = spawn(process.execPath, [builtCli, ...args], {
    stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    env: { ...process.env, ...options.env },
    ...(options.cwd ? { cwd: options.cwd } : {}),
  });
  child.stdin?.end(options.input);
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on("data", (c: Buffer) => {
    stderr += c.toString();
    options.onStderr?.(stderr);
  });
  const done = new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on("close", (status) => resolve({ status, stdout, stderr })),
  );
  return { child, done };
}

async function containersOf(pid: number): Promise<string[]> {
  const list = await docker.listContainers({
    all: true,
    filters: { label: [`${LABEL_MANAGED}=true`, `${LABEL_OWNER_PID}=${pid}`] },
  });
  return list.map((c) => c.Id);
}

/** Warm sandboxes the engine created for `pid` from `since` (seconds) until now: docker's event log. */
async function warmSandboxesMadeBy(pid: number, since: number): Promise<number> {
  const created = await containerEvents(since, {
    event: ["create"],
    label: [`${LABEL_MANAGED}=true`, `${LABEL_OWNER_PID}=${pid}`, LABEL_WARM],
  });
  return created.length;
}

function setup(tasks: Array<Record<string, unknown>>, models: string[]) {
  const dir = makeWorkspace({}, "sandbox-run-batch-");
  const file = path.join(dir, "tasks.jsonl");
  fs.writeFileSync(file, `${tasks.map((t) => JSON.stringify(t)).join("\n")}\n`);
  // Outside every task's folder (some tasks run in "."): a models file there would be refused.
  const modelsFile = path.join(makeWorkspace({}, "sandbox-run-batch-models-"), "models.json");
  fs.writeFileSync(modelsFile, JSON.stringify(modelsFor(server, models)));
  return { dir, file, modelsFile };
}

describe("sandbox-run batch", () => {
  it("runs every task in its own sandbox, prints one envelope per task as it ends, and exits 1 when one failed", async () => {
    server.setScript("batch-ok", bashThenFinal("cat task.txt > seen.txt", { done: true }));
    const { dir, file, modelsFile } = setup(
      [
        { id: "first", prompt: "Do it.", cwd: "ws-1", schema: { type: "object" } },
        { id: "missing", prompt: "Do it.", cwd: "no-such-dir" },
        { id: "third", prompt: "Do it.", cwd: "ws-3", schema: "schema.json", timeout: 90 },
      ],
      ["batch-ok"],
    );
    for (const n of [1, 3]) {
      fs.mkdirSync(path.join(dir, `ws-${n}`));
      fs.writeFileSync(path.join(dir, `ws-${n}`, "task.txt"), `task ${n}`);
    }
    fs.writeFileSync(path.join(dir, "schema.json"), JSON.stringify({ type: "object" }));
    const records = path.join(dir, "records");
    const since = Math.floor(Date.now() / 1000) - 1;
    const run = batch([
      file,
      "--models",
      modelsFile,
      "--model",
      "scripted/batch-ok",
      "--concurrency",
      "2",
      "--warm",
      "2",
      "--record-dir",
      records,
    ]);
    const { status, stdout, stderr } = await run.done;
    expect(status, stderr).toBe(1);
    const lines = stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.id).sort()).toEqual(["first", "missing", "third"]);
    const byId = Object.fromEntries(lines.map((l) => [l.id, l]));
    expect(byId.first).toMatchObject({ ok: true, result: { done: true }, exitCode: 0 });
    expect(byId.third).toMatchObject({ ok: true, result: { done: true }, exitCode: 0 });
    expect(byId.missing).toMatchObject({ ok: false, exitCode: 2, error: { code: "usage" } });
    expect(byId.missing.error.message).toContain("no-such-dir");
    expect(byId.first.warm || byId.third.warm).toBe(true);
    for (const n of [1, 3]) expect(fs.readFileSync(path.join(dir, `ws-${n}`, "seen.txt"), "utf8")).toBe(`task ${n}`);
    // stderr is not a terminal here: one plain line per start and end, and a summary.
    expect(stderr).toMatch(/ok first in \d+\.\ds/);
    expect(stderr).toMatch(/failed missing after \d+\.\ds: usage: /);
    expect(stderr).toContain("2 of 3 task(s) succeeded, 1 failed");
    const meta = JSON.parse(fs.readFileSync(path.join(records, "first", "meta.json"), "utf8"));
    expect(meta.warm).toBe(byId.first.warm);
    expect(await containersOf(run.child.pid!)).toEqual([]);
    // Three tasks: the pool (2) made no sandbox beyond them (before warm.calls it made one per
    // claim more, 4 here, and removed the unclaimed ones at the end), but for any it discarded
    // (one that did not answer at its claim is replaced; the batch says so).
    const made = await warmSandboxesMadeBy(run.child.pid!, since);
    const discarded = stderr.match(/a warm sandbox was discarded/g)?.length ?? 0;
    expect(made).toBeGreaterThanOrEqual(1);
    expect(made, stderr).toBeLessThanOrEqual(3 + discarded);
  });

  it("a malformed line is reported with its number and nothing starts (exit 2)", async () => {
    const { file } = setup([{ id: "a", prompt: "p", cwd: "." }], []);
    fs.appendFileSync(file, '{"id": "b", "prompt": 3, "cwd": "."}\n');
    const { status, stdout, stderr } = await batch([file, "--model", "scripted/x"]).done;
    expect(status).toBe(2);
    expect(stdout).toBe("");
    expect(stderr).toContain("line 2: prompt:");
    expect(stderr).toContain("no task was started");
  });

  it("a shared option that fails every task (a typo in --model) is refused whole: exit 2, nothing started", async () => {
    const { dir, file, modelsFile } = setup(
      ["a", "b", "c"].map((id) => ({ id, prompt: "p", cwd: "." })),
      ["batch-ok"],
    );
    const since = Math.floor(Date.now() / 1000) - 1;
    // (The tasks file lies in the tasks' folder ".": accepted as the caller's own.)
    const run = batch([
      file,
      "--models",
      modelsFile,
      "--model",
      "scriptd/batch-ok",
      "--warm",
      "2",
      "--allow-workspace-config",
    ]);
    const { status, stdout, stderr } = await run.done;
    expect(status, stderr).toBe(2);
    expect(stdout).toBe("");
    expect(stderr).toContain("No task of");
    expect(stderr).toContain('Unknown model provider "scriptd" (model "scriptd/batch-ok") (every task)');
    expect(stderr).toContain("no task was started");
    expect(stderr).not.toMatch(/\] [abc]: started/);
    // Before, each task failed in its turn (exit 1, three envelopes); no sandbox is made for it now.
    expect(await warmSandboxesMadeBy(run.child.pid!, since)).toBe(0);
    expect(fs.readdirSync(dir).sort()).toEqual(["tasks.jsonl"]);
  });

  it("tasks over one folder never run at once: a task over another folder goes first, and both changes arrive", async () => {
    server.setScript("batch-slow-write", bashThenFinal("sleep 4; echo slow >> log.txt", { done: true }));
    server.setScript("batch-quick-write", bashThenFinal("echo quick >> log.txt", { done: true }));
    const { dir, file, modelsFile } = setup(
      [
        { id: "slow", prompt: "p", cwd: "shared", model: "scripted/batch-slow-write" },
        { id: "same", prompt: "p", cwd: "shared" },
        { id: "other", prompt: "p", cwd: "other" },
      ],
      ["batch-slow-write", "batch-quick-write"],
    );
    for (const d of ["shared", "other"]) fs.mkdirSync(path.join(dir, d));
    const run = batch([file, "--models", modelsFile, "--model", "scripted/batch-quick-write", "--concurrency", "2"]);
    const { status, stdout, stderr } = await run.done;
    expect(status, stderr).toBe(0);
    // The second worker skipped "same" (it would only wait for "slow") and took "other".
    const startedAt = (id: string) => stderr.indexOf(`] ${id}: started`);
    expect(startedAt("other"), stderr).toBeGreaterThan(-1);
    expect(startedAt("other"), stderr).toBeLessThan(startedAt("same"));
    expect(stdout.trim().split("\n").length).toBe(3);
    // One after the other on the shared folder: both writes arrived, in order.
    expect(fs.readFileSync(path.join(dir, "shared", "log.txt"), "utf8")).toBe("slow\nquick\n");
    expect(fs.readFileSync(path.join(dir, "other", "log.txt"), "utf8")).toBe("quick\n");
  });

  it("--resume runs only what an earlier batch left, never over an earlier record; then nothing is left", async () => {
    server.setScript("batch-count", bashThenFinal("echo run >> runs.txt", { done: true }));
    const { dir, file, modelsFile } = setup(
      ["a", "b", "c"].map((id) => ({ id, prompt: "p", cwd: `ws-${id}` })),
      ["batch-count"],
    );
    for (const id of ["a", "c"]) fs.mkdirSync(path.join(dir, `ws-${id}`));
    const results = path.join(dir, "results.jsonl");
    const records = path.join(dir, "records");
    const shared = ["--models", modelsFile, "--model", "scripted/batch-count", "--warm", "0", "--record-dir", records];
    const runs = (id: string) => fs.readFileSync(path.join(dir, `ws-${id}`, "runs.txt"), "utf8");
    // First run: b's folder is missing, so b fails; its stdout is appended to results.jsonl.
    const first = await batch([file, ...shared, "--resume", results]).done;
    expect(first.status, first.stderr).toBe(1);
    fs.appendFileSync(results, first.stdout);
    expect(runs("a")).toBe("run\n");
    fs.mkdirSync(path.join(dir, "ws-b"));
    // A rerun whose task would write over a record is refused before anything starts.
    fs.mkdirSync(path.join(records, "b"));
    fs.writeFileSync(path.join(records, "b", "earlier.txt"), "an earlier run's record");
    const refused = await batch([file, ...shared, "--resume", results]).done;
    expect(refused.status, refused.stderr).toBe(2);
    expect(refused.stderr).toContain(
      `1 task(s) would write their record where one already is: ${path.join(records, "b")}.`,
    );
    expect(refused.stderr).toContain("no task was started");
    expect(fs.existsSync(path.join(dir, "ws-b", "runs.txt"))).toBe(false);
    fs.rmSync(path.join(records, "b"), { recursive: true });
    // Only b runs again: a and c succeeded in the first run.
    const second = await batch([file, ...shared, "--resume", results]).done;
    expect(second.status, second.stderr).toBe(0);
    expect(second.stderr).toContain(`2 of 3 task(s) already succeeded in ${results}; 1 left to run`);
    const lines = second.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ id: "b", ok: true, exitCode: 0 });
    expect([runs("a"), runs("b"), runs("c")]).toEqual(["run\n", "run\n", "run\n"]);
    fs.appendFileSync(results, second.stdout);
    const third = await batch([file, ...shared, "--resume", results]).done;
    expect(third.status, third.stderr).toBe(0);
    expect(third.stdout).toBe("");
    expect(third.stderr).toContain("3 of 3 task(s) already succeeded");
    expect(third.stderr).toContain("nothing left to run");
  });

  it("a failed task whose record folder was taken meanwhile says where its record went, in its envelope and on stderr", async () => {
    const { dir, file, modelsFile } = setup(
      [{ id: "late", prompt: "p", cwd: "ws", schema: { type: "object" } }],
      ["batch-taken"],
    );
    fs.mkdirSync(path.join(dir, "ws"));
    const records = path.join(dir, "records");
    // Another job writes into the task's record folder while the task runs; the model never gives
    // a result, so the task fails (before, a failed task's note was dropped: the record sat in a
    // temporary folder and nothing said so).
    server.setScript("batch-taken", (_request, turn) => {
      if (turn === 0) {
        fs.mkdirSync(path.join(records, "late"), { recursive: true });
        fs.writeFileSync(path.join(records, "late", "other.txt"), "another job's record");
      }
      return { text: "no result from me" };
    });
    const { status, stdout, stderr } = await batch([
      file,
      "--models",
      modelsFile,
      "--model",
      "scripted/batch-taken",
      "--record-dir",
      records,
    ]).done;
    expect(status, stderr).toBe(1);
    const line = JSON.parse(stdout.trim());
    expect(line).toMatchObject({ id: "late", ok: false, exitCode: 1 });
    expect(line.recordNotes).toEqual([expect.stringMatching(/^not written to .*records\/late: .*kept at (\S+);/)]);
    const kept = /kept at (\S+);/.exec(line.recordNotes[0])![1]!;
    expect(stderr).toContain(`sandbox-run: task late: the run record was not written to ${path.join(records, "late")}`);
    expect(fs.readdirSync(path.join(records, "late"))).toEqual(["other.txt"]);
    expect(fs.existsSync(path.join(kept, "meta.json"))).toBe(true);
    fs.rmSync(kept, { recursive: true });
  });

  it("--max-failures: once that many tasks have failed no more start, and each one not started is answered", async () => {
    server.setScript("batch-never", bashThenFinal("echo run >> runs.txt", { done: true }));
    const { dir, file, modelsFile } = setup(
      [
        { id: "gone-1", prompt: "p", cwd: "no-such-1" },
        { id: "gone-2", prompt: "p", cwd: "no-such-2" },
        { id: "fine-1", prompt: "p", cwd: "ws" },
        { id: "fine-2", prompt: "p", cwd: "ws" },
      ],
      ["batch-never"],
    );
    fs.mkdirSync(path.join(dir, "ws"));
    const shared = ["--models", modelsFile, "--model", "scripted/batch-never", "--warm", "0"];
    const zero = await batch([file, ...shared, "--max-failures", "0"]).done;
    expect(zero.status).toBe(2);
    expect(zero.stderr).toContain('--max-failures must be a whole number of at least 1, not "0"');
    const run = batch([file, ...shared, "--max-failures", "2"]);
    const { status, stdout, stderr } = await run.done;
    expect(status, stderr).toBe(1);
    const byId = Object.fromEntries(
      stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l))
        .map((l) => [l.id, l]),
    );
    expect(Object.keys(byId).sort()).toEqual(["fine-1", "fine-2", "gone-1", "gone-2"]);
    expect(byId["gone-1"]).toMatchObject({ ok: false, exitCode: 2, error: { code: "usage" } });
    for (const id of ["fine-1", "fine-2"]) {
      expect(byId[id]).toMatchObject({ ok: false, exitCode: 1, error: { code: "aborted" } });
      expect(byId[id].error.message).toContain("Not started: 2 task(s) failed, the most --max-failures allows.");
    }
    expect(stderr).toContain("0 of 4 task(s) succeeded, 4 failed (2 not started); 2 run");
    expect(fs.existsSync(path.join(dir, "ws", "runs.txt"))).toBe(false);
    expect(await containersOf(run.child.pid!)).toEqual([]);
  });

  it("`batch -` reads the tasks from stdin, their paths from the current folder", async () => {
    server.setScript("batch-piped", bashThenFinal("cat task.txt > seen.txt", { done: true }));
    const { dir, modelsFile } = setup([], ["batch-piped"]);
    fs.mkdirSync(path.join(dir, "ws"));
    fs.writeFileSync(path.join(dir, "ws", "task.txt"), "piped task");
    const shared = ["-", "--models", modelsFile, "--model", "scripted/batch-piped", "--warm", "0"];
    const input = `${JSON.stringify({ id: "piped", prompt: "p", cwd: "ws" })}\n`;
    const { status, stdout, stderr } = await batch(shared, { cwd: dir, input }).done;
    expect(status, stderr).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ id: "piped", ok: true, exitCode: 0 });
    expect(fs.readFileSync(path.join(dir, "ws", "seen.txt"), "utf8")).toBe("piped task");
    const bad = await batch(shared, { cwd: dir, input: "not a task\n" }).done;
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("1 line(s) of stdin cannot be run: line 1: not JSON");
  });

  it("SIGINT stops the running tasks, answers every id, removes every sandbox (warm ones too), and exits 130", async () => {
    server.setScript("batch-slow", bashThenFinal("sleep 300", { done: true }));
    const tasks = ["a", "b", "c", "d"].map((id) => ({ id, prompt: "Wait.", cwd: "." }));
    const { file, modelsFile } = setup(tasks, ["batch-slow"]);
    let started: () => void;
    const twoStarted = new Promise<void>((resolve) => (started = resolve));
    const run = batch(
      [
        file,
        "--models",
        modelsFile,
        "--model",
        "scripted/batch-slow",
        "--concurrency",
        "2",
        "--allow-workspace-config",
      ],
      {
        onStderr: (text) => {
          if ((text.match(/: started/g) ?? []).length >= 2) started();
        },
      },
    );
    await twoStarted;
    // Both running tasks' sandboxes are up (and their pool refills behind them).
    await new Promise((resolve) => setTimeout(resolve, 4000));
    run.child.kill("SIGINT");
    const { status, stdout, stderr } = await run.done;
    expect(status, stderr).toBe(130);
    const lines = stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.id).sort()).toEqual(["a", "b", "c", "d"]);
    expect(lines.every((l) => l.ok === false && l.error.code === "aborted")).toBe(true);
    expect(await containersOf(run.child.pid!)).toEqual([]);
  });
});

describe("one sandbox-run call with SANDBOX_RUN_WARM", () => {
  it("runs warm, and its pool makes the call's sandbox and no other (no refill only to be removed at exit)", async () => {
    server.setScript("single-warm", bashThenFinal("cat task.txt > seen.txt", { done: true }));
    const { dir, modelsFile } = setup([], ["single-warm"]);
    fs.writeFileSync(path.join(dir, "task.txt"), "single");
    const schema = path.join(dir, "schema.json");
    fs.writeFileSync(schema, JSON.stringify({ type: "object" }));
    const since = Math.floor(Date.now() / 1000) - 1;
    const run = cli(
      [
        "--models",
        modelsFile,
        "--model",
        "scripted/single-warm",
        "--schema",
        schema,
        "--cwd",
        dir,
        "--json",
        "--quiet",
        "Do it.",
      ],
      { env: { SANDBOX_RUN_WARM: "1" } },
    );
    const { status, stdout, stderr } = await run.done;
    expect(status, stderr).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ ok: true, result: { done: true }, warm: true });
    expect(fs.readFileSync(path.join(dir, "seen.txt"), "utf8")).toBe("single");
    expect(await warmSandboxesMadeBy(run.child.pid!, since)).toBe(1);
    expect(await containersOf(run.child.pid!)).toEqual([]);
  });
});
