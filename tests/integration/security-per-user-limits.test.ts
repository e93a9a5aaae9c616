// P6: what the kernel counts per uid, across containers (epoll watches, inotify instances). A
// sandbox that held every epoll watch of its uid made every other process of that uid abort when it
// next added one (Node does): other runs' Pi, and in a non-root caller's bind mode the controller
// itself, before it judged the run. On a host set up by scripts/setup-host.sh those limits are above
// what any sandbox's memory can buy, so the sandbox's own memory limit is what stops it. Bind mode
// only: the count is the kernel's, whatever way the workspace travels.
import { describe, expect, it } from "vitest";
import { readPerUserLimits, sharedUidProblem } from "../../src/util/per-user-limits.js";
import {
  bash,
  describeOutcome,
  finish,
  hostilePolicy,
  runHostile,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();

// Holds `watches` epoll watches (eventfds watched by as many epoll instances as it takes) and
// `instances` inotify instances, says how many it got and why it stopped, then waits to be killed.
const HOG = String.raw`
$| = 1;
my ($watches, $instances) = @ARGV;
my @keep; my $err = "";
my @targets; for (1 .. 2500) { my $fd = syscall(290, 0, 0); die "eventfd: $!" if $fd < 0; push @targets, $fd }
my $ev = pack("L", 1) . pack("Q", 0);
my $held = 0;
EPOLL: while ($held < $watches) {
  my $ep = syscall(291, 0); if ($ep < 0) { $err = "epoll_create1: $!"; last } push @keep, $ep;
  for my $fd (@targets) { last EPOLL if $held >= $watches; if (syscall(233, $ep, 1, $fd, $ev) < 0) { $err = "epoll_ctl: $!"; last EPOLL } $held++ }
}
my $ino = 0;
for (1 .. $instances) { my $fd = syscall(294, 0); if ($fd < 0) { $err .= " inotify_init1: $!"; last } push @keep, $fd; $ino++ }
print "held watches=$held inotify=$ino stopped=[$err]\n";
sleep 120;
`;

describe("per-user kernel limits (P6)", () => {
  it("a sandbox holding 6 million epoll watches and 200 inotify instances leaves its uid's count unexhausted: another process of that uid still adds both", async () => {
    // The promise is the host's set-up (the README's first command raises the limits).
    expect(
      sharedUidProblem(readPerUserLimits()),
      "this host's per-user limits are the kernel's defaults: run scripts/setup-host.sh as root",
    ).toBeUndefined();
    const outcome = await runHostile(
      server,
      [
        bash(
          [
            `cat > /tmp/hog.pl <<'EOF'\n${HOG}\nEOF`,
            "perl /tmp/hog.pl 6000000 200 > /tmp/hog.out 2>&1 & hog=$!",
            "for i in $(seq 1 600); do grep -q held /tmp/hog.out && break; sleep 0.2; done",
            "cat /tmp/hog.out",
            // Another process of the same uid: Node adds epoll watches for its listener, perl an inotify instance.
            `/opt/sandbox-run/node/bin/node -e "require('net').createServer().listen(0, () => { console.log('node listens'); process.exit(0) })"; echo "node rc=$?"`,
            `perl -e 'my $fd = syscall(294, 0); print $fd < 0 ? "inotify refused: $!\\n" : "inotify ok\\n"'`,
            "kill $hog",
          ].join("\n"),
        ),
        finish(),
      ],
      // The built-in policies' memory limit (2 GiB): enough for the watches (~200 bytes each,
      // charged to the container) that the kernel's default per-user limit on this host allows.
      { policy: hostilePolicy({ limits: { memoryMb: 2048 } }) },
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    const printed = outcome.toolResults[0] ?? "";
    expect(printed).toMatch(/held watches=6000000 inotify=200 stopped=\[\]/);
    expect(printed).toContain("node listens");
    expect(printed).toContain("node rc=0");
    expect(printed).toContain("inotify ok");
  });
});
