// Secrets: host files outside the roots are not readable, the provider key never enters the
// sandbox (environment, files, /proc, Pi's config dir) or the event stream, and `env` reaches
// the sandbox exactly as given and nothing more.
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { CliIo } from "../../src/cli/cli-io.js";
import { runCli } from "../../src/cli/program.js";
import { errorSummary } from "../../src/errors.js";
import { SCRUBBED } from "../../src/record/credential-scrubber.js";
import { makeWorkspace, SECRET_KEY } from "../support/harness.js";
import {
  bash,
  describeOutcome,
  finish,
  hostileWorkspace,
  readFile,
  runHostile,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();

describe.concurrent("secrets", () => {
  it("host files outside the roots (the caller's home, a world-readable directory, /root, /etc/shadow) are not readable", async () => {
    const secret = `home-secret-${crypto.randomBytes(8).toString("hex")}`;
    const homeFile = path.join(os.homedir(), `.sandbox-run-secret-${crypto.randomBytes(4).toString("hex")}`);
    fs.writeFileSync(homeFile, `${secret}\n`, { mode: 0o644 });
    // Readable by every uid on the host: only the mount boundary keeps it out.
    const openDir = hostileWorkspace({ "secret.txt": `${secret}\n` }, "sandbox-run-outside-");
    fs.chmodSync(openDir, 0o755);
    fs.chmodSync(path.join(openDir, "secret.txt"), 0o644);
    try {
      const outcome = await runHostile(server, [
        bash(
          [
            "exec 2>&1", // one stream, so each error line comes before its rc line
            `cat ${homeFile}; echo "home rc=$?"`,
            `cat ${openDir}/secret.txt; echo "open rc=$?"`,
            'ls -la /root; echo "root-dir rc=$?"',
            'cat /etc/shadow; echo "shadow rc=$?"',
            `grep -rs ${secret.slice(0, 12)} / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | head -3; echo "grep done"`,
          ].join("\n"),
        ),
        readFile(homeFile),
        readFile(`${openDir}/secret.txt`),
        finish(),
      ]);
      expect(outcome.details, describeOutcome(outcome)).toBeDefined();
      // The caller's home is not mounted: the path is the image's /root (root-only) or nothing.
      expect(outcome.toolResults[0]).toMatch(/(No such file or directory|Permission denied)\nhome rc=1/);
      expect(outcome.toolResults[0]).toMatch(/No such file or directory\nopen rc=1/);
      expect(outcome.toolResults[0]).toMatch(/shadow: Permission denied[\s\S]*shadow rc=1/);
      expect(outcome.toolResults[0]).toContain("grep done");
      expect(outcome.toolResults.join("\n")).not.toContain(secret);
    } finally {
      fs.rmSync(homeFile, { force: true });
    }
  });

  it("the provider key is nowhere in the sandbox: environment, /proc/*/environ, files, Pi's config dir", async () => {
    const ws = hostileWorkspace();
    // Dump everything a key could hide in into the workspace; the host searches it afterwards
    // (a search pattern inside the sandbox would itself contain the key).
    const outcome = await runHostile(
      server,
      [
        bash(
          [
            "env > env.txt",
            "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat $f 2>/dev/null; echo; done > proc.txt",
            "tar cf files.tar /home/sandbox /tmp /run /etc /opt/sandbox-run/launcher.mjs /opt/sandbox-run/final-tool.mjs 2>/dev/null",
            "cp /home/sandbox/.pi/agent/models.json models.json",
            "wc -c env.txt proc.txt files.tar models.json",
          ].join("\n"),
        ),
        finish(),
      ],
      { cwd: ws },
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    const dumped = ["env.txt", "proc.txt", "files.tar", "models.json"].map((f) => fs.readFileSync(path.join(ws, f)));
    for (const bytes of dumped) expect(bytes.length).toBeGreaterThan(0);
    for (const bytes of dumped) expect(bytes.includes(SECRET_KEY)).toBe(false);
    // Pi's models.json points at the gateway with a placeholder; the launcher config is gone from env.
    const models = fs.readFileSync(path.join(ws, "models.json"), "utf8");
    expect(models).toContain("127.0.0.1:18080");
    expect(fs.readFileSync(path.join(ws, "env.txt"), "utf8")).not.toContain("SANDBOX_RUN_CONFIG");
    // The key was in play: the host added it to every model request ...
    expect(outcome.requests.length).toBeGreaterThan(0);
    for (const request of outcome.requests) expect(request.headers.authorization).toBe(`Bearer ${SECRET_KEY}`);
    // ... and it is not in the event stream either.
    expect(JSON.stringify(outcome.events)).not.toContain(SECRET_KEY);
  });

  it("a key the caller passes in env for the provider stays on the host; other env values arrive exactly as given", async () => {
    const hostOnly = `SANDBOX_RUN_TEST_HOST_ONLY_${crypto.randomBytes(3).toString("hex").toUpperCase()}`;
    process.env[hostOnly] = "host-only-value";
    try {
      const keyVar = "HOSTILE_PROVIDER_KEY";
      const given = "spaces and = signs, 'quotes' \"double\" $dollar `tick` ünïcödé";
      const outcome = await runHostile(
        server,
        [
          bash(
            "env -0 | tr '\\0' '\\n' | grep -E '^(GIVEN|REMOVED|HOSTILE|OPENAI|SANDBOX_RUN|PATH=)' | sort; echo \"given=[$GIVEN]\"",
          ),
          finish(),
        ],
        {
          modelsJson: (id) => ({
            providers: {
              scripted: {
                baseUrl: server.baseUrl,
                api: "openai-completions",
                apiKey: `$${keyVar}`,
                models: [{ id, contextWindow: 32000, maxTokens: 4096 }],
              },
            },
          }),
          agent: {
            env: { REMOVED: "set by the constructor", GIVEN: "overridden" },
          },
          env: { [keyVar]: SECRET_KEY, OPENAI_API_KEY: "sk-openai-given", GIVEN: given, REMOVED: undefined },
        },
      );
      expect(outcome.details, describeOutcome(outcome)).toBeDefined();
      const printed = outcome.toolResults[0] ?? "";
      expect(printed).toContain(`given=[${given}]`);
      expect(printed).not.toContain("REMOVED");
      expect(printed).not.toContain(hostOnly);
      expect(printed).not.toContain(keyVar);
      expect(printed).not.toContain("sk-openai-given");
      expect(printed).not.toContain(SECRET_KEY);
      // The image's PATH, not the host's.
      expect(printed).toMatch(/^PATH=.*\/opt\/sandbox-run\/node\/bin:/m);
      expect(printed).not.toContain(`PATH=${process.env.PATH}\n`);
      // The key from env was used, on the host side of the gateway.
      for (const request of outcome.requests) expect(request.headers.authorization).toBe(`Bearer ${SECRET_KEY}`);
      expect(JSON.stringify(outcome.events)).not.toContain(SECRET_KEY);
    } finally {
      delete process.env[hostOnly];
    }
  });
  it("a model reply quoting the key (a tool call whose arguments hold it) reaches Pi scrubbed, the conversation stays one chain, and the result is the model's", async () => {
    // The scripted server streams the arguments in two halves: the key sits in the first, whole.
    const command = `printf '%s' "looking for ${SECRET_KEY}" | wc -c; : ${"x".repeat(400)}`;
    const outcome = await runHostile(server, [bash(command), finish()]);
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    // Pi ran what it received: the marker in the key's place.
    expect(outcome.toolResults[0]?.trim()).toBe(String(`looking for ${SCRUBBED}`.length));
    // The host's reply parser read the same scrubbed reply, so Pi's next request continues it.
    const chain = outcome.events
      .filter((e) => e.type === "gateway.exchange")
      .map((e) => (e.data as { chain?: string }).chain);
    expect(chain).toEqual(["first", "extension"]);
    expect(JSON.stringify(outcome.events)).not.toContain(SECRET_KEY);
  });

  it("a provider that quotes the key back (401) hands it to nobody: the sandbox, Pi's events, the error, the CLI's --json envelope, stderr and --events", async () => {
    const b64 = Buffer.from(SECRET_KEY).toString("base64");
    const quoted = `Incorrect API key provided: ${SECRET_KEY} (as JSON ${JSON.stringify(JSON.stringify(SECRET_KEY))}, base64 ${b64})`;
    const forms = [SECRET_KEY, b64.slice(2, -2)];
    const leaks = (text: string) => forms.filter((form) => text.includes(form));
    // The sandbox asks the gateway itself (as any code in it could; one assistant turn in, so the
    // scripted server answers with its second step) and prints what came back; then Pi's own next
    // request is answered the same way.
    const ask = [
      "const m = require('/home/sandbox/.pi/agent/models.json');",
      "const p = Object.values(m.providers)[0];",
      "fetch(p.baseUrl + '/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer ' + p.apiKey },",
      "  body: JSON.stringify({ model: p.models[0].id, messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'again' }] }) })",
      "  .then(async (r) => console.log('status=' + r.status + ' headers=' + JSON.stringify([...r.headers]) + ' body=' + await r.text()));",
    ].join(" ");
    const outcome = await runHostile(server, [
      bash(`node -e "${ask.replace(/"/g, '\\"')}"`),
      { httpStatus: 401, body: quoted },
      { httpStatus: 401, body: quoted },
      { httpStatus: 401, body: quoted },
    ]);
    // The upstream did quote it, to the gateway.
    expect(outcome.requests.length).toBeGreaterThanOrEqual(3);
    for (const request of outcome.requests) expect(request.headers.authorization).toBe(`Bearer ${SECRET_KEY}`);
    // What the sandbox got (its tool result, as Pi sent it on to the model).
    const sandboxSaw = outcome.toolResults.join("\n");
    expect(sandboxSaw).toContain("status=401");
    expect(sandboxSaw).toContain(`Incorrect API key provided: ${SCRUBBED}`);
    expect(leaks(sandboxSaw)).toEqual([]);
    // What the run reported: Pi's events, the sandbox's, the error.
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("model-error");
    expect(leaks(JSON.stringify(outcome.events))).toEqual([]);
    const error = outcome.error!;
    const reported = [
      error.message,
      error.stack ?? "",
      JSON.stringify(errorSummary(error)),
      JSON.stringify(error.lastEvents),
    ];
    expect(leaks(reported.join("\n"))).toEqual([]);

    // The same through the CLI: --json envelope, stderr, --events.
    const modelId = `quoting-${crypto.randomBytes(5).toString("hex")}`;
    server.setScript(modelId, [
      { httpStatus: 401, body: quoted },
      { httpStatus: 401, body: quoted },
    ]);
    const dir = hostileWorkspace({}, "sandbox-run-quoting-");
    const modelsFile = path.join(dir, "models.json");
    fs.writeFileSync(
      modelsFile,
      JSON.stringify({
        providers: {
          scripted: {
            baseUrl: server.baseUrl,
            api: "openai-completions",
            apiKey: SECRET_KEY,
            models: [{ id: modelId }],
          },
        },
      }),
    );
    const eventsFile = path.join(dir, "events.jsonl");
    let stdout = "";
    let stderr = "";
    const io: CliIo = {
      stdout: (t) => void (stdout += t),
      stderr: (t) => void (stderr += t),
      readStdin: async () => undefined,
      env: { PATH: process.env.PATH ?? "" },
      stderrIsTty: false,
    };
    const argv = ["--cwd", makeWorkspace(), "--models", modelsFile, "--model", `scripted/${modelId}`];
    const code = await runCli([...argv, "--json", "--events", eventsFile, "hi"], io);
    expect(code, stderr).not.toBe(0);
    const envelope = JSON.parse(stdout);
    expect(envelope.error.code).toBe("model-error");
    expect(stdout).toContain(SCRUBBED);
    expect(leaks(stdout)).toEqual([]);
    expect(leaks(stderr)).toEqual([]);
    const events = fs.readFileSync(eventsFile, "utf8");
    expect(events).toContain('"source":"pi"');
    expect(leaks(events)).toEqual([]);
  });
});
