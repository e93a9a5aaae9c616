// The turn budget at the gateway (issue 10 item 3): a generation counts when it is forwarded;
// only an upstream that turns it down (non-2xx) or cannot be reached gives it back. A client that
// gives up while the upstream holds its answer has still spent a generation.
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { GenerationBudget } from "../../src/gateway/generation-budget.js";
import { type GatewayRequestRecord, type ModelGateway, startModelGateway } from "../../src/gateway/model-gateway.js";
import { chatBody, request, waitFor } from "../support/gateway-client.js";

describe("GenerationBudget", () => {
  it("counts at take, refuses past the limit, refunds once per ticket", () => {
    const budget = new GenerationBudget(2);
    const first = budget.take();
    const second = budget.take();
    expect(first && second).toBeTruthy();
    expect(budget.take()).toBeUndefined();
    expect(budget.spent).toBe(2);
    second!.refund();
    second!.refund();
    expect(budget.spent).toBe(1);
    expect(budget.take()).toBeDefined();
    expect(budget.take()).toBeUndefined();
    expect(new GenerationBudget(undefined).take()).toBeDefined();
  });

  it("gives nothing once stopped, whatever is left of the limit", () => {
    const budget = new GenerationBudget(undefined);
    expect(budget.take()).toBeDefined();
    budget.stop("timeout");
    budget.stop("limit turns");
    expect(budget.stopped).toBe("timeout");
    expect(budget.take()).toBeUndefined();
  });
});

describe("model gateway: turn budget", () => {
  let dir: string;
  let gateway: ModelGateway | undefined;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), "sr-gw-budget-"));
  });
  afterEach(async () => {
    await gateway?.close();
    gateway = undefined;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** An upstream that takes every request and never answers (until closed). */
  async function startHoldingUpstream() {
    let arrived = 0;
    const waiting: Array<() => void> = [];
    const server = http.createServer((req) => {
      req.resume();
      req.on("end", () => {
        arrived++;
        for (const wake of waiting.splice(0)) wake();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return {
      baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
      arrived: () => arrived,
      nextArrival: () => new Promise<void>((resolve) => waiting.push(resolve)),
      close: () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    };
  }

  it("20 requests that give up while the upstream holds its answer: with a budget of 2, at most 2 reach it", async () => {
    const upstream = await startHoldingUpstream();
    const exceeded: number[] = [];
    const records: GatewayRequestRecord[] = [];
    try {
      gateway = await startModelGateway({
        socketPath: path.join(dir, "hold.sock"),
        routes: [{ id: "r", upstreamBaseUrl: upstream.baseUrl, api: "openai-completions", model: "m", headers: {} }],
        maxGenerations: 2,
        onBudgetExceeded: (attempted) => exceeded.push(attempted),
        onRequest: (record) => records.push(record),
      });
      const socketPath = gateway.socketPath;
      const outcomes: string[] = [];
      for (let i = 0; i < 20; i++) {
        // Each client gives up as soon as its request reached the upstream, or takes the gateway's answer.
        outcomes.push(
          await new Promise<string>((resolve, reject) => {
            const req = http.request(
              {
                socketPath,
                method: "POST",
                path: "/r/chat/completions",
                headers: { "content-type": "application/json" },
              },
              (res) => {
                res.resume();
                resolve(`answered ${res.statusCode}`);
              },
            );
            req.on("error", (error) => (req.destroyed ? resolve("gave up") : reject(error)));
            void upstream.nextArrival().then(() => {
              req.destroy();
              resolve("gave up");
            });
            req.end(chatBody("m", true));
          }),
        );
      }
      expect(upstream.arrived()).toBe(2);
      expect(outcomes.filter((o) => o === "gave up")).toHaveLength(2);
      expect(outcomes.filter((o) => o === "answered 429")).toHaveLength(18);
      expect(exceeded[0]).toBe(3);
      await waitFor(() => records.length === 20);
      expect(records.filter((r) => r.reason === "turn-budget")).toHaveLength(18);
      expect(records.filter((r) => r.status === 499)).toHaveLength(2);
    } finally {
      await upstream.close();
    }
  });

  it("after stopForwarding (the run tripped) refuses every model request, naming why, and none reaches the upstream", async () => {
    const upstream = await startHoldingUpstream();
    const exceeded: number[] = [];
    const records: GatewayRequestRecord[] = [];
    try {
      gateway = await startModelGateway({
        socketPath: path.join(dir, "stopped.sock"),
        routes: [{ id: "r", upstreamBaseUrl: upstream.baseUrl, api: "openai-completions", model: "m", headers: {} }],
        maxGenerations: 100,
        onBudgetExceeded: (attempted) => exceeded.push(attempted),
        onRequest: (record) => records.push(record),
      });
      gateway.stopForwarding("invalid-result");
      const replies = await Promise.all(
        Array.from({ length: 3 }, () =>
          request(gateway!.socketPath, {
            method: "POST",
            path: "/r/chat/completions",
            headers: { "content-type": "application/json" },
            body: chatBody("m", true),
          }),
        ),
      );
      for (const reply of replies) {
        expect(reply.status).toBe(429);
        expect(reply.body).toContain("the run has stopped (invalid-result)");
      }
      expect(upstream.arrived()).toBe(0);
      // Not a budget overrun: the run already has its outcome.
      expect(exceeded).toEqual([]);
      await waitFor(() => records.length === 3);
      expect(records.map((r) => r.reason)).toEqual(["run-stopped", "run-stopped", "run-stopped"]);
    } finally {
      await upstream.close();
    }
  });

  it("gives a generation back when the upstream cannot be reached", async () => {
    const closedPort = await new Promise<number>((resolve) => {
      const probe = net.createServer();
      probe.listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    gateway = await startModelGateway({
      socketPath: path.join(dir, "down.sock"),
      routes: [
        {
          id: "down",
          upstreamBaseUrl: `http://127.0.0.1:${closedPort}/v1`,
          api: "openai-completions",
          model: "m",
          headers: {},
        },
      ],
      maxGenerations: 1,
    });
    for (let i = 0; i < 3; i++) {
      const reply = await request(gateway.socketPath, {
        method: "POST",
        path: "/down/chat/completions",
        headers: { "content-type": "application/json" },
        body: chatBody("m"),
      });
      expect(reply.status).toBe(502);
    }
  });
});

describe("model gateway: the host's verdicts come before the next request (review, session 36)", () => {
  it("a generation waits for beforeGeneration; a stop meanwhile refuses it, and it never reaches the upstream", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "sr-gw-verdict-"));
    let arrived = 0;
    const upstream = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        arrived++;
        res.writeHead(500).end();
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
    let judged: () => void = () => {};
    const verdict = new Promise<void>((resolve) => {
      judged = resolve;
    });
    const gateway = await startModelGateway({
      socketPath: path.join(dir, "verdict.sock"),
      routes: [
        {
          id: "r",
          upstreamBaseUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`,
          api: "openai-completions",
          model: "m",
          headers: {},
        },
      ],
      beforeGeneration: () => verdict,
    });
    try {
      const pending = request(gateway.socketPath, {
        method: "POST",
        path: "/r/chat/completions",
        headers: { "content-type": "application/json" },
        body: chatBody("m"),
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(arrived).toBe(0);
      // The verdict stops the run (as the invalid-result watch's trip does), then comes in.
      gateway.stopForwarding("invalid-result");
      judged();
      const reply = await pending;
      expect(reply.status).toBe(429);
      expect(arrived).toBe(0);
    } finally {
      await gateway.close();
      await new Promise<void>((resolve) => upstream.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
