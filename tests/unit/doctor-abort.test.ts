// doctor stopped by its signal during the container-start check removes its own check container
// and nothing else (review, session 27: it removed every container labelled with this process's pid
// and host name: this process's runs and warm sandboxes, and another controller's whose pid and
// host name were the same in its own namespace). A stand-in engine on a unix socket records what
// is asked of it; the create never answers, so the check is in flight when the signal comes.
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { doctor } from "../../src/operations/doctor.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir: tempDir } = tempTrees("sandbox-run-doctor-abort-");

describe("doctor, aborted during the container-start check", () => {
  const dir = tempDir("d-");
  const sock = path.join(dir, "engine.sock");
  const deleted: string[] = [];
  let created: (() => void) | undefined;
  const createdOnce = new Promise<void>((resolve) => (created = resolve));
  const me = { pid: String(process.pid), host: os.hostname() };
  const labels = (runId: string, extra: Record<string, string> = {}) => ({
    "sandbox-run.managed": "true",
    "sandbox-run.run-id": runId,
    "sandbox-run.owner-pid": me.pid,
    "sandbox-run.owner-host": me.host,
    ...extra,
  });
  const containers = [
    {
      Id: "otherrunlive0002",
      State: "running",
      Labels: labels("run-of-someone-else", { "sandbox-run.owner-pidns": "pid:[1]" }),
    },
    { Id: "ownwarmsandbox03", State: "running", Labels: labels("warm-abc", { "sandbox-run.warm": "true" }) },
  ];
  const server = http.createServer((req, res) => {
    const url = req.url ?? "";
    const json = (v: unknown) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(v));
    };
    if (url.includes("/_ping")) return res.end("OK");
    if (/\/version$/.test(url)) return json({ Version: "27.0.0", ApiVersion: "1.47", Os: "linux", Arch: "amd64" });
    if (/\/info$/.test(url))
      return json({
        Runtimes: { runc: { path: "runc" } },
        SecurityOptions: ["name=seccomp,profile=builtin"],
        CgroupVersion: "2",
        OSType: "linux",
        Architecture: "x86_64",
        MemoryLimit: true,
        PidsLimit: true,
        OperatingSystem: "Debian",
      });
    if (url.includes("/images/json")) return json([]);
    if (/\/images\/.*\/json/.test(url))
      return json({
        Config: { Labels: { "sandbox-run.pi-version": "1.0.0", "sandbox-run.node-version": "22" } },
        Os: "linux",
        Architecture: "amd64",
      });
    if (url.includes("/containers/create")) {
      created?.();
      return; // never answers: the check is in flight
    }
    if (url.includes("/containers/json")) {
      const filters = JSON.parse(new URL(url, "http://x").searchParams.get("filters") ?? "{}");
      const wanted: string[] = filters.label ?? [];
      return json(
        containers.filter((c) =>
          wanted.every((l) => {
            const [k, v] = l.split("=");
            return (c.Labels as Record<string, string>)[k!] === v;
          }),
        ),
      );
    }
    if (req.method === "DELETE") {
      deleted.push(url);
      res.writeHead(204);
      return res.end();
    }
    res.writeHead(404);
    res.end("{}");
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  it("removes none of this process's or another controller's containers", async () => {
    await new Promise<void>((resolve) => server.listen(sock, resolve));
    const engines = path.join(dir, "engines.json");
    fs.writeFileSync(engines, JSON.stringify({ engines: [{ name: "standin", host: `unix://${sock}`, capacity: 1 }] }));
    const controller = new AbortController();
    const quiet = { ok: () => {}, bad: () => {}, note: () => {} };
    const run = doctor({ engines, env: {}, signal: controller.signal, answers: { timeoutMs: 3000 }, report: quiet });
    await createdOnce;
    controller.abort(new Error("Ctrl-C"));
    await expect(run).rejects.toThrow();
    expect(deleted).toEqual([]);
  });
});
