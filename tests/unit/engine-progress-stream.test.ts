// An engine's build, pull and load progress is untrusted input (E7): a line without end, a line
// that is not JSON or a stream cut short fails the step with a message, never the process.
import http from "node:http";
import path from "node:path";
import { PassThrough, Readable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { DockerEngine } from "../../src/engine/docker-engine.js";
import { followProgress, MAX_PROGRESS_LINE_BYTES, type ProgressEvent } from "../../src/engine/progress-stream.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir } = tempTrees("sandbox-run-progress-");
const servers: http.Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

describe("followProgress", () => {
  it("hands on each event, split anywhere across chunks, and resolves with the first error an event carried", async () => {
    const events: ProgressEvent[] = [];
    const text =
      '{"stream":"Step 1/2"}\r\n\n{"status":"pulling"}\n{"error":"no space","errorDetail":{}}\n{"error":"later"}';
    const chunks = [...text].map((c) => Buffer.from(c));
    const first = await followProgress(Readable.from(chunks), (e) => events.push(e));
    expect(first).toBe("no space");
    expect(events).toEqual([{ stream: "Step 1/2" }, { status: "pulling" }, { error: "no space" }, { error: "later" }]);
  });

  it("fails a line longer than the cap without holding it, and stops reading", async () => {
    const stream = new PassThrough();
    const done = followProgress(stream, () => {});
    const block = Buffer.alloc(64 * 1024, "x");
    let written = 0;
    while (written <= MAX_PROGRESS_LINE_BYTES + block.length && !stream.destroyed) {
      stream.write(block);
      written += block.length;
    }
    await expect(done).rejects.toThrow(/a progress line is longer than 1 MiB/);
    expect(stream.destroyed).toBe(true);
  });

  it("fails a line that is not JSON, and a stream closed before its end", async () => {
    await expect(followProgress(Readable.from([Buffer.from('{"stream":"ok"}\nnot json\n')]), () => {})).rejects.toThrow(
      /a progress line is not JSON: "not json"/,
    );
    const cut = new PassThrough();
    const done = followProgress(cut, () => {});
    cut.write('{"stream":"Step 1/9"}\n');
    cut.destroy();
    await expect(done).rejects.toThrow(/closed the stream before its end/);
  });
});

describe("DockerEngine's build against an engine whose progress is hostile", () => {
  async function engineAnswering(body: (res: http.ServerResponse) => void) {
    const socketPath = path.join(dir(), "engine.sock");
    const server = http.createServer((req, res) => {
      req.resume();
      if (req.url?.includes("/_ping")) return res.end("OK");
      res.writeHead(200, { "content-type": "application/json" });
      body(res);
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    return new DockerEngine({ name: "hostile", endpoint: { kind: "unix", socketPath } });
  }
  const build = (engine: DockerEngine) =>
    engine.buildImage(Readable.from([Buffer.alloc(512)]), { tag: "x:1", onProgress: () => {} });

  it("a line that is not JSON fails the build with the CLI's error (code image-missing), and the process lives on", async () => {
    const engine = await engineAnswering((res) => res.end('{"stream":"Step 1/1"}\n<html>\n'));
    await expect(build(engine)).rejects.toMatchObject({
      code: "image-missing",
      message: expect.stringMatching(/Building x:1 failed: a progress line is not JSON: "<html>" \(engine "hostile"\)/),
    });
  });

  it("an endless line is cut at the cap", async () => {
    const engine = await engineAnswering((res) => {
      const block = "x".repeat(64 * 1024);
      const timer = setInterval(() => res.write(block), 1);
      res.on("close", () => clearInterval(timer));
    });
    await expect(build(engine)).rejects.toThrow(/Building x:1 failed: a progress line is longer than 1 MiB/);
  });
});
