// The packed library is the same on every architecture: no file of it is tied to one (no native
// addon, no platform-named path), and the native parts of its dependencies are optional in fact:
// ssh2 (the ssh:// engines) loads, and sandbox-run's ssh tunnel with it, where no native addon can
// load at all, as on an arm64 machine without a compiler (ssh2's install script then builds nothing).
// (npm and a second Node take seconds on a loaded machine: each test has its own time limit.)
import { execFile } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-portable-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe("the package on other architectures", () => {
  it("packs no architecture-specific file", async () => {
    const { stdout } = await run("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: ROOT });
    const files: string[] = JSON.parse(stdout)[0].files.map((f: { path: string }) => f.path);
    expect(files).toContain("images/pi/Dockerfile");
    expect(files).toContain("images/pi/package-lock.json");
    // Judged without the bundle's content hashes (bundle-cli.mjs names chunks bundle-<name>-<hash>):
    // a hash such as WAJVZX64 is not an architecture.
    const named = (f: string) => f.replace(/^(dist\/cli\/bundle-.+)-[A-Z0-9]{8}(\.js(\.map)?)$/, "$1$2");
    const specific = files.filter((f) => /\.node$|x86|x64|amd64|aarch64|arm64|darwin|win32/i.test(named(f)));
    expect(specific).toEqual([]);
    // No source maps: they point at ../src/*.ts, which is not shipped, and were half the package
    // (6.5 of 11.3 MB; review, session 37).
    expect(files.filter((f) => f.endsWith(".map"))).toEqual([]);
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
    expect(pkg.cpu).toBeUndefined();
    expect(pkg.os).toBeUndefined();
  }, 60_000);

  it("loads ssh2 and the ssh tunnel where no native addon can load", async () => {
    const hook = path.join(dir, "no-native-addons.cjs");
    fs.writeFileSync(
      hook,
      'require("node:module")._extensions[".node"] = (m, file) => { throw new Error(`no native addon: ${file}`); };\n',
    );
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx/esm")).href;
    const tunnel = pathToFileURL(path.join(ROOT, "src/engine/ssh-tunnel.ts")).href;
    const script = [
      `const tunnel = await import(${JSON.stringify(tunnel)});`,
      'const ssh2 = await import("ssh2");',
      'const crypto = await import("ssh2/lib/protocol/crypto.js");',
      "new ssh2.Client();",
      "console.log(JSON.stringify({ tunnel: Object.keys(tunnel).length, binding: crypto.default.bindingAvailable }));",
    ].join("\n");
    const { stdout } = await run(
      process.execPath,
      ["--require", hook, "--import", tsx, "--input-type=module", "-e", script],
      { cwd: ROOT },
    );
    // The binding really was kept out (on this machine it is built), and everything loaded without it.
    expect(JSON.parse(stdout.trim().split("\n").at(-1)!)).toEqual({ tunnel: expect.any(Number), binding: false });
  }, 60_000);
});
