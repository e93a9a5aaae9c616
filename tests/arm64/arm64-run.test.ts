// linux/arm64 on this x86-64 machine, under qemu (binfmt_misc, F flag): a real task through the real
// CLI-less library path (ContainerPiAgent, real Pi, the arm64 runner image), and the core boundary
// checks on the same image. Runs are slow under emulation (docs/performance.md): few, each checking
// much, with a generous wall-clock limit; their times are printed for the record, never asserted.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, inject, it } from "vitest";
import { runnerImageSpec } from "../../src/image/runner-image.js";
import { containersOfRuns, SECRET_KEY } from "../support/harness.js";
import {
  bash,
  describeOutcome,
  finish,
  type HostileOutcome,
  hostilePolicy,
  hostileWorkspace,
  runHostile,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();
const ARM64 = "linux/arm64" as const;
/** Pi under qemu starts in seconds, not milliseconds; the limit leaves room for a loaded machine. */
const policy = () => hostilePolicy({ limits: { timeoutSeconds: 300 } });

/** Lines `name=value` printed by a probe script, as a map. */
function probes(output: string): Record<string, string> {
  return Object.fromEntries(
    output
      .split("\n")
      .filter((l) => /^[a-z0-9-]+=/.test(l))
      .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
  );
}

function timed(label: string, outcome: HostileOutcome): HostileOutcome {
  if (outcome.details) console.log(`arm64: ${label}: ${(outcome.details.durationMs / 1000).toFixed(1)} s`);
  return outcome;
}

describe.skipIf(!inject("arm64Image"))("linux/arm64 under emulation", () => {
  it("refuses bind mode under emulation (its no-setuid filter cannot be installed under qemu), before anything starts", async () => {
    const outcome = await runHostile(server, [finish({ done: true })], {
      cwd: hostileWorkspace(),
      platform: ARM64,
      workspaceMode: "bind",
      policy: policy(),
    });
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("usage");
    expect(outcome.error?.shortMessage).toMatch(/^Bind mode cannot run under emulation \(linux\/arm64 on this/);
  });

  // undefined: the default under emulation, copy mode (review, session 33).
  for (const workspaceMode of [undefined, "copy"] as const) {
    it(`runs a real task (${workspaceMode ?? "default"} mode): the sandbox is aarch64, Node arm64, the result and the workspace come back`, async () => {
      const ws = hostileWorkspace({ "input.txt": "hello from the host\n" });
      const outcome = timed(
        `a 2-turn task, ${workspaceMode ?? "default"} mode`,
        await runHostile(
          server,
          [
            bash(
              [
                'echo "uname=$(uname -m)"',
                'echo "node-arch=$(node -p process.arch)"',
                'echo "input=$(cat input.txt)"',
                "echo made-on-arm64 > out.txt",
              ].join("\n"),
            ),
            finish({ done: true }),
          ],
          { cwd: ws, platform: ARM64, workspaceMode, policy: policy() },
        ),
      );
      expect(outcome.details, describeOutcome(outcome)).toBeDefined();
      const p = probes(outcome.toolResults[0] ?? "");
      expect(p.uname).toBe("aarch64");
      expect(p["node-arch"]).toBe("arm64");
      expect(p.input).toBe("hello from the host");
      expect(outcome.details?.result).toEqual({ done: true });
      expect(outcome.details?.platform).toBe(ARM64);
      expect(outcome.details?.image).toBe(runnerImageSpec(ARM64).tag);
      expect(outcome.events.find((e) => e.type === "run.planned")?.data).toMatchObject({ platform: ARM64 });
      expect(outcome.plan?.workspaceMode).toBe("copy");
      if (workspaceMode === undefined)
        expect(outcome.events.find((e) => e.type === "workspace.copy-mode")?.data.reason).toMatch(
          /the run is emulated/,
        );
      // Handed back: the file is on the host, the caller's.
      const out = path.join(ws, "out.txt");
      expect(fs.readFileSync(out, "utf8")).toBe("made-on-arm64\n");
      expect(fs.statSync(out).uid).toBe(process.getuid?.());
      expect(outcome.details?.changedFiles.created).toContain("out.txt");
      expect(await containersOfRuns([outcome.runId])).toEqual([]);
    });
  }

  it("keeps the boundary: non-root, no capabilities, no write outside the workspace, no network, no key inside", async () => {
    const ws = hostileWorkspace();
    const outside = hostileWorkspace({}, "sandbox-run-outside-");
    const outcome = timed(
      "the boundary probe",
      await runHostile(
        server,
        [
          bash(
            [
              'echo "uname=$(uname -m)"',
              'echo "uid=$(id -u)"',
              "grep -E '^(CapPrm|CapEff|CapBnd|NoNewPrivs):' /proc/self/status | sed -E 's/^([A-Za-z]+):\\s+/\\L\\1=/'",
              // Outside the workspace: the host folder next to it, and the image's own files.
              `mkdir -p ${outside} && echo escaped > ${outside}/escaped.txt; echo "write-outside-path=$?"`,
              'touch /etc/pwned 2>/dev/null; echo "write-etc=$?"',
              'touch /opt/sandbox-run/pwned 2>/dev/null; echo "write-image=$?"',
              `timeout 20 bash -c 'echo hi > /dev/tcp/1.1.1.1/443' 2>/dev/null; echo "tcp-internet=$?"`,
              'timeout 20 getent hosts example.com >/dev/null; echo "dns=$?"',
              'echo "interfaces=$(ls /sys/class/net | tr "\\n" " ")"',
              // Everything a key could hide in, for the host to search (a pattern here would hold the key).
              "env > env.txt",
              "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat $f 2>/dev/null; echo; done > proc.txt",
              "cp /home/sandbox/.pi/agent/models.json models.json",
            ].join("\n"),
          ),
          finish(),
        ],
        { cwd: ws, platform: ARM64, policy: policy() },
      ),
    );
    expect(outcome.details, describeOutcome(outcome)).toBeDefined();
    const p = probes(outcome.toolResults[0] ?? "");
    expect(p.uname).toBe("aarch64");
    expect(Number(p.uid)).toBeGreaterThan(0);
    for (const set of ["capprm", "capeff", "capbnd"]) expect(p[set], set).toBe("0000000000000000");
    expect(p.nonewprivs).toBe("1");
    // The write to the outside path landed in the sandbox's own /tmp, never on the host.
    expect(fs.existsSync(path.join(outside, "escaped.txt"))).toBe(false);
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(p["write-etc"]).not.toBe("0");
    expect(p["write-image"]).not.toBe("0");
    expect(p["tcp-internet"]).toMatch(/^[1-9]/);
    expect(p.dns).toMatch(/^[1-9]/);
    expect(p.interfaces?.trim()).toBe("lo");
    // The key stayed on the host: not in the sandbox's environment, processes or Pi's models.json ...
    for (const file of ["env.txt", "proc.txt", "models.json"]) {
      const bytes = fs.readFileSync(path.join(ws, file));
      expect(bytes.length, file).toBeGreaterThan(0);
      expect(bytes.includes(SECRET_KEY), file).toBe(false);
    }
    // ... though it was in play: the host added it to every model request.
    expect(outcome.requests.length).toBeGreaterThan(0);
    for (const request of outcome.requests) expect(request.headers.authorization).toBe(`Bearer ${SECRET_KEY}`);
  });

  it("refuses gVisor under emulation up front, saying why, before any container exists", async () => {
    const outcome = await runHostile(server, [finish()], { platform: ARM64, runtime: "runsc", policy: policy() });
    expect(outcome.error?.code, describeOutcome(outcome)).toBe("usage");
    expect(outcome.error?.shortMessage).toContain("gVisor (runsc) cannot run linux/arm64 sandboxes");
    expect(outcome.events.some((e) => e.type === "container.created")).toBe(false);
    expect(outcome.requests).toEqual([]);
  });
});
