// Privilege: the sandbox's processes run as a non-root uid with no capabilities, no way to
// gain any (no-new-privileges, no setuid binaries), under seccomp, with no Docker socket, and
// the privileged operations a breakout starts with (mount, unshare, ptrace of another process,
// raw sockets) fail.
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { IMAGE_PATHS } from "../../src/sandbox-contract.js";
import {
  bash,
  describeOutcome,
  finish,
  hostilePolicy,
  runHostile,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();

/** Lines `name=value` printed by a probe script, as a map. */
function probes(output: string): Record<string, string> {
  return Object.fromEntries(
    output
      .split("\n")
      .filter((l) => /^[a-z-]+=/.test(l))
      .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
  );
}

const IDENTITY_PROBE = [
  'echo "uid=$(id -u)"',
  'echo "gid=$(id -g)"',
  "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status | sed -E 's/^([A-Za-z]+):\\s+/\\L\\1=/'",
  'echo "setuid-files=$(find / -xdev -perm /6000 -type f 2>/dev/null | tr "\\n" " ")"',
  'echo "sockets=$(find / \\( -path /proc -o -path /sys \\) -prune -o \\( -type s -o -name "*.sock" \\) -print 2>/dev/null | tr "\\n" " ")"',
  'test -e /var/run/docker.sock || test -e /run/docker.sock; echo "docker-sock-absent=$?"',
  // prctl(PR_GET_NO_NEW_PRIVS): the answer of the kernel in front of the sandbox (gVisor's /proc has no such line).
  `perl -e 'print "prctl-nnp=", syscall(157, 39, 0, 0, 0, 0), "\\n"'`,
  // SIGUSR1 to the launcher (Pi's process) opens no debugger a tool could run code in (review, session 36).
  // (It names itself "pi": found by its program.)
  `for p in /proc/[0-9]*; do [ "$(readlink $p/exe)" = "${IMAGE_PATHS.node}" ] && kill -USR1 \${p#/proc/} && echo "launcher-signalled=yes"; done`,
  "sleep 1",
  `perl -MIO::Socket::INET -e 'print "inspector=", (IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => 9229, Timeout => 2) ? "open" : "closed"), "\\n"'`,
].join("\n");

describe.concurrent("privilege", () => {
  it("non-root uid, empty capability sets, no-new-privileges, seccomp filter, no setuid binaries, no Docker socket", async () => {
    const outcome = await runHostile(server, [bash(IDENTITY_PROBE), finish()]);
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    const p = probes(outcome.toolResults[0] ?? "");
    expect(Number(p.uid)).toBeGreaterThan(0);
    expect(Number(p.gid)).toBeGreaterThan(0);
    for (const set of ["capinh", "capprm", "capeff", "capbnd", "capamb"]) expect(p[set], set).toBe("0000000000000000");
    expect(p.nonewprivs).toBe("1");
    expect(p["prctl-nnp"]).toBe("1");
    expect(p.seccomp).toBe("2");
    expect(p["setuid-files"]).toBe("");
    // The only socket in the sandbox's filesystem is its own gateway's.
    expect(p.sockets?.trim()).toBe("/run/sandbox-run/gateway.sock");
    expect(p["docker-sock-absent"]).toBe("1");
    expect(p["launcher-signalled"]).toBe("yes");
    expect(p.inspector).toBe("closed");
  });

  it("mount, unshare, setuid, raw sockets and ptrace of a process outside the sandbox all fail", async () => {
    // A real host process the sandbox might try to attach to.
    const hostProcess = spawn("sleep", ["120"], { stdio: "ignore" });
    try {
      const pid = hostProcess.pid!;
      const outcome = await runHostile(server, [
        bash(
          [
            'mount -t tmpfs none /tmp 2>/dev/null; echo "mount=$?"',
            'unshare -U true 2>/dev/null; echo "unshare-user=$?"',
            'unshare -m true 2>/dev/null; echo "unshare-mount=$?"',
            'setpriv --reuid 0 --regid 0 --clear-groups true 2>/dev/null; echo "setuid-root=$?"',
            `perl -MSocket -e 'socket(my $s, PF_INET, SOCK_RAW, 1) ? print("raw-socket=opened\\n") : print("raw-socket=$!\\n")'`,
            `perl -e 'syscall(101, 16, ${pid}, 0, 0) == 0 ? print("ptrace-host=attached\\n") : print("ptrace-host=$!\\n")'`,
            `echo "host-proc-visible=$(test -e /proc/${pid}/cmdline && cat /proc/${pid}/cmdline | tr '\\0' ' ' | grep -c 'sleep 120' || echo 0)"`,
            'echo "processes=$(ls /proc | grep -cE "^[0-9]+$")"',
          ].join("\n"),
        ),
        finish(),
      ]);
      expect(outcome.details, describeOutcome(outcome)).toBeDefined();
      const p = probes(outcome.toolResults[0] ?? "");
      expect(p.mount).not.toBe("0");
      expect(p["unshare-user"]).not.toBe("0");
      expect(p["unshare-mount"]).not.toBe("0");
      expect(p["setuid-root"]).not.toBe("0");
      expect(p["raw-socket"]).toBe("Operation not permitted");
      // The host's processes are not even visible: another PID namespace.
      expect(p["ptrace-host"]).toBe("No such process");
      expect(p["host-proc-visible"]).toBe("0");
      expect(Number(p.processes)).toBeLessThan(30);
    } finally {
      hostProcess.kill("SIGKILL");
    }
  });

  it("the gVisor runtime (runsc) keeps the same promises, with its own kernel and a seccomp filter in front of the host's", async () => {
    // The built-in policies' pids limit, 256 (under runsc it is gVisor's RLIMIT_NPROC, with room in
    // the pids cgroup for gVisor's own threads: docs/security.md R1).
    const probe = [
      IDENTITY_PROBE,
      'echo "kernel=$(uname -rv)"',
      'unshare -U true 2>/dev/null; echo "unshare-user=$?"',
      // Pi and the tools share a uid: on runsc one may not trace or read the memory of another.
      "sleep 30 & sibling=$!",
      `perl -e 'syscall(101, 16, '$sibling', 0, 0) == 0 ? print("ptrace-sibling=attached\\n") : print("ptrace-sibling=$!\\n")'`,
      "kill $sibling",
    ].join("\n");
    const outcome = await runHostile(server, [bash(probe), finish()], {
      runtime: "runsc",
      policy: hostilePolicy({ limits: { pids: 256 } }),
    });
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    const p = probes(outcome.toolResults[0] ?? "");
    expect(Number(p.uid)).toBeGreaterThan(0);
    for (const set of ["capinh", "capprm", "capeff", "capbnd"]) expect(p[set], set).toBe("0000000000000000");
    // runsc registered with --oci-seccomp applies sandbox-run's profile inside gVisor (without it: "0").
    expect(p.seccomp).toBe("2");
    expect(p["prctl-nnp"]).toBe("1");
    expect(p["unshare-user"]).not.toBe("0");
    expect(p["ptrace-sibling"]).toBe("Operation not permitted");
    expect(p["setuid-files"]).toBe("");
    expect(p["docker-sock-absent"]).toBe("1");
    // gVisor's own kernel answers, not the host's.
    expect(p.kernel).toBe("4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016");
  });
});
