// A forwarded request's body is framed again for HTTP/1.1 (src/http/request-framing.ts): chunked
// where it has no Content-Length, and held to the Content-Length it has.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { framedRequestHeaders, http1RequestHasBody, sendRequestBody } from "../../src/http/request-framing.js";

const parsed: Array<{ url?: string; body: string }> = [];
let server: http.Server;
let port: number;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      parsed.push({ url: req.url, body: Buffer.concat(chunks).toString() });
      res.end("ok");
    });
    req.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(() => {
  server.closeAllConnections();
  server.close();
});

/** Sends a GET through sendRequestBody; resolves with the status, or the request's error. */
function send(path: string, headers: Record<string, string>, body: string[], hasBody: boolean): Promise<string> {
  const framed = framedRequestHeaders(headers, hasBody);
  return new Promise((resolve) => {
    const request = http.request({ host: "127.0.0.1", port, method: "GET", path, headers: framed, agent: false });
    request.on("response", (res) => {
      res.resume();
      resolve(String(res.statusCode));
    });
    request.on("error", (error) => resolve(error.message));
    sendRequestBody(Readable.from(body), request, framed, hasBody);
  });
}

describe("request framing", () => {
  it("a body is chunked where it has no Content-Length; none is added where there is no body", () => {
    expect(framedRequestHeaders({ a: "1" }, true)).toEqual({ a: "1", "transfer-encoding": "chunked" });
    expect(framedRequestHeaders({ "content-length": "3" }, true)).toEqual({ "content-length": "3" });
    expect(framedRequestHeaders({ a: "1" }, false)).toEqual({ a: "1" });
    expect(http1RequestHasBody({ "transfer-encoding": "chunked" })).toBe(true);
    expect(http1RequestHasBody({ "content-length": "0" })).toBe(true);
    expect(http1RequestHasBody({ host: "x" })).toBe(false);
  });

  it("a GET's body reaches the server as its body, and one without sends nothing", async () => {
    const from = parsed.length;
    const smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    expect(await send("/chunked", {}, [smuggled], true)).toBe("200");
    expect(await send("/none", {}, [smuggled], false)).toBe("200");
    expect(parsed.slice(from)).toEqual([
      { url: "/chunked", body: smuggled },
      { url: "/none", body: "" },
    ]);
  });

  it("a body longer or shorter than its Content-Length fails the request; the rest never reaches the server", async () => {
    const from = parsed.length;
    const smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    expect(await send("/long", { "content-length": "3" }, ["abc", smuggled], true)).toMatch(
      /runs past its Content-Length \(3\)/,
    );
    expect(await send("/short", { "content-length": "10" }, ["abc"], true)).toMatch(
      /ended short of its Content-Length \(10\)/,
    );
    expect(await send("/exact", { "content-length": "3" }, ["a", "bc"], true)).toBe("200");
    // The long one's first 3 bytes may have made a whole request; nothing after them did.
    expect(parsed.slice(from).filter((p) => p.url !== "/long")).toEqual([{ url: "/exact", body: "abc" }]);
  });
});
