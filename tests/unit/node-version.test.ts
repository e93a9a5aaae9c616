// The Node the controller needs (package.json's engines): an older one is refused by the CLI before
// its commands load (exit 3, scripts/quickstart.sh's words and install lines), by a ContainerPiAgent
// when it is made, and doctor says FAIL. On Node 18 all of them answered as if all was well and a
// real run crashed in the relay's HTTP/2, its container left behind (review, session 37).
import fs from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { checkControllerHost } from "../../src/operations/doctor-platforms.js";
import { nodeVersionProblem } from "../../src/util/controller-host.js";
import {
  INSTALL_NODE_LINES,
  isOlderThan,
  minimumNodeVersion,
  minimumOfRange,
  nodeTooOld,
} from "../../src/util/node-version.js";
import { runProcess } from "../support/harness.js";

const repo = path.resolve(import.meta.dirname, "../..");
const manifest = JSON.parse(fs.readFileSync(path.join(repo, "package.json"), "utf8")) as { engines: { node: string } };

// A preload that makes a child process's Node say it is another version (process.versions.node and
// process.version): the CLI's refusal, seen from outside.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-node-version-"));
const fakeNode = path.join(dir, "fake-node.mjs");
fs.writeFileSync(
  fakeNode,
  'const v = process.env.FAKE_NODE_VERSION;\nObject.defineProperty(process.versions, "node", { value: v });\nObject.defineProperty(process, "version", { value: `v${v}` });\n',
);
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

// The CLI from source: tsx's loader first (it reads the real version to choose how to hook in), then the fake.
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx/esm")).href;
function cliOn(version: string, args: string[]) {
  const main = path.join(repo, "src/cli/main.ts");
  return runProcess(
    process.execPath,
    ["--import", tsxLoader, "--import", pathToFileURL(fakeNode).href, main, ...args],
    {
      env: { ...process.env, FAKE_NODE_VERSION: version, DOCKER_HOST: "unix:///nonexistent/docker.sock" },
    },
  );
}

describe("the minimum Node", () => {
  it("is package.json's engines.node, the one place that says it", () => {
    expect(manifest.engines.node).toBe(">=20.4");
    expect(minimumNodeVersion()).toEqual([20, 4, 0]);
    expect(minimumOfRange(">= 20.4.1")).toEqual([20, 4, 1]);
    // Another form of range is not guessed at (and the test above fails when package.json moves to one).
    expect(minimumOfRange("^20.4 || >=22")).toBeUndefined();
  });

  it("refuses 18.20.4 and 20.3.9, accepts 20.4.0 and later", () => {
    const min = minimumNodeVersion();
    for (const old of ["18.20.4", "v18.20.4", "20.3.9", "20.0.0", "16.20.2"])
      expect(isOlderThan(old, min), old).toBe(true);
    for (const fine of ["20.4.0", "20.4.1", "20.20.2", "21.0.0", "22.0.0", "22.12.0", "24.3.0-nightly", "100.0.0"])
      expect(isOlderThan(fine, min), fine).toBe(false);
    expect(nodeTooOld(process.versions.node)).toBeUndefined();
  });

  it("says what is needed and quickstart.sh's install lines", () => {
    const old = nodeTooOld("18.20.4");
    expect(old?.message).toBe(
      "Node v18.20.4 is older than sandbox-run needs (>= 20.4): install Node 22 or 24 (LTS), then run it again",
    );
    const quickstart = fs.readFileSync(path.join(repo, "scripts/quickstart.sh"), "utf8");
    // In single-quoted or double-quoted printf strings there.
    for (const line of INSTALL_NODE_LINES)
      expect(quickstart.includes(`'  ${line}\\n'`) || quickstart.includes(`"  ${line}\\n"`), line).toBe(true);
    expect(quickstart).toContain("install Node 22 or 24 (LTS)");
    // quickstart.sh reads the minimum from package.json too.
    expect(quickstart).toContain('require("./package.json").engines.node');
  });
});

describe("the CLI on a Node older than the minimum", () => {
  it.each([["18.20.4"], ["20.3.9"]])(
    "Node %s: one sandbox-run: line with the install lines, exit 3, for every command and --version",
    async (version) => {
      for (const args of [["--version"], ["--dry-run", "task"], ["doctor"]]) {
        const run = await cliOn(version, args);
        expect(run.status, `${args.join(" ")}: ${run.stderr}`).toBe(3);
        expect(run.stdout).toBe("");
        const lines = run.stderr.trimEnd().split("\n");
        expect(lines[0]).toBe(
          `sandbox-run: Node v${version} is older than sandbox-run needs (>= 20.4): install Node 22 or 24 (LTS), then run it again:`,
        );
        // doctor's and the library's words.
        expect(lines[0]).toBe(`sandbox-run: ${nodeTooOld(version)?.message}:`);
        expect(lines.slice(1)).toEqual(INSTALL_NODE_LINES.map((line) => `  ${line}`));
      }
    },
  );

  it("runs on the minimum itself", async () => {
    const run = await cliOn("20.4.0", ["--version"]);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^sandbox-run \d/);
  });
});

describe("doctor and the library on a Node older than the minimum", () => {
  function collect() {
    const lines: string[] = [];
    const say = {
      ok: (w: string) => lines.push(`ok ${w}`),
      note: (w: string) => lines.push(`note ${w}`),
      bad: (w: string, fix: string) => lines.push(`FAIL ${w} | ${fix}`),
    };
    return { lines, say };
  }

  it("doctor says FAIL with the install lines below the minimum, ok from it on", () => {
    const old = collect();
    checkControllerHost(old.say, "18.20.4");
    expect(old.lines).toEqual([
      expect.stringMatching(
        /^FAIL Node v18\.20\.4 is older than sandbox-run needs \(>= 20\.4\): install Node 22 or 24/,
      ),
    ]);
    expect(old.lines[0]).toContain("https://deb.nodesource.com/setup_24.x");
    expect(old.lines[0]).toContain("nvm install 24");
    const fine = collect();
    checkControllerHost(fine.say, "20.4.0");
    expect(fine.lines).toEqual([`ok controller on ${process.platform}/${process.arch} (Node v20.4.0)`]);
  });

  it("a ContainerPiAgent is refused when it is made (docker-unavailable, exit 3's code), with the install lines as its hint", () => {
    expect(nodeVersionProblem("22.0.0")).toBeUndefined();
    const own = Object.getOwnPropertyDescriptor(process.versions, "node")!;
    Object.defineProperty(process.versions, "node", { ...own, value: "18.20.4" });
    let thrown: unknown;
    try {
      new ContainerPiAgent({ reapOrphans: false });
    } catch (error) {
      thrown = error;
    } finally {
      Object.defineProperty(process.versions, "node", own);
    }
    expect(thrown).toMatchObject({
      name: "SandboxRunError",
      code: "docker-unavailable",
      shortMessage: expect.stringContaining("Node v18.20.4 is older than sandbox-run needs (>= 20.4)"),
      hint: expect.stringContaining("sudo apt-get install -y nodejs"),
    });
  });
});
