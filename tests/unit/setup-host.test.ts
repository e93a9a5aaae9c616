// scripts/setup-host.sh (the README's first command runs it through quickstart.sh) for a user who
// is not root, against a stand-in `docker` and `id`: a user outside the docker group, with the engine
// running, was told to start it as root (review, session 37); one whose engine works was sent to
// sudo for the optional runsc and debootstrap. Neither installs anything (apt-get here fails loudly).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const script = path.resolve(import.meta.dirname, "../../scripts/setup-host.sh");
const bin = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-setup-host-"));
afterAll(() => fs.rmSync(bin, { recursive: true, force: true }));

function onPath(name: string): string {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    const file = path.join(dir, name);
    if (dir && fs.existsSync(file)) return file;
  }
  throw new Error(`${name} is not on PATH`);
}

// What the script (and setup-emulation.sh, which it calls) use besides docker and id; no runsc, no
// debootstrap: the optional parts are missing.
for (const tool of ["bash", "cat", "grep", "sed", "seq", "sleep", "dirname", "uname"]) {
  fs.symlinkSync(onPath(tool), path.join(bin, tool));
}
const stub = (name: string, body: string) =>
  fs.writeFileSync(path.join(bin, name), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
stub("id", 'case "$*" in -u) echo 1000 ;; -un) echo alice ;; *) echo "uid=1000(alice) gid=1000(alice)" ;; esac');
stub("dockerd", "exit 1");
stub("apt-get", 'echo "apt-get $* was called" >&2; exit 99');
stub(
  "docker",
  `case "$FAKE_ENGINE" in
  denied) echo 'permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: Get "http://%2Fvar%2Frun%2Fdocker.sock/v1.50/info": dial unix /var/run/docker.sock: connect: permission denied' >&2; exit 1 ;;
  down) echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?' >&2; exit 1 ;;
esac
case "$1" in version) echo 24.0.7 ;; info) [ "$2" = --format ] && echo "runc " ;; esac
exit 0`,
);

function setupHost(engine: "up" | "down" | "denied") {
  return spawnSync(path.join(bin, "bash"), [script], {
    env: { PATH: bin, HOME: bin, FAKE_ENGINE: engine },
    encoding: "utf8",
  });
}

describe("scripts/setup-host.sh as a user who is not root", () => {
  it("with the engine running but its socket refused: the docker group or DOCKER_HOST, never 'start dockerd as root'", () => {
    const run = setupHost("denied");
    expect(run.status, run.stderr).toBe(3);
    expect(run.stderr).toContain("runs, but this user (alice) may not use it (permission denied)");
    expect(run.stderr).toContain("sudo usermod -aG docker alice, then log in again");
    expect(run.stderr).toContain("or point DOCKER_HOST at an engine it may use");
    expect(run.stderr).not.toContain("needs root. Run");
    expect(run.stderr).not.toContain("apt-get");
  });

  it("with a working engine: goes without runsc and debootstrap, says what that skips and how to get them, exit 0", () => {
    const run = setupHost("up");
    expect(run.status, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/skipping gVisor's runsc .*--runtime runsc is not available; to install it: sudo /);
    expect(run.stderr).toMatch(/skipping debootstrap .*needs a reachable registry .*; to install it: sudo /);
    expect(run.stderr).toContain("setup-host: Docker engine 24.0.7 is up");
    expect(run.stderr).not.toContain("needs root. Run");
    expect(run.stderr).not.toContain("apt-get");
  });

  it("with no engine running: root is needed (to install what is missing and start dockerd)", () => {
    const run = setupHost("down");
    expect(run.status, run.stderr).toBe(3);
    expect(run.stderr).toMatch(/needs root\. Run: sudo /);
    expect(run.stderr).not.toContain("usermod");
    expect(run.stderr).not.toContain("apt-get");
  });
});
