// The no-setuid filter's BPF program, run by a small interpreter of the instructions it uses, for
// each architecture: what it refuses and what it lets through. The real kernel and gVisor run it in
// `security-filesystem` › a bind-mode sandbox cannot make a setuid or setgid file….
import { describe, expect, it } from "vitest";
import { bindModeEntrypoint, noSetuidProgram } from "../../src/run/plan/no-setuid-filter.js";
import { IMAGE_PATHS } from "../../src/sandbox-contract.js";

const AUDIT_ARCH = { amd64: 0xc000003e, arm64: 0xc00000b7, i386: 0x40000003 };

/** The action the program returns for one call: "allow", or the errno it answers. */
function decide(program: Buffer, arch: number, nr: number, args: number[] = []): "allow" | number {
  const data = Buffer.alloc(64);
  data.writeInt32LE(nr, 0);
  data.writeUInt32LE(arch, 4);
  for (const [i, arg] of args.entries()) data.writeBigUInt64LE(BigInt(arg), 16 + 8 * i);
  let acc = 0;
  for (let pc = 0; pc < program.length / 8; pc++) {
    const code = program.readUInt16LE(pc * 8);
    const jt = program.readUInt8(pc * 8 + 2);
    const jf = program.readUInt8(pc * 8 + 3);
    const k = program.readUInt32LE(pc * 8 + 4);
    if (code === 0x20) acc = data.readUInt32LE(k);
    else if (code === 0x15) pc += acc === k ? jt : jf;
    else if (code === 0x35) pc += acc >>> 0 >= k ? jt : jf;
    else if (code === 0x45) pc += (acc & k) !== 0 ? jt : jf;
    else if (code === 0x06) return k === 0x7fff0000 ? "allow" : k & 0xffff;
    else throw new Error(`unknown instruction ${code}`);
  }
  throw new Error("the program ran off its end");
}

describe("the no-setuid filter", () => {
  it("x86-64: refuses setuid and setgid modes in every call that sets a mode, lets every other mode and call through", () => {
    const p = noSetuidProgram("amd64");
    const x = AUDIT_ARCH.amd64;
    // chmod(path, mode), fchmod(fd, mode), fchmodat(dfd, path, mode), fchmodat2, open(path, flags, mode),
    // creat(path, mode), openat(dfd, path, flags, mode), mknod(path, mode, dev), mknodat(dfd, path, mode, dev)
    const calls: Array<[number, number]> = [
      [90, 1],
      [91, 1],
      [268, 2],
      [452, 2],
      [2, 2],
      [85, 1],
      [257, 3],
      [133, 1],
      [259, 2],
    ];
    for (const [nr, at] of calls) {
      const args = (mode: number) => Array.from({ length: 6 }, (_, i) => (i === at ? mode : 0x41));
      expect(decide(p, x, nr, args(0o4755)), `${nr} 4755`).toBe(1);
      expect(decide(p, x, nr, args(0o2755)), `${nr} 2755`).toBe(1);
      expect(decide(p, x, nr, args(0o100000 | 0o6644)), `${nr} S_IFREG|6644`).toBe(1);
      expect(decide(p, x, nr, args(0o755)), `${nr} 755`).toBe("allow");
      expect(decide(p, x, nr, args(0o1777)), `${nr} sticky`).toBe("allow");
    }
    expect(decide(p, x, 437, [0, 0, 0, 0o4755])).toBe(38); // openat2: ENOSYS, callers fall back
    for (const nr of [425, 426, 427]) expect(decide(p, x, nr)).toBe(1); // io_uring
    expect(decide(p, x, 0x40000000 + 90, [0, 0o4755])).toBe(1); // x32
    expect(decide(p, AUDIT_ARCH.i386, 15, [0, 0o4755])).toBe(1); // i386 chmod through int 0x80
    for (const nr of [0, 1, 59, 56, 435, 87, 82]) expect(decide(p, x, nr, [0, 0o4755, 0o4755, 0o4755])).toBe("allow");
    // setxattr, lsetxattr, fsetxattr, setxattrat: EOPNOTSUPP (a POSIX ACL outlived the run; reading them is allowed)
    for (const nr of [188, 189, 190, 463, 197, 198, 199, 466]) expect(decide(p, x, nr), `${nr}`).toBe(95);
    for (const nr of [191, 192, 193, 194, 195, 196]) expect(decide(p, x, nr), `${nr}`).toBe("allow");
  });

  it("arm64: the same for its calls", () => {
    const p = noSetuidProgram("arm64");
    const a = AUDIT_ARCH.arm64;
    for (const [nr, at] of [
      [52, 1],
      [53, 2],
      [452, 2],
      [56, 3],
      [33, 2],
    ] as const) {
      const args = (mode: number) => Array.from({ length: 6 }, (_, i) => (i === at ? mode : 0));
      expect(decide(p, a, nr, args(0o4700)), `${nr}`).toBe(1);
      expect(decide(p, a, nr, args(0o644)), `${nr}`).toBe("allow");
    }
    expect(decide(p, AUDIT_ARCH.amd64, 90, [0, 0o644])).toBe(1);
    expect(decide(p, a, 220, [0, 0o4755])).toBe("allow"); // clone
    for (const nr of [5, 6, 7, 463, 14, 15, 16, 466]) expect(decide(p, a, nr), `${nr}`).toBe(95);
    for (const nr of [8, 9, 10, 11, 12, 13]) expect(decide(p, a, nr), `${nr}`).toBe("allow");
  });

  it("goes before the launcher in bind mode on the host's own platform, and not under emulation", () => {
    const launcher = [IMAGE_PATHS.node, IMAGE_PATHS.launcher];
    const native = process.arch === "arm64" ? "linux/arm64" : "linux/amd64";
    const foreign = process.arch === "arm64" ? "linux/amd64" : "linux/arm64";
    for (const platform of [undefined, native]) {
      const entry = bindModeEntrypoint(platform, launcher);
      expect(entry[0]).toBe(IMAGE_PATHS.perl);
      expect(entry.slice(-2)).toEqual(launcher);
    }
    expect(bindModeEntrypoint(foreign, launcher)).toEqual(launcher);
  });

  it("is told the trees first, read-only or not, for its check of their mounts (sockets and CA bundles are files, not trees)", () => {
    const launcher = [IMAGE_PATHS.node, IMAGE_PATHS.launcher];
    const entry = bindModeEntrypoint(undefined, launcher, [
      { containerPath: "/work/ws", readOnly: true, kind: "workspace" },
      { containerPath: "/work/ws/rw", readOnly: false, kind: "writable-root" },
      { containerPath: "/run/sandbox-run/gateway.sock", readOnly: false, kind: "socket" },
      { containerPath: "/etc/ssl/host-ca.pem", readOnly: true, kind: "ca-bundle" },
    ]);
    expect(entry.slice(3, 6)).toEqual(["2", "R/work/ws", "W/work/ws/rw"]);
    expect(entry[2]).toContain("/proc/self/mountinfo");
    expect(entry.slice(-2)).toEqual(launcher);
  });
});
