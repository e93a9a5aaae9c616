// Nothing in a bind-mode sandbox may make a setuid or setgid file. The workspace and the writable
// roots are the host's own folders: a `chmod 6755` copy of bash left there during the run runs, for
// any local user who can reach the path, as the sandbox's uid (65532 for a root caller, shared by
// every root caller's sandbox) or as a non-root caller's own uid (a docker-group member: root).
// The after-run judgement clears such bits, but only after the run; an attacker runs it at once.
// Docker's default profile allows those calls, and it is the only profile a container takes, so the
// container's first process adds a filter of its own before it starts the launcher: filters stack,
// every process of the sandbox inherits it, and none can remove it. perl (in the image) installs it
// through `syscall`, so the image does not change; the program is made here, on the host.
//
// perl is also the container's init (pid 1: reaps orphans, passes signals on, exits as the launcher
// did), in place of the engine's docker-init: an init started before the filter would be a process
// of the sandbox's uid outside it, which a sandbox process can drive through ptrace or /proc/1/mem
// to make the call for it (review, session 22: tini chmod'ed 6755 that way).
//
// Refused with EPERM: chmod, fchmod, fchmodat and fchmodat2 with S_ISUID or S_ISGID in the mode;
// with EOPNOTSUPP (as a file system without extended attributes answers, which tools expect):
// setxattr, lsetxattr, fsetxattr, setxattrat and the removexattr calls, since a POSIX ACL is one
// and outlives the run unseen by the mode rules (a default ACL granting others write on a folder
// made every later file root wrote there world-writable, and removing a restrictive access ACL
// gives its group the mask's rights; review, session 25);
// open, openat, creat, mknod and mknodat creating one (the mode argument); io_uring (its requests
// bypass seccomp); openat2 answers ENOSYS (its mode is behind a pointer; callers fall back to
// openat); any other architecture's calls (i386's int 0x80, x32), whose numbers this filter does
// not judge.
import { IMAGE_PATHS, LAUNCHER_EXIT, type Mount } from "../../sandbox-contract.js";
import { hostPlatform, normalizePlatform, platformArch } from "../../util/platform.js";

const SETUID_BITS = 0o6000;
const EPERM = 1;
const ENOSYS = 38;
const EOPNOTSUPP = 95;

type Check = { nr: number; modeArg: number } | { nr: number; errno: number };

interface Arch {
  auditArch: number;
  prctl: number;
  seccomp: number;
  /** Numbers at or above this are another ABI's (x86-64's x32). */
  foreignFrom?: number;
  checks: Check[];
}

const IO_URING = [425, 426, 427].map((nr) => ({ nr, errno: EPERM }));
/** setxattrat and removexattrat, the same numbers on both. */
const XATTRAT = [463, 466].map((nr) => ({ nr, errno: EOPNOTSUPP }));

const ARCHES: Record<"amd64" | "arm64", Arch> = {
  amd64: {
    auditArch: 0xc000003e,
    prctl: 157,
    seccomp: 317,
    foreignFrom: 0x40000000,
    checks: [
      { nr: 90, modeArg: 1 }, // chmod
      { nr: 91, modeArg: 1 }, // fchmod
      { nr: 268, modeArg: 2 }, // fchmodat
      { nr: 452, modeArg: 2 }, // fchmodat2
      { nr: 2, modeArg: 2 }, // open
      { nr: 85, modeArg: 1 }, // creat
      { nr: 257, modeArg: 3 }, // openat
      { nr: 133, modeArg: 1 }, // mknod
      { nr: 259, modeArg: 2 }, // mknodat
      { nr: 437, errno: ENOSYS }, // openat2
      { nr: 188, errno: EOPNOTSUPP }, // setxattr
      { nr: 189, errno: EOPNOTSUPP }, // lsetxattr
      { nr: 190, errno: EOPNOTSUPP }, // fsetxattr
      { nr: 197, errno: EOPNOTSUPP }, // removexattr
      { nr: 198, errno: EOPNOTSUPP }, // lremovexattr
      { nr: 199, errno: EOPNOTSUPP }, // fremovexattr
      ...XATTRAT,
      ...IO_URING,
    ],
  },
  arm64: {
    auditArch: 0xc00000b7,
    prctl: 167,
    seccomp: 277,
    checks: [
      { nr: 52, modeArg: 1 }, // fchmod
      { nr: 53, modeArg: 2 }, // fchmodat
      { nr: 452, modeArg: 2 }, // fchmodat2
      { nr: 56, modeArg: 3 }, // openat
      { nr: 33, modeArg: 2 }, // mknodat
      { nr: 437, errno: ENOSYS }, // openat2
      { nr: 5, errno: EOPNOTSUPP }, // setxattr
      { nr: 6, errno: EOPNOTSUPP }, // lsetxattr
      { nr: 7, errno: EOPNOTSUPP }, // fsetxattr
      { nr: 14, errno: EOPNOTSUPP }, // removexattr
      { nr: 15, errno: EOPNOTSUPP }, // lremovexattr
      { nr: 16, errno: EOPNOTSUPP }, // fremovexattr
      ...XATTRAT,
      ...IO_URING,
    ],
  },
};

// Classic BPF, as seccomp reads it: struct seccomp_data { int nr; u32 arch; u64 ip; u64 args[6] }.
const LD_ABS = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const JSET = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const RET = 0x06; // BPF_RET | BPF_K
const ALLOW = 0x7fff0000;
const errno = (n: number) => 0x00050000 | n;

type Insn = [code: number, jt: number, jf: number, k: number];

/** The filter for one architecture, as the bytes of its `struct sock_filter` array (little-endian). */
export function noSetuidProgram(arch: "amd64" | "arm64"): Buffer {
  const a = ARCHES[arch];
  const modeArgs = [...new Set(a.checks.flatMap((c) => ("modeArg" in c ? [c.modeArg] : [])))];
  const errnos = [...new Set([EPERM, ...a.checks.flatMap((c) => ("errno" in c ? [c.errno] : []))])];
  // Layout: head, one jump per checked call, ALLOW, then one block per mode argument (load it,
  // test the bits), then one RET per errno. Jumps go forward only, so targets are laid out first.
  const head: Insn[] = [
    [LD_ABS, 0, 0, 4],
    [JEQ, 1, 0, a.auditArch],
    [RET, 0, 0, errno(EPERM)],
    [LD_ABS, 0, 0, 0],
  ];
  if (a.foreignFrom !== undefined) head.push([JGE, 0, 1, a.foreignFrom], [RET, 0, 0, errno(EPERM)]);
  const jumpsAt = head.length;
  const allowAt = jumpsAt + a.checks.length;
  const modeBlockAt = (arg: number) => allowAt + 1 + modeArgs.indexOf(arg) * 3;
  const errnoAt = (n: number) => allowAt + 1 + modeArgs.length * 3 + errnos.indexOf(n);
  const program: Insn[] = [...head];
  for (const [i, check] of a.checks.entries()) {
    const at = jumpsAt + i;
    const target = "modeArg" in check ? modeBlockAt(check.modeArg) : errnoAt(check.errno);
    program.push([JEQ, target - at - 1, 0, check.nr]);
  }
  program.push([RET, 0, 0, ALLOW]);
  for (const arg of modeArgs) {
    const at = program.length;
    program.push([LD_ABS, 0, 0, 16 + 8 * arg]); // the low half of the argument (little-endian)
    program.push([JSET, errnoAt(EPERM) - (at + 1) - 1, 0, SETUID_BITS]);
    program.push([RET, 0, 0, ALLOW]);
  }
  for (const n of errnos) program.push([RET, 0, 0, errno(n)]);
  for (const [code, jt, jf] of program)
    if (jt > 255 || jf > 255 || jt < 0 || jf < 0) throw new Error(`no-setuid filter: a jump out of range (${code})`);
  const bytes = Buffer.alloc(program.length * 8);
  for (const [i, [code, jt, jf, k]] of program.entries()) {
    bytes.writeUInt16LE(code, i * 8);
    bytes.writeUInt8(jt, i * 8 + 2);
    bytes.writeUInt8(jf, i * 8 + 3);
    bytes.writeUInt32LE(k >>> 0, i * 8 + 4);
  }
  return bytes;
}

/**
 * Before anything else, the trees' mounts as the sandbox sees them, in the engine's own mount
 * namespace: every mount visible below a read-only tree (and not below a writable one inside it)
 * must be read-only, or the container exits (LAUNCHER_EXIT.writableBelowReadOnly) before the
 * launcher starts. The host's covers (build-run-plan.ts readOnlyCovers) come from the host's mount
 * table; a mount made after them, or one the host's namespace does not show (a controller in a
 * mount namespace of its own), stays writable on Docker before 25 (review, session 33). Arguments:
 * a count, then that many trees as "R<path>" or "W<path>". A mount is visible when it is the last
 * one at its path and its parent is visible; a parent at the same path is the mount a cover stacks
 * on, hidden itself but not what is mounted on the cover (review, session 33: every mount below a
 * cover counted as hidden, and one the host could not see stayed writable).
 */
const MOUNT_CHECK = [
  "my @trees = map { [substr($_, 0, 1) eq 'R', substr($_, 1)] } splice(@ARGV, 0, shift);",
  "my (%top, %mnt);",
  "open(my $mi, '<', '/proc/self/mountinfo') or die qq(sandbox-run: mountinfo: $!\n);",
  "while (my $l = <$mi>) { my @f = split / /, $l; my $p = $f[4]; $p =~ s/\\\\([0-7]{3})/chr(oct($1))/ge;",
  "$mnt{$f[0]} = [$f[1], $p, scalar grep { $_ eq 'ro' } split /,/, $f[5]]; $top{$p} = $f[0] } close $mi;",
  "sub shown { my ($id, $stacked) = @_; my $e = $mnt{$id} or return 1; $stacked || $top{$e->[1]} eq $id or return 0;",
  "return 1 if $e->[0] eq $id; my $up = $mnt{$e->[0]}; shown($e->[0], $up && $up->[1] eq $e->[1]) }",
  "for my $id (keys %mnt) { my ($parent, $p, $ro) = @{$mnt{$id}}; next if $ro; my ($r, $len) = (0, -1);",
  "for my $t (@trees) { my $d = $t->[1]; if (($p eq $d || index($p, $d . '/') == 0) && length($d) > $len) { ($r, $len) = ($t->[0], length($d)) } }",
  `if ($r && shown($id)) { print STDERR qq(sandbox-run: $p is mounted writable below a read-only tree; stopped before the run\n); exit ${LAUNCHER_EXIT.writableBelowReadOnly} } }`,
].join(" ");

/**
 * perl, as pid 1: no_new_privs (already set by the engine; seccomp requires it), the filter, then a
 * child that execs the rest of its arguments, while this process reaps every child and passes
 * signals on to that one, and exits with its status (128 + the signal when one ended it, as an init
 * does). Any failure ends the container before the launcher starts (exit 255).
 */
const INSTALL_SCRIPT = [
  MOUNT_CHECK,
  "my ($prog, $prctl, $seccomp) = (pack('H*', shift), shift, shift);",
  "syscall($prctl + 0, 38, 1, 0, 0, 0) == 0 or die qq(sandbox-run: no_new_privs: $!\\n);",
  "my $fprog = pack('S x6 p', length($prog) / 8, $prog);",
  "syscall($seccomp + 0, 1, 0, $fprog) == 0 or die qq(sandbox-run: the no-setuid filter: $!\\n);",
  "my $child = fork; defined $child or die qq(sandbox-run: fork: $!\\n);",
  "if (!$child) { exec { $ARGV[0] } @ARGV; die qq(sandbox-run: exec $ARGV[0]: $!\\n) }",
  "for my $s (qw(TERM INT HUP QUIT USR1 USR2 WINCH)) { $SIG{$s} = sub { kill $s, $child } }",
  "while (1) { my $pid = waitpid(-1, 0);",
  "if ($pid == $child) { my $st = $?; exit(($st & 127) ? 128 + ($st & 127) : $st >> 8) }",
  "if ($pid < 0 && !$!{EINTR}) { exit 255 } }",
].join(" ");

/** Whether this entrypoint is the filter's perl, which is then the container's init as well. */
export function isOwnInit(entrypoint: readonly string[]): boolean {
  return entrypoint[0] === IMAGE_PATHS.perl && entrypoint[2] === INSTALL_SCRIPT;
}

/** The entrypoint that checks the trees' mounts (`trees`: the plan's), installs the filter for `arch`, then runs `entrypoint` under it. */
export function withNoSetuidFilter(
  arch: "amd64" | "arm64",
  entrypoint: string[],
  trees: ReadonlyArray<Pick<Mount, "containerPath" | "readOnly" | "kind">> = [],
): string[] {
  const a = ARCHES[arch];
  const checked = trees.filter((m) => m.kind !== "socket" && m.kind !== "ca-bundle");
  return [
    IMAGE_PATHS.perl,
    "-e",
    INSTALL_SCRIPT,
    String(checked.length),
    ...checked.map((m) => `${m.readOnly ? "R" : "W"}${m.containerPath}`),
    noSetuidProgram(arch).toString("hex"),
    String(a.prctl),
    String(a.seccomp),
    ...entrypoint,
  ];
}

/**
 * A bind-mode sandbox's entrypoint: the filter first, for the platform the sandbox runs on. Under
 * emulation (an arm64 image on an x86-64 host) it is left out: qemu-user does not implement seccomp
 * (the install fails with ENOSYS), and the host's filter cannot be installed from inside it;
 * preparePlan plans such a run in copy mode and refuses bind mode (docs/security.md A1).
 */
export function bindModeEntrypoint(
  platform: string | undefined,
  entrypoint: string[],
  trees: ReadonlyArray<Pick<Mount, "containerPath" | "readOnly" | "kind">> = [],
): string[] {
  const native = hostPlatform();
  const runsOn = platform === undefined ? native : (normalizePlatform(platform) ?? native);
  if (runsOn !== native) return entrypoint;
  return withNoSetuidFilter(platformArch(runsOn) as "amd64" | "arm64", entrypoint, trees);
}
