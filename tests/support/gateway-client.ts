// Talking to a model gateway (or any HTTP server on a unix socket) from the unit tests, and tiny
// upstreams that capture what reaches them. Real HTTP throughout; no Docker.
import http from "node:http";
import net, { type AddressInfo } from "node:net";

export interface Captured {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface CaptureServer {
  baseUrl: string;
  requests: Captured[];
  close(): Promise<void>;
}

/** An upstream that records every request and answers with `answer` (default: 200 JSON). */
export async function startCapture(
  answer: (req: Captured, res: http.ServerResponse) => void = (_req, res) => {
    res.writeHead(200, { "content-type": "application/json", "set-cookie": "upstream=1" });
    res.end(JSON.stringify({ ok: true }));
  },
): Promise<CaptureServer> {
  const requests: Captured[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const captured = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      requests.push(captured);
      answer(captured, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface Reply {
  status: number;
  statusMessage?: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export function request(
  socketPath: string,
  options: { method?: string; path: string; headers?: Record<string, string>; body?: string | Buffer },
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { socketPath, method: options.method ?? "GET", path: options.path, headers: options.headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            statusMessage: res.statusMessage,
            headers: res.headers,
            body: Buffer.concat(chunks).toString("utf8"),
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

/** Sends raw bytes over the socket and returns whatever comes back until the server closes or a full response arrives. */
export function rawRequest(socketPath: string, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(socketPath);
    let received = "";
    socket.on("data", (c: Buffer) => {
      received += c.toString("utf8");
      const headerEnd = received.indexOf("\r\n\r\n");
      const length = /content-length: (\d+)/i.exec(received);
      if (headerEnd >= 0 && length && received.length >= headerEnd + 4 + Number(length[1])) socket.end();
    });
    socket.on("end", () => resolve(received));
    socket.on("close", () => resolve(received));
    socket.on("error", reject);
    socket.write(text);
  });
}

export function chatBody(model: string, stream = false, content = "hi"): string {
  return JSON.stringify({ model, stream, messages: [{ role: "user", content }] });
}

export async function waitFor(predicate: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}
