// The proxy's own HTTPS client for a terminated tunnel, against a real HTTPS server on 127.0.0.1
// that holds its answers until the test lets them go.
import https from "node:https";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRunCa } from "../../src/proxy/run-ca.js";
import { createUpstream } from "../../src/proxy/upstream-client.js";

const ca = createRunCa({ label: "upstream test", hosts: ["api.test"], validForMs: 3_600_000 });
const held: Array<() => void> = [];
let arrived: () => void = () => {};
let server: https.Server;
let port: number;

beforeAll(async () => {
  server = https.createServer({ key: ca.leafKeyPem, cert: ca.issue("api.test") }, (req, res) => {
    req.resume();
    held.push(() => res.end("ok"));
    arrived();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(() => {
  server.closeAllConnections();
  server.close();
});

describe("upstream client", () => {
  it("holds at most 32 requests in flight: 8 on its sockets, 24 waiting, the next refused at once (EBUSY)", async () => {
    const upstream = createUpstream(
      { host: "api.test", port, address: "127.0.0.1", ca: [ca.certificatePem], connectTimeoutMs: 15_000 },
      false,
    );
    const ask = () =>
      upstream.request({
        method: "GET",
        path: "/",
        authority: "api.test",
        headers: {},
        body: Readable.from([]),
        hasBody: false,
      });
    const eight = new Promise<void>((resolve) => {
      arrived = () => held.length === 8 && resolve();
    });
    const answers = Array.from({ length: 32 }, ask);
    await eight;
    // Before, Node's agent queued every request past its 8 sockets, without limit.
    await expect(ask()).rejects.toMatchObject({ code: "EBUSY" });
    expect(held.length).toBe(8);
    // Answered (and read to the end), they make room again.
    arrived = () => held.shift()?.();
    for (const release of held.splice(0)) release();
    // Each answer read to its end frees its socket for a waiting request.
    await Promise.all(
      answers.map(async (answer) => {
        const { body } = await answer;
        await new Promise((resolve) => body.once("close", resolve).resume());
      }),
    );
    const again = await ask();
    again.body.resume();
    expect(again.status).toBe(200);
    upstream.close();
  });
});
