// The seccomp profile for containers on gVisor (runsc). runsc ignores the engine's profile unless it
// is registered with --oci-seccomp (scripts/setup-host.sh does that); with it, gVisor applies the
// profile inside its own kernel. Docker's default profile cannot be used there: it answers clone3
// with errnoRet ENOSYS, which gVisor 20221219 does not honour (it returns EPERM), so glibc never
// falls back to clone and Node cannot start a thread. Measured: `node -e 0` aborts in
// uv_thread_create under runsc + --oci-seccomp with Docker's default profile, and runs with this one.
//
// So runsc containers get this profile instead: allow by default (gVisor implements only a subset
// of Linux, and the sentry itself runs under gVisor's own strict host filter), and refuse with EPERM
// what a sandbox has no business calling: namespaces and mounts, kernel keyrings, modules, BPF,
// perf, tracing and reading other processes' memory (ptrace, process_vm_*: Pi and the tools share a
// uid, so this also keeps a tool from reading or steering Pi), clocks, swap, reboot, io_uring.

const EPERM = 1;

const REFUSED = [
  "acct",
  "add_key",
  "bpf",
  "clock_adjtime",
  "clock_settime",
  "delete_module",
  "finit_module",
  "fsconfig",
  "fsmount",
  "fsopen",
  "fspick",
  "init_module",
  "io_uring_enter",
  "io_uring_register",
  "io_uring_setup",
  "ioperm",
  "iopl",
  "kcmp",
  "kexec_file_load",
  "kexec_load",
  "keyctl",
  "lookup_dcookie",
  "mount",
  "mount_setattr",
  "move_mount",
  "name_to_handle_at",
  "open_by_handle_at",
  "open_tree",
  "perf_event_open",
  "pivot_root",
  "process_vm_readv",
  "process_vm_writev",
  "ptrace",
  "quotactl",
  "reboot",
  "request_key",
  "setns",
  "settimeofday",
  "swapoff",
  "swapon",
  "syslog",
  "umount2",
  "unshare",
  "userfaultfd",
];

/** clone() flags that create namespaces: refused like unshare(). */
const NAMESPACE_FLAGS = [0x20000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000];

export const RUNSC_SECCOMP_PROFILE = {
  defaultAction: "SCMP_ACT_ALLOW",
  architectures: ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
  syscalls: [
    { names: REFUSED, action: "SCMP_ACT_ERRNO", errnoRet: EPERM },
    ...NAMESPACE_FLAGS.map((flag) => ({
      names: ["clone"],
      action: "SCMP_ACT_ERRNO",
      errnoRet: EPERM,
      args: [{ index: 0, value: flag, valueTwo: flag, op: "SCMP_CMP_MASKED_EQ" }],
    })),
  ],
};
