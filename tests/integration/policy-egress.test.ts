// Network mode "allowlist" end to end: real engine, real image, real Pi, real HTTPS to the npm
// registry through the host-side egress proxy (the registry and Debian mirrors are the only
// outside hosts reachable from CI machines; nothing else is ever contacted: the denied host is
// refused by the proxy before any lookup). Uses the shipped example policy, so the example is
// known to work, on runc and on gVisor.
import dns from "node:dns/promises";
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
    server = await startModel({
      allowlist: script(commands),
      "allowlist-runsc": script(commands),
      "no-network": script(commands),
    });
    agent = new ContainerPiAgent({ models: modelsFor(server, ["allowlist", "allowlist-runsc", "no-network"]) });
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
