// doctor's judgement of how gVisor is registered: runs on runsc need the gateway's unix socket
// (--host-uds=open) and a seccomp filter inside the sandbox (--oci-seccomp).
import { describe, expect, it } from "vitest";
import { runscCheck } from "../../src/operations/doctor.js";

describe("runscCheck", () => {
  it("says how to register runsc when it is missing", () => {
    const check = runscCheck({ runc: { path: "runc" } });
    expect(check.level).toBe("note");
    expect(check.message).toContain("not registered");
    expect(check.fix).toContain('"runtimeArgs":["--network=none","--host-uds=open","--oci-seccomp"]');
    expect(check.fix).toContain("/etc/docker/daemon.json");
  });

  it("warns when runsc cannot open host unix sockets (the gateway would be unreachable)", () => {
    const check = runscCheck({ runsc: { path: "/usr/bin/runsc", runtimeArgs: ["--network=none"] } });
    expect(check.level).toBe("note");
    expect(check.message).toContain("without --host-uds=open");
    expect(check.fix).toContain("--host-uds=open");
  });

  it("warns when runsc ignores the seccomp profile (no --oci-seccomp)", () => {
    const check = runscCheck({ runsc: { path: "/usr/bin/runsc", runtimeArgs: ["--network=none", "--host-uds=open"] } });
    expect(check.level).toBe("note");
    expect(check.message).toBe(
      "gVisor (runsc) is registered without --oci-seccomp (args: --network=none --host-uds=open): runs on runsc get no seccomp filter inside the sandbox",
    );
    expect(check.fix).toContain('["--network=none","--host-uds=open","--oci-seccomp"]');
  });

  it("is satisfied by --host-uds=open or all, with --oci-seccomp", () => {
    const args = ["--network=none", "--host-uds=open", "--oci-seccomp"];
    expect(runscCheck({ runsc: { path: "/usr/bin/runsc", runtimeArgs: args } }).level).toBe("ok");
    expect(runscCheck({ runsc: { runtimeArgs: ["--host-uds=all", "--oci-seccomp"] } }).level).toBe("ok");
  });
});
