import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { resolveConfigValue } from "../../src/gateway/config-value.js";
import { hostProgramCwd, hostProgramEnv, hostSearchPath, rememberLentTrees } from "../../src/util/host-programs.js";
import { passesThrough } from "../../src/util/passes-through.js";

const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-host-programs-")));
afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

describe("hostSearchPath", () => {
  it("keeps absolute folders outside lent trees, in order, once each", () => {
    expect(hostSearchPath("/usr/local/bin:/usr/bin:/bin:/usr/bin")).toBe("/usr/local/bin:/usr/bin:/bin");
  });

  it("drops relative and empty entries (the working directory, often the workspace)", () => {
    expect(hostSearchPath("bin::./tools:/usr/bin:node_modules/.bin:")).toBe("/usr/bin");
  });

  it("drops folders in a lent tree: existing, not made yet, and reached through a link from outside", () => {
    const ws = path.join(base, "ws");
    const outside = path.join(base, "outside");
    fs.mkdirSync(path.join(ws, "node_modules/.bin"), { recursive: true });
    fs.mkdirSync(outside);
    fs.symlinkSync(path.join(ws, "node_modules"), path.join(outside, "mods"));
    const callerPath = [
      path.join(ws, "node_modules/.bin"),
      path.join(ws, "bin"),
      path.join(outside, "mods/.bin"),
      outside,
      "/usr/bin",
    ].join(":");
    expect(hostSearchPath(callerPath)).toBe(callerPath);
    rememberLentTrees([ws]);
    expect(hostSearchPath(callerPath)).toBe(`${outside}:/usr/bin`);
    expect(hostProgramEnv({ PATH: callerPath, HOME: "/h" })).toEqual({ PATH: `${outside}:/usr/bin`, HOME: "/h" });
  });

  it("drops a folder reached through a link in a lent tree that leads out today (the sandbox may point it elsewhere); judged at every call", () => {
    const ws = path.join(base, "ws2");
    const venv = path.join(base, "venv");
    fs.mkdirSync(path.join(venv, "bin"), { recursive: true });
    fs.mkdirSync(ws);
    fs.symlinkSync(venv, path.join(ws, ".venv"));
    const callerPath = `${ws}/.venv/bin:/usr/bin`;
    expect(hostSearchPath(callerPath)).toBe(callerPath);
    rememberLentTrees([ws]);
    expect(hostSearchPath(callerPath)).toBe("/usr/bin");
    // `..` after a link goes up from where the link leads: `out/tools/../bin` is the lent tree's bin.
    const out = path.join(base, "out2");
    fs.mkdirSync(out);
    fs.mkdirSync(path.join(ws, "tools"));
    fs.symlinkSync(path.join(ws, "tools"), path.join(out, "tools"));
    expect(hostSearchPath(`${out}/tools/../bin:/usr/bin`)).toBe("/usr/bin");
  });

  it("the loader's, the shells' and the interpreters' search paths lose relative entries and entries in lent trees too (review, round 3, session 42: LD_LIBRARY_PATH=$PWD/lib loaded the sandbox's library into a !command)", () => {
    const ws = path.join(base, "ws3");
    fs.mkdirSync(path.join(ws, "lib"), { recursive: true });
    rememberLentTrees([ws]);
    const env = hostProgramEnv({
      PATH: "/usr/bin",
      HOME: "/h",
      LD_LIBRARY_PATH: `${ws}/lib:/opt/lib:lib`,
      LD_PRELOAD: `libjemalloc.so.2 ${ws}/lib/evil.so:./x.so /opt/lib/libfast.so`,
      LD_AUDIT: `${ws}/lib/audit.so`,
      BASH_ENV: `${ws}/.bashrc`,
      ENV: "/etc/shrc",
      PYTHONPATH: `${ws}/src`,
      NODE_PATH: `/usr/lib/node_modules:${ws}/node_modules`,
      RUBYOPT: "-rbundler/setup",
      LANG: "C.UTF-8",
      // Any other variable naming a path in a lent tree goes whole (fix review, round 3, session 42).
      PERL5OPT: `-I${ws}/lib -MEvil`,
      OPENSSL_CONF: `${ws}/openssl.cnf`,
      NODE_OPTIONS: `--require=${ws}/hook.js`,
      JAVA_TOOL_OPTIONS: "-Xmx1g",
      VAULT_ADDR: "https://vault.example:8200",
    });
    expect(env).toEqual({
      PATH: "/usr/bin",
      HOME: "/h",
      LD_LIBRARY_PATH: "/opt/lib",
      LD_PRELOAD: "libjemalloc.so.2 /opt/lib/libfast.so",
      ENV: "/etc/shrc",
      NODE_PATH: "/usr/lib/node_modules",
      LANG: "C.UTF-8",
      JAVA_TOOL_OPTIONS: "-Xmx1g",
      VAULT_ADDR: "https://vault.example:8200",
    });
  });

  it("a variable naming a tree whose path has a blank, or naming it percent-encoded in a file URL, goes too (second fix review, round 3, session 42)", () => {
    const ws = path.join(base, "My Projects", "app");
    fs.mkdirSync(ws, { recursive: true });
    rememberLentTrees([ws]);
    const env = hostProgramEnv({
      PATH: "/usr/bin",
      PYTHONUSERBASE_X: `${ws}/ub`,
      NODE_OPTIONS: `--import=file://${encodeURI(ws)}/hook.mjs`,
      OPENSSL_CONF: `${ws}/openssl.cnf`,
      // Another folder whose name ends like the tree's is not the tree.
      OTHER: `${path.join(base, "My Projects", "apps")}/x`,
    });
    expect(env).toEqual({ PATH: "/usr/bin", OTHER: `${path.join(base, "My Projects", "apps")}/x` });
  });

  it("a host program without a folder of its own runs in the caller's home, or / where that is lent; never the working directory", () => {
    const ws = path.join(base, "ws4");
    fs.mkdirSync(path.join(ws, "home"), { recursive: true });
    expect(hostProgramCwd("/root")).toBe("/root");
    rememberLentTrees([ws]);
    expect(hostProgramCwd(path.join(ws, "home"))).toBe("/");
    expect(hostProgramCwd("relative")).toBe("/");
    // A models.json !command runs there (not in the test's working directory, this checkout).
    expect(resolveConfigValue("!pwd", { env: { HOME: os.homedir() }, runCommands: true })).toEqual({
      ok: true,
      value: hostProgramCwd(),
    });
    expect(hostProgramCwd()).not.toBe(process.cwd());
  });

  it("falls back to the system folders when nothing is left", () => {
    expect(hostSearchPath("bin:.")).toBe("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    expect(hostSearchPath("")).toBe("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  });
});

describe("passesThrough in a long-lived process", () => {
  it("looks a folder's ancestors up among the lent trees instead of scanning them all (a service lends a new checkout per task)", () => {
    /** A set of trees that must never be walked whole: looked up only. */
    class LookedUpOnly extends Set<string> {
      override [Symbol.iterator](): SetIterator<string> {
        throw new Error("scanned every lent tree");
      }
    }
    const trees = new LookedUpOnly();
    for (let i = 0; i < 10_000; i++) trees.add(`/srv/tasks/${i}/repo`);
    expect(passesThrough("/srv/tasks/42/repo/node_modules/.bin", trees)).toBe(true);
    expect(passesThrough("/srv/tasks/42/repo", trees)).toBe(true);
    expect(passesThrough("/srv/tasks/42/repository", trees)).toBe(false);
    expect(passesThrough("/usr/bin", trees)).toBe(false);
    expect(passesThrough("/usr/bin", new Set(["/"]))).toBe(true);
  });
});
