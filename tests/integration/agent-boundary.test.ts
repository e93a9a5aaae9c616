// The boundary on the real engine: what the sandbox can write, who owns what it writes, what
// it cannot see, and that the provider key never enters the container.
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { SANDBOX_PLACEHOLDER_API_KEY } from "../../src/gateway/provider-routes.js";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import {
  checkNoContainersLeftAfterEach,
  docker,
  dockerAvailable,
  lastToolResult,
  makeWorkspace,
  modelsFor,
  runtimes,
  SECRET_KEY,
  startModel,
} from "../support/harness.js";

/** One bash step, then a plain text answer. */
const bashThenText = (command: string) => [{ toolCalls: [{ name: "bash", arguments: { command } }] }, { text: "done" }];

const callerUid = process.getuid!();
const callerGid = process.getgid!();
const asRoot = callerUid === 0;
/** An owner that is not the caller, for pre-existing files (only root can give files away). */
const OTHER = asRoot ? { uid: 1234, gid: 2345 } : { uid: callerUid, gid: callerGid };
const OPENAI_SECRET = "sk-openai-host-SECRET-e83b";

const ownerOf = (file: string) => {
  const stat = fs.lstatSync(file);
  return { uid: stat.uid, gid: stat.gid };
};

describe.skipIf(!dockerAvailable()).each(runtimes())("the sandbox boundary (%s)", (runtime) => {
  let server: ScriptedModelServer;
  let agent: ContainerPiAgent;
  const runs = checkNoContainersLeftAfterEach();
  const dirs: string[] = [];
  const workspace = (files: Record<string, string> = {}) => {
    const dir = makeWorkspace(files);
    dirs.push(dir);
    return dir;
  };

  beforeAll(async () => {
    server = await startModel();
    agent = new ContainerPiAgent({
      runtime,
      models: modelsFor(server, ["read-only", "ownership", "writable-root", "secrets"]),
      // A credential the caller passes on purpose, and an ordinary variable.
      env: { OPENAI_API_KEY: OPENAI_SECRET, VISIBLE_VAR: "visible-value" },
      onEvent: runs.onEvent,
    });
  });

  afterAll(async () => {
    await server?.close();
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("read-only: the agent cannot write the workspace and the host files stay unchanged", async () => {
    const ws = workspace({ "notes.txt": "original\n", "closed.txt": "closed-content\n" });
    fs.chmodSync(path.join(ws, "closed.txt"), 0o600);
    const before = fs.statSync(path.join(ws, "notes.txt"));
    const closedOwner = ownerOf(path.join(ws, "closed.txt"));
    server.setScript(
      "read-only",
      bashThenText(
        "cat notes.txt closed.txt; printf '#!/bin/sh\\necho tmp-exec-ok\\n' > /tmp/t && chmod +x /tmp/t && /tmp/t; " +
          "printf '#!/bin/sh\\necho home-exec-ok\\n' > ~/t && chmod +x ~/t && ~/t; " +
          "command -v ps patch unzip less xz >/dev/null && ps >/dev/null && echo everyday-tools-ok; " +
          "touch notes.txt; echo touch-rc=$?; echo changed > notes.txt; echo write-rc=$?; " +
          "touch new.txt; echo create-rc=$?; rm -f notes.txt; echo rm-rc=$?",
      ),
    );
    const result = await agent.run("Try to change things.", {
      cwd: ws,
      model: "scripted/read-only",
      sandbox: "read-only",
    });
    expect(result).toBe("done");

    const output = lastToolResult(server, "read-only");
    expect(output).toContain("original"); // it could read
    expect(output).toContain("closed-content"); // a 0600 file too (a root caller lends it)
    // A build's binaries run from /tmp (`go test`), the one place a read-only run can build in.
    expect(output).toContain("tmp-exec-ok");
    // And from $HOME: npx and `npm exec` run what they install in ~/.npm/_npx (session 29).
    expect(output).toContain("home-exec-ok");
    // ps, patch, unzip, less, xz: busybox's applets, last on PATH (session 29: "command not found").
    expect(output).toContain("everyday-tools-ok");
    expect(output).toContain("Read-only file system");
    for (const step of ["touch", "write", "create", "rm"]) expect(output).toContain(`${step}-rc=1`);

    expect(fs.readdirSync(ws).sort()).toEqual(["closed.txt", "notes.txt"]);
    expect(fs.readFileSync(path.join(ws, "notes.txt"), "utf8")).toBe("original\n");
    expect(fs.statSync(path.join(ws, "notes.txt")).mtimeMs).toBe(before.mtimeMs);
    // A file the sandbox could read as it was is not lent: its ctime does not move (review, session
    // 27: a root caller's read-only run chowned every file twice, and git status re-read them all).
    expect(fs.statSync(path.join(ws, "notes.txt")).ctimeMs).toBe(before.ctimeMs);
    expect(ownerOf(path.join(ws, "closed.txt"))).toEqual(closedOwner);
  });

  it("workspace-write: new files belong to the caller, existing files keep their owner, the sandbox is never uid 0", async () => {
    const ws = workspace({ "existing.txt": "line 1\n", "sub/kept.txt": "kept\n" });
    fs.chownSync(path.join(ws, "existing.txt"), OTHER.uid, OTHER.gid);
    fs.chownSync(path.join(ws, "sub"), OTHER.uid, OTHER.gid);
    const rootOwner = ownerOf(ws);
    server.setScript(
      "ownership",
      bashThenText(
        "echo uid=$(id -u); echo new > created.txt; mkdir -p made/deeper && echo x > made/deeper/f.txt; " +
          "echo 'line 2' >> existing.txt; echo in-sub > sub/added.txt; echo rc=$?",
      ),
    );
    await agent.run("Write some files.", { cwd: ws, model: "scripted/ownership", sandbox: "workspace-write" });

    const output = lastToolResult(server, "ownership");
    expect(output).toContain(`uid=${asRoot ? 65532 : callerUid}`);
    expect(output).toContain("rc=0");

    const caller = { uid: callerUid, gid: callerGid };
    for (const created of ["created.txt", "made", "made/deeper", "made/deeper/f.txt", "sub/added.txt"]) {
      expect({ file: created, ...ownerOf(path.join(ws, created)) }).toEqual({ file: created, ...caller });
    }
    expect(fs.readFileSync(path.join(ws, "made/deeper/f.txt"), "utf8")).toBe("x\n");
    // Pre-existing entries: modified or not, their owner is what it was.
    expect(fs.readFileSync(path.join(ws, "existing.txt"), "utf8")).toBe("line 1\nline 2\n");
    expect(ownerOf(path.join(ws, "existing.txt"))).toEqual(OTHER);
    expect(ownerOf(path.join(ws, "sub"))).toEqual(OTHER);
    expect(ownerOf(path.join(ws, "sub/kept.txt"))).toEqual(caller);
    expect(ownerOf(ws)).toEqual(rootOwner);
  });

  it("an extra writable root is writable; a host directory outside every mount is not visible", async () => {
    const ws = workspace();
    const extra = workspace();
    const outside = workspace({ "private.txt": "outside-content-d41d" });
    server.setScript(
      "writable-root",
      bashThenText(
        `echo hello > ${extra}/out.txt; echo extra-rc=$?; ls ${outside}; echo ls-rc=$?; cat ${outside}/private.txt; ` +
          `echo cat-rc=$?; echo ---parent---; ls -a ${path.dirname(outside)}`,
      ),
    );
    await agent.run("Use the cache.", {
      cwd: ws,
      model: "scripted/writable-root",
      additionalWritableDirectories: [extra],
    });

    const output = lastToolResult(server, "writable-root");
    expect(output).toContain("extra-rc=0");
    expect(fs.readFileSync(path.join(extra, "out.txt"), "utf8")).toBe("hello\n");
    expect(ownerOf(path.join(extra, "out.txt"))).toEqual({ uid: callerUid, gid: callerGid });

    // coreutils ls (runc) or busybox ls (runsc, see images/pi/Dockerfile) word it differently.
    expect(output).toMatch(new RegExp(`ls: (cannot access )?'?${outside}'?: No such file or directory`));
    expect(output).toMatch(/ls-rc=[12]/);
    expect(output).toMatch(/cat-rc=1/);
    expect(output).not.toContain("outside-content-d41d");
    // The parent (/tmp on the host) shows only what is mounted, not its other entries.
    const parentListing = output
      .split("---parent---")[1]!
      .split("\n")
      .map((l) => l.trim());
    expect(parentListing).toEqual(expect.arrayContaining([path.basename(ws), path.basename(extra)]));
    expect(parentListing).not.toContain(path.basename(outside));
  });

  it("the provider key never enters the container; the upstream still gets it", async () => {
    const ws = workspace();
    server.setScript(
      "secrets",
      bashThenText(
        "env; echo ---models---; cat /home/sandbox/.pi/agent/models.json; echo; echo ---pid1---; cat /proc/1/environ | tr '\\0' '\\n'",
      ),
    );
    let inspected: Promise<unknown> | undefined;
    const result = await agent.run("Show me your environment.", {
      cwd: ws,
      model: "scripted/secrets",
      onEvent: (event) => {
        // What Docker stores about the container (env, labels, command) must not hold it either.
        if (event.type === "container.created")
          inspected = docker.getContainer(String(event.data.containerId)).inspect();
      },
    });
    expect(result).toBe("done");

    const output = lastToolResult(server, "secrets");
    // The commands ran: the caller's variable and the placeholder models.json are there...
    expect(output).toContain("VISIBLE_VAR=visible-value");
    expect(output).toContain(SANDBOX_PLACEHOLDER_API_KEY);
    expect(output).toContain("HOME=/home/sandbox");
    // ...and no key, neither the models.json one nor the host credential the caller passed.
    expect(output).not.toContain(SECRET_KEY);
    expect(output).not.toContain(OPENAI_SECRET);
    expect(output).not.toContain("OPENAI_API_KEY");
    // The launcher removes its configuration from the environment Pi's tools inherit; PID 1's
    // initial environment (read above, so the key checks cover it) may still hold it.
    expect(output.split("---models---")[0]).not.toContain("SANDBOX_RUN_CONFIG");
    expect(output.split("---pid1---")[1]).toContain("HOME=/home/sandbox");
    expect(JSON.stringify(await inspected)).not.toContain(SECRET_KEY);
    expect(JSON.stringify(await inspected)).not.toContain(OPENAI_SECRET);

    const requests = server.requests.filter((r) => r.body.model === "secrets");
    expect(requests.length).toBe(2);
    for (const request of requests) expect(request.headers.authorization).toBe(`Bearer ${SECRET_KEY}`);
  });
});
