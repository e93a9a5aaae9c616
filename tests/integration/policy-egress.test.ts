// Network mode "allowlist" end to end: real engine, real image, real Pi, real HTTPS to the npm
// registry through the host-side egress proxy (the registry and Debian mirrors are the only
// outside hosts reachable from CI machines; nothing else is ever contacted: the denied host is
// refused by the proxy before any lookup). Uses the shipped example policy, so the example is
// known to work, on runc and on gVisor.
import dns from "node:dns/promises";
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import type { ScriptedModelServer } from "../../src/scripted-model/scripted-model-server.js";
import {
  containersOfRuns,
  dockerAvailable,
  eventLog,
  lastToolResult,
  makeWorkspace,
  modelsFor,
  startModel,
} from "../support/harness.js";

const examplePolicy = path.resolve(import.meta.dirname, "../../policies/examples/npm-install.json");

/** Node inside the sandbox: what one fetch did, on one line. */
const fetchLine = (label: string, url: string) =>
  `node -e 'fetch(${JSON.stringify(url)}).then(async (r) => console.log("${label}", r.status, (await r.json()).name ?? ""), (e) => console.log("${label} failed:", e.cause?.code ?? e.message))'`;

/** Node inside the sandbox: a TCP connection that ignores the proxy. */
const directLine = (address: string) =>
  `node -e 'const s = require("net").connect(443, ${JSON.stringify(address)}); s.on("connect", () => { console.log("direct connected"); s.destroy(); }); s.on("error", (e) => console.log("direct failed:", e.code))'`;

describe.skipIf(!dockerAvailable())("network allowlist through the egress proxy", () => {
  let server: ScriptedModelServer;
  let agent: ContainerPiAgent;
  let registryAddress: string;
  const script = (command: string) => [{ toolCalls: [{ name: "bash", arguments: { command } }] }, { text: "done" }];

  beforeAll(async () => {
    // The registry's address as the host sees it: the direct connection below targets it, so
    // the only thing between the sandbox and the registry is the missing network interface.
    registryAddress = (await dns.lookup("registry.npmjs.org")).address;
    const commands = [
      fetchLine("registry", "https://registry.npmjs.org/is-number"),
      fetchLine("example", "https://example.com/"),
      directLine(registryAddress),
      `node -e 'require("dns").lookup("registry.npmjs.org", (e, a) => console.log("dns:", e ? e.code : a))'`,
      'echo "proxy=$HTTPS_PROXY"',
    ].join("; ");
    const npmInstall = [
      "exec 2>&1",
      "npm --version",
      'npm install --no-audit --no-fund is-number@7.0.0 > /tmp/npm.log; echo "npm rc=$?"; tail -3 /tmp/npm.log',
      `node -e 'console.log("is-number(5):", require("is-number")(5))'`,
    ].join("\n");
    server = await startModel({
      allowlist: script(commands),
      "allowlist-runsc": script(commands),
      "no-network": script(commands),
      "npm-install": script(npmInstall),
    });
    agent = new ContainerPiAgent({
      models: modelsFor(server, ["allowlist", "allowlist-runsc", "no-network", "npm-install"]),
    });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("reaches an allowed host over real HTTPS, is refused elsewhere, and has no direct route (runc)", async () => {
    const log = eventLog();
    const details = await agent.runDetailed("install", {
      cwd: makeWorkspace(),
      model: "scripted/allowlist",
      policy: examplePolicy,
      onEvent: log.onEvent,
    });
    expect(details.result).toBe("done");
    const out = lastToolResult(server, "allowlist");
    // The registry answered through the proxy's tunnel (TLS verified against the host CA bundle).
    expect(out).toContain("registry 200 is-number");
    // example.com was refused by the proxy: fetch fails, and the decision is in the events.
    expect(out).toMatch(/example failed:/);
    expect(out).not.toMatch(/example \d{3}/);
    // No interface: a connection that ignores the proxy goes nowhere, and no DNS leaves the sandbox.
    expect(out).toMatch(/direct failed: (ENETUNREACH|EHOSTUNREACH|ECONNREFUSED)/);
    expect(out).not.toContain("direct connected");
    expect(out).toMatch(/dns: (EAI_AGAIN|ENOTFOUND)/);
    expect(out).toContain("proxy=http://127.0.0.1:18081");

    const allowed = log.ofType("egress.allowed").map((e) => e.data);
    const denied = log.ofType("egress.denied").map((e) => e.data);
    expect(allowed).toEqual([
      expect.objectContaining({
        host: "registry.npmjs.org",
        port: 443,
        method: "CONNECT",
        address: registryAddress,
        reason: "matches allowedDomains entry registry.npmjs.org",
      }),
    ]);
    expect(denied).toEqual([
      {
        host: "example.com",
        port: 443,
        method: "CONNECT",
        reason: "example.com is not in the policy's allowedDomains",
      },
    ]);
    expect(
      log.events.find((e) => e.source === "sandbox" && e.type.startsWith("egress.") && e.data.host === registryAddress),
    ).toBeUndefined();
    expect(await containersOfRuns(log.runIds())).toEqual([]);
  });

  it("works the same on gVisor (runsc): loopback forwarders and host unix sockets", async () => {
    const log = eventLog();
    const details = await agent.runDetailed("install", {
      cwd: makeWorkspace(),
      model: "scripted/allowlist-runsc",
      policy: examplePolicy,
      runtime: "runsc",
      onEvent: log.onEvent,
    });
    expect(details.result).toBe("done");
    expect(log.ofType("run.planned")[0]?.data.runtime).toBe("runsc");
    const out = lastToolResult(server, "allowlist-runsc");
    expect(out).toContain("registry 200 is-number");
    expect(out).toMatch(/example failed:/);
    expect(out).not.toContain("direct connected");
    expect(log.ofType("egress.allowed").map((e) => e.data.host)).toEqual(["registry.npmjs.org"]);
    expect(log.ofType("egress.denied").map((e) => e.data.host)).toEqual(["example.com"]);
    expect(await containersOfRuns(log.runIds())).toEqual([]);
  });

  it("npm install of a real package works with the default image and the example policy", async () => {
    const log = eventLog();
    const cwd = makeWorkspace();
    const details = await agent.runDetailed("install is-number", {
      cwd,
      model: "scripted/npm-install",
      policy: examplePolicy,
      onEvent: log.onEvent,
    });
    expect(details.result).toBe("done");
    const out = lastToolResult(server, "npm-install");
    // The image's own npm, the one Node 24.22.3 ships (images/pi/package.json pins it).
    expect(out).toMatch(/^11\.19\.1$/m);
    expect(out).toContain("npm rc=0");
    expect(out).toContain("is-number(5): true");
    const installed = JSON.parse(fs.readFileSync(path.join(cwd, "node_modules/is-number/package.json"), "utf8"));
    expect(installed.version).toBe("7.0.0");
    expect(details.changedFiles.created).toEqual(expect.arrayContaining(["package.json", "package-lock.json"]));
    // Only the registry was asked for, through the proxy's tunnel.
    expect(new Set(log.ofType("egress.allowed").map((e) => e.data.host))).toEqual(new Set(["registry.npmjs.org"]));
    expect(log.ofType("egress.denied")).toEqual([]);
    expect(await containersOfRuns(log.runIds())).toEqual([]);
  });

  it("control: under network none the same commands reach nothing and no proxy exists", async () => {
    const log = eventLog();
    await agent.runDetailed("install", {
      cwd: makeWorkspace(),
      model: "scripted/no-network",
      sandbox: "workspace-write",
      onEvent: log.onEvent,
    });
    const out = lastToolResult(server, "no-network");
    expect(out).toMatch(/registry failed:/);
    expect(out).not.toMatch(/registry \d{3}/);
    expect(out).toContain("proxy=\n");
    expect(log.events.filter((e) => e.type.startsWith("egress."))).toEqual([]);
  });
});
