// The TLS terminator of a secret's tunnel, on a real TLS connection: whatever the request makes the
// code behind it throw stays with that connection (review, session 45: a throw in the relay's
// HTTP/2 listener ended the controller with every run of it).
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import { afterEach, describe, expect, it } from "vitest";
import { HostCertificates } from "../../src/proxy/cert-cache.js";
import { createRunCa } from "../../src/proxy/run-ca.js";
import { terminateTls } from "../../src/proxy/tls-terminator.js";

const closers: Array<() => void> = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

/** A listener whose connections are terminated with `onRequest`; resolves with its port. */
async function terminating(ca: ReturnType<typeof createRunCa>, onRequest: () => void): Promise<number> {
  const certificates = new HostCertificates(ca);
  const server = net.createServer((client) =>
    terminateTls(client, { certificate: certificates.for("api.example.test"), onRequest, onClose: () => {} }),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(() => server.close());
  return (server.address() as net.AddressInfo).port;
}

describe("terminateTls", () => {
  it("a request whose handling throws closes its own connection, over HTTP/1.1 and HTTP/2; nothing reaches the process", async () => {
    const ca = createRunCa({ label: "test", hosts: ["api.example.test"], validForMs: 60_000 });
    const port = await terminating(ca, () => {
      throw new Error("thrown by the code behind the terminator");
    });
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.on("uncaughtException", onUncaught);
    try {
      // HTTP/1.1: the connection closes without an answer.
      const h1 = tls.connect({ host: "127.0.0.1", port, servername: "api.example.test", ca: ca.certificatePem });
      h1.on("error", () => {});
      await new Promise<void>((resolve) => h1.once("secureConnect", () => resolve()));
      h1.write("GET / HTTP/1.1\r\nHost: api.example.test\r\n\r\n");
      let answered = "";
      h1.on("data", (chunk: Buffer) => void (answered += chunk.toString()));
      await new Promise<void>((resolve) => h1.once("close", () => resolve()));
      expect(answered).toBe("");

      // HTTP/2: the session ends.
      const h2 = http2.connect(`https://127.0.0.1:${port}`, { servername: "api.example.test", ca: ca.certificatePem });
      h2.on("error", () => {});
      const stream = h2.request({ ":path": "/", ":authority": "api.example.test" });
      stream.on("error", () => {});
      let status: unknown;
      stream.on("response", (headers) => void (status = headers[":status"]));
      stream.end();
      await new Promise<void>((resolve) => h2.once("close", () => resolve()));
      expect(status).toBeUndefined();

      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(uncaught).toEqual([]);
    } finally {
      process.off("uncaughtException", onUncaught);
    }
  });
});
