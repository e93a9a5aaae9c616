// Record and replay without Docker: real HTTP through the real model gateway, first to the scripted
// model (recorded by a RunRecorder), then to a replay server reading that record back. The replay
// gives back the recorded bytes; a request that differs is a divergence (strict: stopped, lenient:
// answered and reported); a record that does not match its SHA256SUMS is refused.
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayExchange, startModelGateway } from "../../src/gateway/model-gateway.js";
import { loadPolicy } from "../../src/policy/load-policy.js";
import { loadBytes } from "../../src/record/record-format.js";
import { RunRecorder } from "../../src/record/run-recorder.js";
import { loadRecord } from "../../src/replay/load-record.js";
import { type Divergence, startReplayServer } from "../../src/replay/replay-server.js";
import { startScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import { HostDir } from "../../src/util/host-dir.js";
import { request, waitFor } from "../support/gateway-client.js";
import { rehash } from "../support/record-files.js";

const KEY = "sk-round-trip-canary-55aa77cc";
const root = fs.mkdtempSync(path.join(os.tmpdir(), "sr-replay-rt-"));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const body = (content: string, history: unknown[] = []) =>
  JSON.stringify({
    model: "m",
    stream: true,
    messages: [{ role: "system", content: "be brief" }, { role: "user", content }, ...history],
    tools: [{ type: "function", function: { name: "bash", description: "run", parameters: { type: "object" } } }],
  });
// The model's bash call and its result, as Pi sends them back in the second request.
const afterTool = (result: string) => [
  {
    role: "assistant",
    content: null,
    tool_calls: [{ id: "call_1_0", type: "function", function: { name: "bash", arguments: '{"command":"ls"}' } }],
  },
  { role: "tool", tool_call_id: "call_1_0", content: result },
];

async function gatewayTo(upstream: string, dir: string, onExchange?: (e: GatewayExchange) => void) {
  return startModelGateway({
    socketPath: path.join(dir, `gw-${crypto.randomBytes(3).toString("hex")}.sock`),
    routes: [
      {
        id: "p",
        upstreamBaseUrl: upstream,
        api: "openai-completions",
        model: "m",
        headers: { authorization: `Bearer ${KEY}` },
      },
    ],
    ...(onExchange ? { onExchange, recordExchanges: {} } : {}),
  });
}

const post = (socketPath: string, payload: string) =>
  request(socketPath, {
    method: "POST",
    path: "/p/chat/completions",
    headers: { "content-type": "application/json" },
    body: payload,
  });

/** A line separator, NEL, CSI as one C1 character, a bidi override. */
const HOSTILE_TEXT = "a\u2028b\u0085c\u009b2Jd\u202ee";

/** A recorder writing into `<dir>/rec` for a read-only run over a new workspace. */
async function openRecorder(prompt: string) {
  const dir = fs.mkdtempSync(path.join(root, "record-"));
  const workspace = fs.mkdtempSync(path.join(root, "ws-"));
  const staging = HostDir.open(path.join(dir, "rec"), { create: true });
  const recorder = await RunRecorder.open({
    staging,
    scratch: dir,
    prompt,
    policy: loadPolicy("read-only"),
    workspace,
    plan: {},
    call: {
      model: "p/m",
      route: { id: "p", api: "openai-completions", model: "m" },
      sandboxModelsJson: {
        providers: { p: { baseUrl: "http://127.0.0.1:18080/p", apiKey: "sandbox-run-placeholder" } },
      },
      workspace: { host: workspace, sandbox: workspace },
      writableRoots: [],
      image: "img",
      defaultImage: true,
      timeoutMs: 1000,
      budgets: {},
      sandboxEnvNames: [],
      extraArgs: [],
    },
    versions: { sandboxRun: "0.1.0", pi: "1.6.0", node: "24" },
  });
  return { dir, staging, recorder };
}

/** A record of two generations: a bash call, then text after its result "file.txt". */
async function makeRecord(): Promise<{ dir: string; replies: string[] }> {
  const scripted = await startScriptedModelServer({
    scripts: { m: [{ toolCalls: [{ name: "bash", arguments: { command: "ls" } }] }, { text: "There is one file." }] },
  });
  const { dir, staging, recorder } = await openRecorder("list");
  recorder.traffic.forbid([`Bearer ${KEY}`]);
  let seen = 0;
  const gateway = await gatewayTo(scripted.baseUrl, dir, (exchange) => {
    recorder.traffic.exchange(exchange);
    seen++;
  });
  const replies = [(await post(gateway.socketPath, body("list"))).body];
  replies.push((await post(gateway.socketPath, body("list", afterTool("file.txt")))).body);
  await waitFor(() => seen === 2);
  await gateway.close();
  await scripted.close();
  // An event holding what a line reader splits at, or a terminal acts on (checked below).
  recorder.onEvent({ type: "tool", data: { text: HOSTILE_TEXT } });
  await recorder.finish({
    ok: true,
    result: "There is one file.",
    meta: { changedFiles: { created: [], modified: [], deleted: [] } },
  });
  staging.close();
  return { dir: path.join(dir, "rec"), replies };
}

describe("record: JSON files", () => {
  it("scrubs a credential holding a character the file escapes (U+0085, a soft hyphen) before escaping it (fix review, round 3, session 41)", async () => {
    const secret = "sk-\u0085canary\u00ad-31c7";
    const { dir, staging, recorder } = await openRecorder("p");
    recorder.traffic.forbid([secret]);
    recorder.onEvent({ type: "tool", data: { text: secret } });
    await recorder.finish({
      ok: true,
      result: { echoed: `the key is ${secret}` },
      meta: { changedFiles: { created: [`a\u2028${secret}`], modified: [], deleted: [] } },
    });
    staging.close();
    for (const name of ["result.json", "meta.json", "events.jsonl"]) {
      const text = fs.readFileSync(path.join(dir, "rec", name), "utf8");
      expect(text, name).not.toContain("canary");
      expect(text, name).not.toMatch(/[\u0085\u00ad\u2028]/);
    }
  });
});

describe("replay: a record played back through the real gateway", () => {
  let recordDir: string;
  let recordedReplies: string[];
  beforeAll(async () => {
    ({ dir: recordDir, replies: recordedReplies } = await makeRecord());
  });

  it("writes its JSON lines with what line readers split at and terminals act on escaped, reading back unchanged (red-team review, round 3, session 41)", () => {
    const text = fs.readFileSync(path.join(recordDir, "events.jsonl"), "utf8");
    expect(text).not.toMatch(/[\u0085\u009b\u2028\u202e]/);
    // Python's splitlines() boundaries: every piece is a whole JSON line.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the boundaries Python's splitlines() cuts at
    const pieces = text.split(/\r\n|[\n\r\v\f\u001c-\u001e\u0085\u2028\u2029]/).filter((l) => l !== "");
    const events = pieces.map((l) => JSON.parse(l) as { data?: { text?: string } });
    expect(events.find((e) => e.data?.text !== undefined)?.data?.text).toBe(HOSTILE_TEXT);
  });

  it("the record holds both exchanges, and the key nowhere", () => {
    const record = loadRecord(recordDir);
    expect(record.exchanges.map((e) => e.seq)).toEqual([1, 2]);
    expect(Buffer.concat(record.exchanges[1]!.response!.chunks.map(loadBytes)).toString()).toBe(recordedReplies[1]);
    for (const name of fs.readdirSync(recordDir)) {
      expect(fs.readFileSync(path.join(recordDir, name), "utf8")).not.toContain(KEY);
    }
    expect(record.outcome).toEqual({
      ok: true,
      result: "There is one file.",
      changedFiles: { created: [], modified: [], deleted: [] },
    });
  });

  async function replay(
    mode: "strict" | "lenient",
    options: { compareContext?: boolean; speed?: "fast" | "recorded" } = {},
  ) {
    const record = loadRecord(recordDir);
    const divergences: Divergence[] = [];
    const server = await startReplayServer({
      exchanges: record.exchanges,
      api: "openai-completions",
      mode,
      ...options,
      onDivergence: (d) => void divergences.push(d),
    });
    const dir = fs.mkdtempSync(path.join(root, "replay-"));
    const gateway = await gatewayTo(server.baseUrl, dir);
    const close = async () => {
      await gateway.close();
      await server.close();
    };
    return { server, gateway, divergences, close };
  }

  it("the same requests get the recorded replies, byte for byte", async () => {
    const { server, gateway, divergences, close } = await replay("strict");
    const first = await post(gateway.socketPath, body("list"));
    const second = await post(gateway.socketPath, body("list", afterTool("file.txt")));
    expect([first.body, second.body]).toEqual(recordedReplies);
    expect(divergences).toEqual([]);
    expect(server.report()).toMatchObject({ answered: 2, recorded: 2 });
    await close();
  });

  it("answers only at its secret base path: another local user's request takes no recorded answer (review, session 22)", async () => {
    const { server, gateway, divergences, close } = await replay("strict");
    const base = new URL(server.baseUrl);
    expect(base.pathname).toMatch(/^\/replay-[0-9a-f]{32}$/);
    for (const guess of ["/v1/chat/completions", "/replay/v1/chat/completions", "/chat/completions"]) {
      const res = await fetch(`${base.origin}${guess}`, { method: "POST", body: JSON.stringify(body("list")) });
      expect(res.status, guess).toBe(404);
    }
    expect(server.report()).toMatchObject({ answered: 0 });
    // The run's gateway, which has the path, still gets every recorded reply.
    const first = await post(gateway.socketPath, body("list"));
    expect(first.body).toBe(recordedReplies[0]);
    expect(divergences).toEqual([]);
    await close();
  });

  it("--replay-speed recorded gives the same bytes, in order", async () => {
    const { gateway, close } = await replay("strict", { speed: "recorded" });
    expect((await post(gateway.socketPath, body("list"))).body).toBe(recordedReplies[0]);
    await close();
  });

  it("--replay-speed recorded: a step that throws (a header Node refuses) ends that answer, not the process (review, session 44)", async () => {
    const record = loadRecord(recordDir);
    // Past the load's check, as a record that passed it could still hold what Node refuses.
    const exchanges = record.exchanges.map((e, i) =>
      i === 0 ? { ...e, response: { ...e.response!, headers: { ...e.response!.headers, "x-evil": "a\r\nb" } } } : e,
    );
    const server = await startReplayServer({
      exchanges,
      api: "openai-completions",
      mode: "strict",
      speed: "recorded",
      onDivergence: () => {},
    });
    const gateway = await gatewayTo(server.baseUrl, fs.mkdtempSync(path.join(root, "replay-")));
    // The answer breaks off (the gateway tells Pi the upstream failed)...
    expect((await post(gateway.socketPath, body("list"))).status).toBe(502);
    // ...and the replay lives on: the next request gets the next recorded reply.
    const next = await post(gateway.socketPath, body("list", afterTool("file.txt")));
    expect([next.status, next.body]).toEqual([200, recordedReplies[1]]);
    await gateway.close();
    await server.close();
  });

  it("strict: a tool result that differs stops the replay, naming the message and both texts", async () => {
    const { gateway, divergences, close } = await replay("strict");
    await post(gateway.socketPath, body("list"));
    const second = await post(gateway.socketPath, body("list", afterTool("other.txt")));
    expect(second.status).toBe(409);
    expect(divergences).toEqual([
      {
        generation: 2,
        difference: 'tool result of call 1 (bash) differs: recorded "file.txt", now "other.txt"',
        fatal: true,
      },
    ]);
    await close();
  });

  it("lenient: the difference is reported and the recorded reply given anyway", async () => {
    const { gateway, divergences, server, close } = await replay("lenient");
    await post(gateway.socketPath, body("list"));
    const second = await post(gateway.socketPath, body("list", afterTool("other.txt")));
    expect(second.body).toBe(recordedReplies[1]);
    expect(divergences).toMatchObject([{ generation: 2, fatal: false }]);
    expect(server.report().answered).toBe(2);
    await close();
  });

  it("a request past the end of the recording ends any replay", async () => {
    const { gateway, divergences, close } = await replay("lenient");
    await post(gateway.socketPath, body("list"));
    await post(gateway.socketPath, body("list", afterTool("file.txt")));
    const third = await post(gateway.socketPath, body("list", afterTool("file.txt")));
    expect(third.status).toBe(409);
    expect(divergences.at(-1)).toMatchObject({ generation: 3, fatal: true });
    expect(divergences.at(-1)!.difference).toContain("the recording holds 2");
    await close();
  });

  it("with compareContext off (another policy on purpose), other tools are reported once, not a divergence", async () => {
    const { gateway, divergences, server, close } = await replay("strict", { compareContext: false });
    const otherTools = JSON.stringify({ ...JSON.parse(body("list")), tools: [] });
    expect((await post(gateway.socketPath, otherTools)).body).toBe(recordedReplies[0]);
    expect(divergences).toEqual([]);
    expect(server.report().contextDifference).toContain("tool 1 (bash) is no longer offered");
    await close();
  });
});

describe("replay: records that do not check out are refused", () => {
  let pristine: string;
  beforeAll(async () => {
    pristine = (await makeRecord()).dir;
  });
  const copy = () => {
    const dir = fs.mkdtempSync(path.join(root, "copy-"));
    fs.cpSync(pristine, dir, { recursive: true });
    return dir;
  };
  const refusal = (dir: string) => {
    try {
      loadRecord(dir);
    } catch (error) {
      return error as Error & { code?: string };
    }
    throw new Error("loadRecord accepted the record");
  };

  it("one changed byte in a file", () => {
    const dir = copy();
    const file = path.join(dir, "exchanges.jsonl");
    const bytes = fs.readFileSync(file);
    bytes[bytes.indexOf("file.txt")] = "F".charCodeAt(0);
    fs.writeFileSync(file, bytes);
    const error = refusal(dir);
    expect(error.code).toBe("usage");
    expect(error.message).toContain("failed its checksum check");
    expect(error.message).toContain("exchanges.jsonl does not match its sha256");
  });

  it("a file added, a file removed, a file swapped for a link", () => {
    const added = copy();
    fs.writeFileSync(path.join(added, "extra.txt"), "x");
    expect(refusal(added).message).toContain("extra.txt is not listed in SHA256SUMS");

    const removed = copy();
    fs.rmSync(path.join(removed, "prompt.txt"));
    expect(refusal(removed).message).toContain("prompt.txt is listed in SHA256SUMS but missing");

    const linked = copy();
    const target = path.join(root, `prompt-${crypto.randomBytes(3).toString("hex")}.txt`);
    fs.copyFileSync(path.join(linked, "prompt.txt"), target);
    fs.rmSync(path.join(linked, "prompt.txt"));
    fs.symlinkSync(target, path.join(linked, "prompt.txt"));
    expect(refusal(linked).message).toContain("prompt.txt cannot be read");
  });

  it("a record without SHA256SUMS, or with a malformed line", () => {
    const none = copy();
    fs.rmSync(path.join(none, "SHA256SUMS"));
    expect(refusal(none).message).toContain("has no SHA256SUMS");

    // A library's recordTo folder (one record per call, in 1, 2, ...) is said to be one, not damaged.
    const calls = fs.mkdtempSync(path.join(root, "calls-"));
    fs.renameSync(copy(), path.join(calls, "1"));
    fs.renameSync(copy(), path.join(calls, "2"));
    expect(refusal(calls).message).toContain(`${calls} is a folder of 2 record(s), one per call`);
    expect(refusal(calls).message).toContain(`sandbox-run replay ${path.join(calls, "1")}`);

    const malformed = copy();
    fs.appendFileSync(path.join(malformed, "SHA256SUMS"), "abc  ../../etc/passwd\n");
    expect(refusal(malformed).message).toContain("malformed SHA256SUMS line");
  });

  it("an exchanges.jsonl longer than V8's longest string (under the old 512 MiB cap) is refused by its size, not with a raw ERR_STRING_TOO_LONG", () => {
    const dir = copy();
    const file = path.join(dir, "exchanges.jsonl");
    // 2^29 - 24 characters is the longest string V8 makes; this file is just past it (sparse: no disk used).
    const size = 2 ** 29 - 16;
    fs.truncateSync(file, 0);
    fs.truncateSync(file, size);
    const hash = crypto.createHash("sha256");
    const zeros = Buffer.alloc(16 * 1024 * 1024);
    for (let left = size; left > 0; left -= zeros.length) hash.update(zeros.subarray(0, Math.min(left, zeros.length)));
    const sums = path.join(dir, "SHA256SUMS");
    const lines = fs.readFileSync(sums, "utf8").split("\n");
    fs.writeFileSync(
      sums,
      lines
        .map((line) => (line.endsWith(" exchanges.jsonl") ? `${hash.digest("hex")}  exchanges.jsonl` : line))
        .join("\n"),
    );
    const error = refusal(dir);
    expect(error.code, String(error)).toBe("usage");
    expect(error.message).toContain("exchanges.jsonl is larger than replay reads (256 MiB)");
  });

  it("exchanges.jsonl is read line by line: blank lines and a last line without LF are fine, a line past the exchange count is refused", () => {
    const dir = copy();
    const file = path.join(dir, "exchanges.jsonl");
    const text = fs.readFileSync(file, "utf8").trimEnd();
    fs.writeFileSync(file, `\n\n${text.split("\n").join("\n\n")}`);
    rehash(dir);
    expect(loadRecord(dir).exchanges.map((e) => e.seq)).toEqual(loadRecord(pristine).exchanges.map((e) => e.seq));
    fs.writeFileSync(file, "\n".repeat(100_001));
    rehash(dir);
    expect(refusal(dir).message).toContain("exchanges.jsonl has more than 100000 lines");
  });

  it("a recorded header HTTP cannot carry, or a request body of more values than the gateway takes, is refused at load (review, session 44)", () => {
    const edit = (
      change: (exchange: { request: { body: unknown }; response: { headers: Record<string, string> } }) => void,
    ) => {
      const dir = copy();
      const file = path.join(dir, "exchanges.jsonl");
      const [first, ...rest] = fs.readFileSync(file, "utf8").trimEnd().split("\n");
      const exchange = JSON.parse(first!);
      change(exchange);
      fs.writeFileSync(file, `${[JSON.stringify(exchange), ...rest].join("\n")}\n`);
      rehash(dir);
      return dir;
    };
    const header = refusal(edit((e) => void (e.response.headers["x-evil"] = "a\r\nb")));
    expect(header.code).toBe("usage");
    expect(header.message).toContain("holds a header name or value HTTP cannot carry");
    expect(refusal(edit((e) => void (e.response.headers["bad name"] = "x"))).message).toContain("HTTP cannot carry");
    // One string in the line, 1,000,001 values once replay parses it at a request.
    const values = refusal(edit((e) => void (e.request.body = { text: `[${"0,".repeat(1_000_000)}0]` })));
    expect(values.code).toBe("usage");
    expect(values.message).toContain("the recorded request's body cannot be parsed at a bounded cost");
  });

  it("listed files past 8 GiB in all are refused before any is hashed (review, session 44: ~25 minutes of hashing first)", () => {
    const dir = copy();
    // Two sparse files of 5 GiB (no disk used), each under the per-file cap, listed with any sum.
    for (const name of ["extra-1", "extra-2"]) {
      fs.writeFileSync(path.join(dir, name), "");
      fs.truncateSync(path.join(dir, name), 5 * 1024 ** 3);
      fs.appendFileSync(path.join(dir, "SHA256SUMS"), `${"0".repeat(64)}  ${name}\n`);
    }
    const error = refusal(dir);
    expect(error.code).toBe("usage");
    expect(error.message).toMatch(
      /holds \d+ MiB in the files SHA256SUMS lists, more than replay reads \(8 GiB in all\)/,
    );
  });

  it("a record of format 1 (no model traffic), re-hashed so its sums match, is refused with what to do", () => {
    const dir = copy();
    const metaFile = path.join(dir, "meta.json");
    const meta = JSON.parse(fs.readFileSync(metaFile, "utf8"));
    delete meta.format;
    fs.writeFileSync(metaFile, JSON.stringify(meta));
    rehash(dir);
    const error = refusal(dir);
    expect(error.message).toContain("holds no model traffic");
    expect(error.message).toContain("Record the run again");
  });
});
