// Hard links by the million (names without inodes): a real run is stopped while live and what one
// folder gained past the walk's bound is removed; the host side alone (its own process) judges,
// trims and hands back 600,000 of them with its memory bounded.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { testScript } from "../support/harness.js";
import {
  bash,
  finish,
  hostilePolicy,
  hostileWorkspace,
  spawnController,
  useHostileModelServer,
} from "../support/hostile-model.js";
import { owner, removeTree } from "../support/temp-trees.js";

const server = useHostileModelServer();

describe("scale", () => {
  it("a real run: hard links with 250-byte names as fast as two processes in the sandbox make them: stopped while live (limit entries), what one folder gained past the bound removed, nothing left lent, the controller under 300 MB RSS", async () => {
    const ws = hostileWorkspace({ "keep.txt": "keep\n" });
    try {
      const linker = (k: number) =>
        `node -e 'const fs=require("fs");fs.mkdirSync("big",{recursive:true});let t;for(let i=0;i<1500000;i++){if(i%60000===0){t="target-${k}-"+i;fs.writeFileSync(t,"x")}fs.linkSync(t,"big/"+"l".repeat(240)+"${k}"+String(i).padStart(9,"0"))}'`;
      const controller = spawnController(
        server,
        [bash(`(${linker(0)}) & (${linker(1)}) & wait; echo made`), finish()],
        {
          cwd: ws,
          // A lower entry limit than the default: the live count trips sooner (the suite's time), the bound is the same code.
          policy: hostilePolicy({ limits: { timeoutSeconds: 600, diskMb: 4096, maxEntries: 50_000 } }),
          reportEvents: ["workspace.overfull", "limit.tripped"],
        },
      );
      const done = await controller.done;
      expect(done.maxRssMb, `peaks in MB: ${JSON.stringify(done.memoryPeakMb)}`).toBeLessThan(300);
      expect(done.ok, `${JSON.stringify(done)}\n${controller.stderr()}`).toBe(false);
      expect(done.error?.limit).toBe("entries");
      expect((await controller.event("limit.tripped")).data.limit).toBe("entries");
      const overfull = await controller.event("workspace.overfull").catch(() => undefined);
      const removed = (overfull?.data.folders as Array<{ removed: number }> | undefined)?.[0]?.removed ?? 0;
      const left = fs.existsSync(path.join(ws, "big")) ? fs.readdirSync(path.join(ws, "big")).length : 0;
      console.info(
        `hard links in a real run: stopped with ${removed + left} in the folder (${removed} removed after the run), controller max RSS ${done.maxRssMb.toFixed(0)} MB`,
      );
      // What is left is within the bound the walk after the run holds (the limit and a little).
      expect(left).toBeLessThanOrEqual(51_100);
      for (const name of fs.readdirSync(ws)) expect(owner(path.join(ws, name)), name).toBe("0:0");
      if (left > 0) expect(owner(path.join(ws, "big", fs.readdirSync(path.join(ws, "big"))[0]!))).toBe("0:0");
      expect(fs.readFileSync(path.join(ws, "keep.txt"), "utf8")).toBe("keep\n");
    } finally {
      removeTree(ws);
    }
  }, 900_000);

  it("600,000 hard links with 250-byte names in one folder (the host side in its own process): the walk stops reading it, what the sandbox added is removed, everything is handed back, under 300 MB RSS", async () => {
    // The host side of a bind-mode run (lease, snapshot, disk watch, judge, trim, hand-back) in a
    // process of its own; "the sandbox" is two processes as uid 65532 that add the links while it
    // watches. A real run's live count stops a sandbox long before this (security-limits); this is
    // what the walk after the run does whatever one folder holds. Before: about 2.6 million such
    // names took the controller past Node's 4 GB heap (1,000,000 already peaked at 1.6 GB RSS).
    const ws = hostileWorkspace({}, "sandbox-run-links-");
    // A tmpfs counts each link against nr_inodes (ext4 does not); its names live in kernel memory.
    const mounted =
      spawnSync("mount", ["-t", "tmpfs", "-o", "size=512m,nr_inodes=3000000,mode=0755", "tmpfs", ws]).status === 0;
    const state = hostileWorkspace({}, "sandbox-run-links-state-");
    try {
      fs.writeFileSync(path.join(ws, "keep.txt"), "keep\n");
      const spec = { root: ws, stateDir: path.join(state, "state"), maxEntries: 200_000, diskMb: 4096 };
      const host = spawn(process.execPath, [testScript("workspaceController"), JSON.stringify(spec)], {
        stdio: ["pipe", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      host.stderr.on("data", (c: Buffer) => (err = (err + c.toString()).slice(-4000)));
      const line = (kind: string) =>
        new Promise<Record<string, unknown>>((resolve, reject) => {
          const look = () => {
            for (const l of out.split("\n")) if (l.startsWith(`{"kind":"${kind}"`)) return resolve(JSON.parse(l));
          };
          host.stdout.on("data", (c: Buffer) => {
            out += c.toString();
            look();
          });
          host.on("close", (code, signal) => reject(new Error(`the host side ended (${code ?? signal}): ${err}`)));
          look();
        });
      const ready = line("ready");
      const tripped = line("tripped").catch(() => undefined);
      const done = line("done");
      await ready;
      // The walk before the bound held every name: ~1 GB at 1,000,000 by bench/hard-links.ts, so about
      // twice the 300 MB asserted below at this count (the suite's time: 1,200,000 before session 24);
      // the bench measures 2,600,000.
      const total = 600_000;
      const linker = (from: number, to: number) =>
        `const fs=require("fs");const d=${JSON.stringify(path.join(ws, "big"))};fs.mkdirSync(d,{recursive:true});let t;` +
        `for(let i=${from};i<${to};i++){if((i-${from})%60000===0){t=${JSON.stringify(ws)}+"/target-"+i;fs.writeFileSync(t,"x")}` +
        `fs.linkSync(t,d+"/"+"l".repeat(240)+String(i).padStart(10,"0"))}`;
      const sandbox = [0, 1].map(
        (k) =>
          new Promise<number | null>((resolve) =>
            spawn(
              "setpriv",
              [
                "--reuid=65532",
                "--regid=65532",
                "--clear-groups",
                process.execPath,
                "-e",
                linker((k * total) / 2, ((k + 1) * total) / 2),
              ],
              { stdio: "ignore" },
            ).on("close", resolve),
          ),
      );
      expect(await Promise.all(sandbox)).toEqual([0, 0]);
      // The run stays live until the watch has counted: a count is one walk of up to the limit's
      // entries, and on a loaded machine the linkers may finish first (then only the walk after
      // the run sees them, as for a sandbox that exits at once; the limit holds either way).
      let wait: NodeJS.Timeout | undefined;
      await Promise.race([tripped, new Promise((resolve) => (wait = setTimeout(resolve, 300_000)))]);
      clearTimeout(wait);
      host.stdin.write("finish\n");
      const report = (await done) as {
        liveTrip?: { limit: string };
        trippedAfterMs?: number;
        overfull: Array<{ path: string; entries: number; removed: number; failed?: string }>;
        handedBack: { created: number; failed: unknown[] };
        finishMs: number;
        maxRssMb: number;
        peaks: Record<string, number>;
      };
      console.info(
        `${total} hard links: judged, trimmed and handed back in ${(report.finishMs / 1000).toFixed(1)} s, host side max RSS ${report.maxRssMb.toFixed(0)} MB`,
      );
      expect(report.maxRssMb, `peaks in MB: ${JSON.stringify(report.peaks)}`).toBeLessThan(300);
      // The live count saw the links (no inodes on most filesystems) while the run was live.
      expect(report.liveTrip?.limit, `no live trip (${report.finishMs} ms to finish)`).toBe("entries");
      console.info(`the live count tripped ${report.trippedAfterMs} ms after the watch started`);
      expect(report.overfull).toEqual([{ path: "big", entries: expect.any(Number), removed: total }]);
      expect(report.overfull[0]!.entries).toBeGreaterThan(200_000);
      // The folder is gone; the sandbox's target files stay, handed back to the caller: nothing is left lent.
      expect(fs.existsSync(path.join(ws, "big"))).toBe(false);
      expect(fs.readFileSync(path.join(ws, "keep.txt"), "utf8")).toBe("keep\n");
      expect(report.handedBack.failed).toEqual([]);
      for (const name of fs.readdirSync(ws)) expect(owner(path.join(ws, name)), name).toBe("0:0");
      expect(owner(ws)).toBe("0:0");
    } finally {
      if (mounted) spawnSync("umount", [ws]);
      removeTree(ws);
      removeTree(state);
    }
  }, 900_000);
});
