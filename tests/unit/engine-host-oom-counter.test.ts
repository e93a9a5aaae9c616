// A Podman container's OOM kill counter, read from this host's cgroupfs through the container's pid
// (never by running the image's `cat` as uid 0 inside it: review, session 34).
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { containerHostPids, hostOomKillCount } from "../../src/engine/host-oom-counter.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir } = tempTrees("sandbox-run-oom-counter-");
const ID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

function layout(cgroupLines: string, files: Record<string, string>): { proc: string; cgroup: string } {
  const proc = dir();
  const cgroup = dir();
  fs.mkdirSync(path.join(proc, "42"));
  fs.writeFileSync(path.join(proc, "42", "cgroup"), cgroupLines);
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(cgroup, name)), { recursive: true });
    fs.writeFileSync(path.join(cgroup, name), text);
  }
  return { proc, cgroup };
}

describe("hostOomKillCount", () => {
  it("reads cgroup v1's memory.oom_control and v2's memory.events of the container's own cgroup", () => {
    const v1 = layout(`9:memory:/libpod_parent/libpod-${ID}\n1:name=systemd:/x\n`, {
      [`memory/libpod_parent/libpod-${ID}/memory.oom_control`]: "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
    });
    expect(hostOomKillCount(42, ID, v1.proc, v1.cgroup)).toBe(3);
    const v2 = layout(`0::/machine.slice/libpod-${ID}.scope\n`, {
      [`machine.slice/libpod-${ID}.scope/memory.events`]: "low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\n",
    });
    expect(hostOomKillCount(42, ID, v2.proc, v2.cgroup)).toBe(2);
  });

  it("is 0 for a process whose cgroup does not name the container (another pid namespace's, a reused pid), a path with .., or a bad pid or id", () => {
    const other = layout("9:memory:/user.slice/some-other\n", {
      "memory/user.slice/some-other/memory.oom_control": "oom_kill 9\n",
    });
    expect(hostOomKillCount(42, ID, other.proc, other.cgroup)).toBe(0);
    const climbing = layout(`9:memory:/x/../../etc/${ID}\n`, {});
    expect(hostOomKillCount(42, ID, climbing.proc, climbing.cgroup)).toBe(0);
    expect(hostOomKillCount(0, ID, other.proc, other.cgroup)).toBe(0);
    expect(hostOomKillCount(42, "../../x", other.proc, other.cgroup)).toBe(0);
    expect(hostOomKillCount(4242, ID, other.proc, other.cgroup)).toBe(0);
  });
});

describe("containerHostPids", () => {
  it("lists cgroup.procs of the container's own cgroup: v1's pids controller, else v2's unified one", () => {
    const v1 = layout(`9:memory:/docker/${ID}\n8:pids:/docker/${ID}\n1:name=systemd:/docker/${ID}\n`, {
      [`pids/docker/${ID}/cgroup.procs`]: "42\n77\n1203\n",
      [`memory/docker/${ID}/cgroup.procs`]: "1\n",
    });
    expect(containerHostPids(42, ID, v1.proc, v1.cgroup)).toEqual([42, 77, 1203]);
    const v2 = layout(`0::/system.slice/docker-${ID}.scope\n`, {
      [`system.slice/docker-${ID}.scope/cgroup.procs`]: "42\n43\n",
    });
    expect(containerHostPids(42, ID, v2.proc, v2.cgroup)).toEqual([42, 43]);
  });

  it("is empty for a process whose cgroup does not name the container, or a path with ..", () => {
    const other = layout("8:pids:/user.slice/some-other\n", { "pids/user.slice/some-other/cgroup.procs": "42\n1\n" });
    expect(containerHostPids(42, ID, other.proc, other.cgroup)).toEqual([]);
    const climbing = layout(`8:pids:/x/../../${ID}\n`, { [`${ID}/cgroup.procs`]: "1\n" });
    expect(containerHostPids(42, ID, climbing.proc, climbing.cgroup)).toEqual([]);
  });
});
