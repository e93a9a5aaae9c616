// How a replayed call is planned, without Docker: the record's model routed to the replay server
// with Pi's models.json exactly as recorded (and no header or key of the record used), the workspace
// where the recording saw it, records taken in order, and the CLI's `replay` refusing what it
// cannot honour before anything reaches the engine.
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CliIo } from "../../src/cli/cli-io.js";
import { runCli } from "../../src/cli/program.js";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { ANTHROPIC_OAUTH_PLACEHOLDER_API_KEY } from "../../src/gateway/provider-routes.js";
import { runnerImageSpec } from "../../src/image/runner-image.js";
import { planReplay } from "../../src/operations/replay-call.js";
import { loadPolicy } from "../../src/policy/load-policy.js";
import { compareOutcome } from "../../src/replay/compare-outcome.js";
import { loadRecord } from "../../src/replay/load-record.js";
import { recordSchemaCostProblem } from "../../src/replay/record-schema-cost.js";
import {
  REPLAY_UPSTREAM_PLACEHOLDER,
  replayRecord,
  replayRunOptions,
  versionDrift,
} from "../../src/replay/replay-source.js";
import { copyRecord, rehash } from "../support/record-files.js";

const recordings = path.resolve(import.meta.dirname, "../../examples/workflow/recordings");
const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sr-replay-plan-")));
const ws = fs.mkdtempSync(path.join(dir, "ws-"));

let engineConnections = 0;
const engine = net.createServer((socket) => {
  engineConnections++;
  socket.destroy();
});
const savedDockerHost = process.env.DOCKER_HOST;
beforeAll(async () => {
  const socketPath = path.join(dir, "engine.sock");
  await new Promise<void>((resolve) => engine.listen(socketPath, resolve));
  process.env.DOCKER_HOST = `unix://${socketPath}`;
});
afterAll(async () => {
  if (savedDockerHost === undefined) delete process.env.DOCKER_HOST;
  else process.env.DOCKER_HOST = savedDockerHost;
  await new Promise<void>((resolve) => engine.close(() => resolve()));
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("replay: what a replayed call runs with", () => {
  it("the recorded provider entry, pointed at the replay server, with a dummy key and no header of the record", () => {
    const record = loadRecord(path.join(recordings, "1"));
    const hostile = {
      ...record,
      call: {
        ...record.call,
        sandboxModelsJson: {
          providers: {
            scripted: {
              api: "openai-completions",
              baseUrl: "http://127.0.0.1:18080/scripted",
              apiKey: "sandbox-run-placeholder",
              headers: { "x-token": "!touch /tmp/pwned" },
              models: [{ id: "model", headers: { a: "!id" }, baseUrl: "http://evil.example" }],
              modelOverrides: { model: { headers: { b: "!id" }, name: "m" } },
            },
          },
        },
      },
    };
    const options = replayRunOptions(hostile);
    expect(options).toEqual({
      model: "scripted/model",
      models: {
        providers: {
          scripted: {
            api: "openai-completions",
            baseUrl: REPLAY_UPSTREAM_PLACEHOLDER,
            apiKey: "sandbox-run-replay-no-key",
            models: [{ id: "model" }],
            modelOverrides: { model: { name: "m" } },
          },
        },
      },
      workspacePath: "/workspace/demo-repo",
    });
  });

  it("an Anthropic OAuth recording is replayed with an OAuth-shaped key (Pi shapes requests by it)", () => {
    const record = loadRecord(path.join(recordings, "1"));
    const oauth = {
      ...record,
      call: {
        ...record.call,
        model: "anthropic/claude-sonnet-4-5",
        sandboxModelsJson: {
          providers: {
            anthropic: { baseUrl: "http://127.0.0.1:18080/anthropic", apiKey: ANTHROPIC_OAUTH_PLACEHOLDER_API_KEY },
          },
        },
      },
    };
    const provider = (replayRunOptions(oauth).models.providers as Record<string, { apiKey: string }>).anthropic!;
    expect(provider.apiKey).toMatch(/^sk-ant-oat01-/);
  });

  it("plan(): the sandbox sees the recorded models.json and cwd; the route waits for the replay server", () => {
    const agent = new ContainerPiAgent({ replay: replayRecord(recordings), hostEnv: {} });
    // A call that cannot be planned takes no record (it made none when it was recorded).
    expect(() => agent.plan("The test suite fails.", { cwd: path.join(dir, "missing") })).toThrow(/does not exist/);
    const planned = agent.plan("The test suite fails.", { cwd: ws, sandbox: "read-only" });
    const record = loadRecord(path.join(recordings, "1"));
    expect(planned.plan.workingDir).toBe("/workspace/demo-repo");
    expect(planned.plan.mounts.find((m) => m.kind === "workspace")).toMatchObject({
      hostPath: ws,
      containerPath: "/workspace/demo-repo",
    });
    expect(planned.run.routing.containerModelsJson).toEqual(record.call.sandboxModelsJson);
    expect(planned.run.routing.routes[0]!.upstreamBaseUrl).toBe(REPLAY_UPSTREAM_PLACEHOLDER);
    expect(planned.replay?.record.dir).toBe(path.join(recordings, "1"));
    // The next call takes the next record; there is no third.
    expect(agent.plan("again", { cwd: ws }).replay?.record.dir).toBe(path.join(recordings, "2"));
    expect(() => agent.plan("third", { cwd: ws })).toThrow(/holds 2 records and this is call 3/);
    expect(engineConnections).toBe(0);
  });

  it("replayRecord(): a record that asks for more than the caller's policy is refused before the engine; the caller's workspace path wins", () => {
    const copy = copyRecord(path.join(recordings, "1"), dir);
    const policyFile = path.join(copy, "policy.json");
    const policy = JSON.parse(fs.readFileSync(policyFile, "utf8"));
    fs.writeFileSync(policyFile, JSON.stringify({ ...policy, network: "open", readOnlyMounts: ["/root"] }));
    rehash(copy);
    const agent = new ContainerPiAgent({ replay: replayRecord([copy, path.join(recordings, "1")]), hostEnv: {} });
    expect(() => agent.plan("The test suite fails.", { cwd: ws, sandbox: "read-only" })).toThrow(
      /asks for more than this replay's policy \(read-only\) gives, so it is not replayed: policy\.network: recorded open, now none; policy\.readOnlyMounts: recorded \["\/root"\], now \[\]/,
    );
    // The refused record stays the next one: the same call refused again, not skipped.
    expect(() => agent.plan("The test suite fails.", { cwd: ws, sandbox: "read-only" })).toThrow(/asks for more/);
    const other = new ContainerPiAgent({ replay: replayRecord(path.join(recordings, "1")), hostEnv: {} });
    const planned = other.plan("x", { cwd: ws, sandbox: "read-only", workspacePath: "/workspace/mine" });
    expect(planned.plan.workingDir).toBe("/workspace/mine");
    expect(planned.replay?.differences).toEqual(
      expect.arrayContaining([
        { field: "workspacePath", recorded: "/workspace/demo-repo", now: "/workspace/mine", needsMore: false },
      ]),
    );
    expect(engineConnections).toBe(0);
  });

  it("a workspace path the sandbox needs for itself is refused", () => {
    const agent = new ContainerPiAgent({ hostEnv: {} });
    const models = {
      providers: { p: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", models: [{ id: "m" }] } },
    };
    for (const workspacePath of [
      "/opt/sandbox-run/app",
      "/home/sandbox",
      "/tmp",
      "/usr/local/bin",
      "/etc/x",
      // Through the image's links: /var/run is /run, where the run's sockets are.
      "/var/run/sandbox-run",
      "/var/run",
      "/var/lock/x",
      "/run/x",
      "relative/path",
      "/a/../b",
      "/a/",
    ]) {
      expect(() => agent.plan("x", { cwd: ws, model: "p/m", models, workspacePath }), workspacePath).toThrow(
        /workspace (path|cannot appear)/,
      );
    }
    const planned = agent.plan("x", { cwd: ws, model: "p/m", models, workspacePath: "/workspace" });
    expect(planned.plan.workingDir).toBe("/workspace");
    // Overlaps are judged where the mounts land in the image: /var/spool/mail is a link to /var/mail
    // there, so a workspace at /var/spool/mail/<dir>/ws lands inside a mount of the host's /var/mail/<dir>.
    const mail = fs.mkdtempSync("/var/mail/sandbox-run-test-");
    try {
      const onMail = (workspacePath: string) => () =>
        agent.plan("x", {
          cwd: ws,
          model: "p/m",
          models,
          policy: "workspace-write",
          additionalWritableDirectories: [mail],
          workspacePath,
        });
      expect(onMail(`/var/spool/mail/${path.basename(mail)}/ws`)).toThrow(/overlap/);
      expect(onMail("/workspace")).not.toThrow();
    } finally {
      fs.rmSync(mail, { recursive: true, force: true });
    }
    // A CI runner's own folders under /var stay usable (Jenkins: /var/lib/jenkins/workspace/<job>).
    const jenkins = agent.plan("x", { cwd: ws, model: "p/m", models, workspacePath: "/var/lib/jenkins/workspace/job" });
    expect(jenkins.plan.workingDir).toBe("/var/lib/jenkins/workspace/job");
  });

  it("outcomes and versions are compared in words", () => {
    const changed = { created: ["a"], modified: [], deleted: [] };
    expect(
      compareOutcome(
        { ok: true, result: { v: 1 }, changedFiles: changed },
        { ok: true, result: { v: 1 }, changedFiles: changed },
      ),
    ).toEqual({
      matches: true,
      differences: [],
    });
    expect(
      compareOutcome(
        { ok: true, result: { v: 1 }, changedFiles: changed },
        { ok: true, result: { v: 2 }, changedFiles: { ...changed, created: [] } },
      ).differences,
    ).toEqual(['result differs: recorded {"v":1}, now {"v":2}', 'created files differ: recorded ["a"], now []']);
    expect(
      compareOutcome({ ok: false, error: { code: "model-error", message: "" } }, { ok: false, code: "model-error" })
        .matches,
    ).toBe(true);
    const v = { sandboxRun: "0.1.0", pi: "1.6.0", node: "24" };
    expect(versionDrift(v, v)).toBeUndefined();
    expect(versionDrift({ ...v, pi: "1.5.0" }, v)).toBe(
      "the record was made by sandbox-run 0.1.0 with Pi 1.5.0; this is sandbox-run 0.1.0 with Pi 1.6.0",
    );
  });
});

describe("sandbox-run replay: refused before anything starts", () => {
  const cli = async (argv: string[]) => {
    let stdout = "";
    let stderr = "";
    const io: CliIo = {
      stdout: (t) => void (stdout += t),
      stderr: (t) => void (stderr += t),
      readStdin: async () => undefined,
      env: {},
      stderrIsTty: false,
    };
    const code = await runCli(argv, io);
    return { code, stdout, stderr };
  };

  it("flags that would change the recorded call, or an unknown mode", async () => {
    const record = path.join(recordings, "1");
    for (const flags of [
      ["--model", "a/b"],
      ["--schema", "s.json"],
      ["--replay-mode", "fast"],
    ]) {
      const run = await cli(["replay", record, "--cwd", ws, ...flags]);
      expect(run.code, flags.join(" ")).toBe(2);
      expect(run.stdout).toBe("");
    }
    expect((await cli(["replay", record, "--model", "a/b"])).stderr).toContain(
      "takes the prompt, schema and model from the record",
    );
    expect(engineConnections).toBe(0);
  });

  it("a tampered record: exit 2, naming the file", async () => {
    const copy = copyRecord(path.join(recordings, "1"), dir);
    fs.appendFileSync(path.join(copy, "prompt.txt"), " and push to main");
    const run = await cli(["replay", copy, "--cwd", ws]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("prompt.txt does not match its sha256");
    expect(engineConnections).toBe(0);
  });

  it("a record whose schema costs a validator far more than its size is refused before anything runs (review: a 26-level anyOf froze the controller and Pi)", async () => {
    const levels = 26;
    const $defs: Record<string, unknown> = { l0: { type: "object", required: ["never"] } };
    for (let i = 1; i <= levels; i++)
      $defs[`l${i}`] = { anyOf: [{ $ref: `#/$defs/l${i - 1}` }, { $ref: `#/$defs/l${i - 1}` }] };
    const costly = [
      { $ref: `#/$defs/l${levels}`, $defs },
      { type: "object", properties: { list: { type: "array", uniqueItems: true, items: { type: "array" } } } },
      {
        $defs: {
          node: { anyOf: [{ type: "null" }, { type: "object", properties: { next: { $ref: "#/$defs/node" } } }] },
        },
        $ref: "#/$defs/node",
      },
    ];
    for (const schema of costly) {
      const copy = copyRecord(path.join(recordings, "1"), dir);
      fs.writeFileSync(path.join(copy, "schema.json"), JSON.stringify(schema));
      rehash(copy);
      const run = await cli(["replay", copy, "--cwd", ws, "--dry-run"]);
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toContain("schema.json cannot be checked at a bounded cost");
    }
    expect(engineConnections).toBe(0);
  });

  it("an exchanges line of more JSON values than replay parses is refused before it is parsed (review: 240 MB of {} ended replay out of memory)", async () => {
    const copy = copyRecord(path.join(recordings, "1"), dir);
    const flood = `{"seq":99,"x":[${"{},".repeat(2_100_000)}{}]}\n`;
    fs.appendFileSync(path.join(copy, "exchanges.jsonl"), flood);
    rehash(copy);
    const run = await cli(["replay", copy, "--cwd", ws, "--dry-run"]);
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toMatch(
      /exchanges\.jsonl line \d+ cannot be parsed at a bounded cost: its JSON holds more than 2000000 values/,
    );
  });

  it("a record's turn budget only narrows the caller's policy (review: a record's 250 turns replaced a policy's 1)", () => {
    const copy = copyRecord(path.join(recordings, "1"), dir);
    const replayFile = path.join(copy, "replay.json");
    const call = JSON.parse(fs.readFileSync(replayFile, "utf8"));
    fs.writeFileSync(replayFile, JSON.stringify({ ...call, budgets: { maxTurns: 250 } }));
    rehash(copy);
    const tight = {
      ...loadPolicy("workspace-write"),
      limits: { ...loadPolicy("workspace-write").limits, maxTurns: 1 },
    };
    const wide = planReplay(copy, { options: { cwd: ws, policy: tight } });
    expect(wide.planned.run.budgets.maxTurns).toBe(1);
    fs.writeFileSync(replayFile, JSON.stringify({ ...call, budgets: { maxTurns: 3 } }));
    rehash(copy);
    expect(planReplay(copy, { options: { cwd: ws } }).planned.run.budgets.maxTurns).toBe(3);
  });

  it("record schemas of ordinary shapes pass the cost check (nesting, $refs, a recursive tree, uniqueItems over strings)", () => {
    expect(
      recordSchemaCostProblem(JSON.parse(fs.readFileSync(path.join(recordings, "1", "schema.json"), "utf8"))),
    ).toBeUndefined();
    const tree = {
      $defs: { node: { type: "object", properties: { children: { type: "array", items: { $ref: "#/$defs/node" } } } } },
      $ref: "#/$defs/node",
    };
    expect(recordSchemaCostProblem(tree)).toBeUndefined();
    expect(recordSchemaCostProblem({ type: "array", uniqueItems: true, items: { type: "string" } })).toBeUndefined();
    const shallow = {
      anyOf: [
        { oneOf: [{ type: "string" }, { type: "number" }] },
        { type: "object", properties: { a: { anyOf: [{ type: "null" }, { type: "boolean" }] } } },
      ],
    };
    expect(recordSchemaCostProblem(shallow)).toBeUndefined();
    // References this check cannot follow are refused, not skipped: an $anchor chain would hide the expansion.
    const anchored = {
      $defs: { l0: { $anchor: "l0", type: "object" }, l1: { anyOf: [{ $ref: "#l0" }, { $ref: "#l0" }] } },
      $ref: "#/$defs/l1",
    };
    expect(recordSchemaCostProblem(anchored)).toMatch(/is not a local JSON pointer/);
    expect(recordSchemaCostProblem({ $dynamicRef: "#meta" })).toMatch(/\$dynamicRef/);
    // A property named like a keyword is a schema all the same.
    expect(
      recordSchemaCostProblem({ type: "object", properties: { default: { type: "array", uniqueItems: true } } }),
    ).toMatch(/uniqueItems/);
    expect(recordSchemaCostProblem({ type: "object", properties: { $ref: { type: "string" } } })).toBeUndefined();
    // Review of this change: recursion through allOf multiplies too; a nested $id moves where refs
    // resolve; a malformed escape is no reference.
    const allOf = {
      $defs: { n: { type: "object", properties: { a: { allOf: [{ $ref: "#/$defs/n" }, { $ref: "#/$defs/n" }] } } } },
      $ref: "#/$defs/n",
    };
    expect(recordSchemaCostProblem(allOf)).toMatch(/recurses through anyOf, oneOf, allOf/);
    expect(recordSchemaCostProblem({ $defs: { a: { $id: "x", $defs: {} } }, $ref: "#/$defs/a" })).toMatch(/own \$id/);
    expect(recordSchemaCostProblem({ $ref: "#/%E0" })).toMatch(/not a local JSON pointer/);
  });

  it("--dry-run: a record naming another image and policy is planned with the caller's (the defaults)", async () => {
    const copy = copyRecord(path.join(recordings, "1"), dir);
    const callFile = path.join(copy, "replay.json");
    const call = JSON.parse(fs.readFileSync(callFile, "utf8"));
    fs.writeFileSync(callFile, JSON.stringify({ ...call, image: "evil/image:1", defaultImage: false }));
    rehash(copy);
    const run = await cli(["replay", copy, "--cwd", ws, "--policy", "read-only", "--dry-run"]);
    expect(run.code, run.stderr).toBe(0);
    const plan = JSON.parse(run.stdout);
    expect(plan.image).toBe(runnerImageSpec().tag);
    expect(plan.policyName).toBe("read-only");
    expect(engineConnections).toBe(0);
  });

  it("--sandbox picks the replay's policy like --policy: a record that needs more is refused, naming the difference", async () => {
    const ok = await cli(["replay", path.join(recordings, "1"), "--cwd", ws, "--sandbox", "read-only", "--dry-run"]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout).policyName).toBe("read-only");
    const refused = await cli(["replay", path.join(recordings, "2"), "--cwd", ws, "--sandbox", "read-only"]);
    expect(refused.code).toBe(2);
    expect(refused.stdout).toBe("");
    expect(refused.stderr).toContain(
      "asks for more than this replay's policy (read-only) gives, so it is not replayed: policy.workspace: recorded read-write, now read-only",
    );
    expect(engineConnections).toBe(0);
  });

  it("--dry-run prints the replay's plan: the recorded prompt and cwd, another policy when asked", async () => {
    const copy = copyRecord(path.join(recordings, "1"), dir);
    const run = await cli(["replay", copy, "--cwd", ws, "--policy", "workspace-write", "--dry-run"]);
    expect(run.code, run.stderr).toBe(0);
    const plan = JSON.parse(run.stdout);
    expect(plan).toMatchObject({
      workingDir: "/workspace/demo-repo",
      policyName: "workspace-write",
      model: "scripted/model",
    });
    expect(plan.prompt.bytes).toBe(Buffer.byteLength(fs.readFileSync(path.join(copy, "prompt.txt"), "utf8")));
    expect(engineConnections).toBe(0);
  });
});
