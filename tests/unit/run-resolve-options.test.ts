// Option layering and input checks: everything a caller can get wrong fails here, as a usage
// error that says what to do, before anything is created.
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isSandboxRunError, type SandboxRunError } from "../../src/errors.js";
import { loadPolicy } from "../../src/policy/load-policy.js";
import {
  accountHomes,
  GC_ACCOUNT_HOMES,
  lentFolderProblem,
  othersMayReplace,
  readOnlyFolderProblem,
} from "../../src/run/plan/host-folders.js";
import { loadSchemaCompiler, type RunOptions, recheckFolders, resolveRun } from "../../src/run/plan/resolve-options.js";
import { privateRunDirsParent } from "../../src/run/run-dirs.js";
import { launchPaths } from "../../src/util/own-installation.js";

const temp: string[] = [];
function dir(prefix = "sandbox-run-resolve-"): string {
  const d = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
  temp.push(d);
  return d;
}
afterAll(() => {
  for (const d of temp) fs.rmSync(d, { recursive: true, force: true });
});

const ws = dir();
const MODEL = "scripted/x";
/** Custom providers for the models these tests name: routing is planned while resolving. */
const MODELS = {
  providers: Object.fromEntries(
    ["scripted", "ctor", "run", "env"].map((id) => [
      id,
      {
        baseUrl: "http://127.0.0.1:9/v1",
        api: "openai-completions",
        models: [{ id: "x" }, { id: "m" }, { id: "model" }],
      },
    ]),
  ),
};

function usageError(fn: () => unknown): SandboxRunError {
  try {
    fn();
  } catch (error) {
    if (isSandboxRunError(error)) return error;
    throw error;
  }
  throw new Error("expected a usage error, got none");
}

const resolve = (run: RunOptions, config: RunOptions = {}, env: Record<string, string | undefined> = {}) =>
  resolveRun("do the task", config, { cwd: ws, models: MODELS, model: MODEL, ...run }, env);

describe("resolveRun: environment layers", () => {
  it("merges host < constructor < run, and undefined removes a variable of an earlier layer", () => {
    const run = resolveRun(
      "task",
      { env: { B: "ctor", C: "ctor", D: "ctor" } },
      { cwd: ws, models: MODELS, model: MODEL, env: { C: "run", D: undefined, A: undefined } },
      { A: "host", B: "host", C: "host", D: "host", H: "host" },
    );
    // The host-side view (credential lookup, `!command` values) sees every layer.
    expect(run.hostEnv).toEqual({ B: "ctor", C: "run", H: "host" });
    // The sandbox gets only what was given explicitly, never the host's environment.
    expect(run.sandboxEnv).toEqual({ B: "ctor", C: "run" });
  });

  it("run-level undefined removes a constructor variable from the sandbox", () => {
    const run = resolve({ env: { TOKEN: undefined } }, { env: { TOKEN: "t", KEEP: "k" } });
    expect(run.sandboxEnv).toEqual({ KEEP: "k" });
  });

  it.each(["HOME", "TMPDIR", "PI_CODING_AGENT_DIR", "PI_OFFLINE", "SANDBOX_RUN_CONFIG"])(
    "rejects env setting %s",
    (name) => {
      const error = usageError(() => resolve({ env: { [name]: "x" } }));
      expect(error.code).toBe("usage");
      expect(error.shortMessage).toContain(name);
      expect(error.hint).toContain(`Remove ${name}`);
    },
  );
});

describe("resolveRun: model", () => {
  it("takes the run's model over the constructor's over SANDBOX_RUN_MODEL", () => {
    const env = { SANDBOX_RUN_MODEL: "env/model" };
    expect(resolveRun("t", { model: "ctor/m" }, { cwd: ws, models: MODELS, model: "run/m" }, env).model).toBe("run/m");
    expect(resolveRun("t", { model: "ctor/m" }, { cwd: ws, models: MODELS }, env).model).toBe("ctor/m");
    expect(resolveRun("t", {}, { cwd: ws, models: MODELS }, env).model).toBe("env/model");
  });

  it("without any model says how to give one", () => {
    const error = usageError(() => resolveRun("t", {}, { cwd: ws, models: MODELS }, {}));
    expect(error.code).toBe("usage");
    expect(error.shortMessage).toBe("No model was given.");
    expect(error.hint).toContain("SANDBOX_RUN_MODEL");
  });

  it("rejects a model that is not provider/id", () => {
    expect(usageError(() => resolve({ model: "gpt" })).shortMessage).toContain('"gpt" is not of the form provider/id');
  });
});

describe("resolveRun: runner image", () => {
  const withImage = { ...loadPolicy("read-only"), image: "sandbox-run/pi-apt:from-policy" };
  it("run option > constructor > policy > SANDBOX_RUN_IMAGE > none (this version's runner image)", () => {
    const env = { SANDBOX_RUN_IMAGE: "env/image:1" };
    expect(resolve({ image: "run/image:1", policy: withImage }, { image: "config/image:1" }, env).image).toBe(
      "run/image:1",
    );
    expect(resolve({ policy: withImage }, { image: "config/image:1" }, env).image).toBe("config/image:1");
    expect(resolve({ policy: withImage }, {}, env).image).toBe("sandbox-run/pi-apt:from-policy");
    expect(resolve({}, {}, env).image).toBe("env/image:1");
    expect(resolve({}).image).toBeUndefined();
  });

  it("a policy's image must look like an image reference", () => {
    const error = usageError(() => resolve({ policy: { ...withImage, image: "not an image; rm -rf /" } }));
    expect(error.shortMessage).toMatch(/image: must be an image reference/);
  });
});

describe("resolveRun: directories", () => {
  it("checks the folders again once the run holds its trees: one an earlier run turned into a link is refused, an unchanged one passes", () => {
    const outside = dir();
    fs.mkdirSync(path.join(outside, "lib"));
    const repo = dir();
    fs.mkdirSync(path.join(repo, "services/lib"), { recursive: true });
    // Planned while another task's sandbox still works on `repo` ...
    const planned = resolve({ cwd: path.join(repo, "services/lib") });
    expect(planned.cwd).toBe(path.join(repo, "services/lib"));
    recheckFolders(planned);
    // ... which then puts a link where services/ was (a batch's earlier task on ".").
    fs.renameSync(path.join(repo, "services"), path.join(repo, "services.old"));
    fs.symlinkSync(outside, path.join(repo, "services"));
    const error = usageError(() => recheckFolders(planned));
    expect(error.code).toBe("usage");
    expect(error.message).toContain(`goes through the symbolic link ${repo}/services, which points to ${outside}`);
    // A link that stays inside still changes which folder the run would get: refused too.
    fs.unlinkSync(path.join(repo, "services"));
    fs.symlinkSync("./services.old", path.join(repo, "services"));
    expect(usageError(() => recheckFolders(planned)).shortMessage).toBe(
      `The cwd ${repo}/services/lib changed while this run waited for another run on the same trees: it now leads to ${repo}/services.old/lib.`,
    );
  });

  it("canonicalises the workspace through symlinks that stay inside their folder", () => {
    const parent = dir();
    fs.mkdirSync(path.join(parent, "app-v2/src"), { recursive: true });
    fs.symlinkSync("./app-v2", path.join(parent, "app"));
    fs.symlinkSync("app", path.join(parent, "current")); // a chain, all inside
    expect(resolve({ cwd: path.join(parent, "app") }).cwd).toBe(path.join(parent, "app-v2"));
    expect(resolve({ cwd: path.join(parent, "current/src") }).cwd).toBe(path.join(parent, "app-v2/src"));
  });

  it("refuses a link on the way that leads out of the folder it sits in (a repository's packages/app -> /root), naming it and the real folder", () => {
    const outside = dir();
    fs.mkdirSync(path.join(outside, "sub"));
    const repo = dir();
    fs.mkdirSync(path.join(repo, "packages"));
    fs.mkdirSync(path.join(repo, "shared"));
    fs.symlinkSync(outside, path.join(repo, "packages/app"));
    fs.symlinkSync("../shared", path.join(repo, "packages/up"));
    fs.symlinkSync("app", path.join(repo, "packages/chain")); // inside, but on to a link that leads out
    for (const cwd of ["packages/app", "packages/app/sub", "packages/chain"]) {
      const error = usageError(() => resolve({ cwd: path.join(repo, cwd) }));
      expect(error.code).toBe("usage");
      expect(error.shortMessage).toContain(`through the symbolic link ${repo}/packages/`);
      expect(error.shortMessage).toContain(`outside the folder ${repo}/packages it sits in`);
      expect(error.hint).toBe(
        `Name the real folder if that is what you mean: --cwd ${cwd === "packages/app/sub" ? `${outside}/sub` : outside}.`,
      );
    }
    expect(usageError(() => resolve({ cwd: path.join(repo, "packages/up") })).shortMessage).toContain(
      `which points to ../shared (${repo}/shared), outside`,
    );
    const writable = usageError(() => resolve({ additionalWritableDirectories: [path.join(repo, "packages/app")] }));
    expect(writable.hint).toBe(`Name the real folder if that is what you mean: --writable ${outside}.`);
    const policy = { ...loadPolicy("read-only"), readOnlyMounts: [path.join(repo, "packages/app")] };
    expect(usageError(() => resolve({ policy })).shortMessage).toMatch(/^The read-only mount .* goes through/);
    // Named by its real path, the same folder is fine.
    expect(resolve({ cwd: outside }).cwd).toBe(outside);
  });

  it("refuses as read-only mounts what a sandbox must not read or connect to: the home folder and its parents, /etc, /run (services' sockets), the engine's state; a folder inside home and /usr are fine", () => {
    const parent = dir();
    const home = path.join(parent, "me");
    fs.mkdirSync(path.join(home, "datasets"), { recursive: true });
    const saved = process.env.HOME;
    process.env.HOME = home;
    try {
      const mount = (folder: string) => resolve({ policy: { ...loadPolicy("read-only"), readOnlyMounts: [folder] } });
      expect(usageError(() => mount(home)).shortMessage).toBe(
        `The read-only mount ${home} is your home folder: a sandbox could read your ssh keys, tokens and shell history.`,
      );
      expect(usageError(() => mount(parent)).shortMessage).toContain("holds your home folder");
      expect(usageError(() => mount("/etc/ssl")).shortMessage).toContain("lies in /etc");
      expect(usageError(() => mount("/run/docker")).shortMessage).toContain(
        "can connect to a socket through a read-only mount",
      );
      expect(usageError(() => mount("/var/lib")).shortMessage).toContain("the container engine's state");
      expect(mount(path.join(home, "datasets")).readOnlyMounts).toEqual([path.join(home, "datasets")]);
      expect(mount("/usr/share").readOnlyMounts).toEqual(["/usr/share"]);
    } finally {
      process.env.HOME = saved;
    }
  });

  it("refuses the caller's home folder and any folder holding it as the workspace or a writable directory, not a folder inside it", () => {
    const parent = dir();
    const home = path.join(parent, "me");
    fs.mkdirSync(path.join(home, "project"), { recursive: true });
    const saved = process.env.HOME;
    process.env.HOME = home;
    try {
      const error = usageError(() => resolve({ cwd: home }));
      expect(error.shortMessage).toBe(
        `The cwd ${home} is your home folder: a sandbox could write your shell's start-up files, ssh keys and git config.`,
      );
      expect(error.hint).toBe("Pass a project directory instead.");
      expect(usageError(() => resolve({ additionalWritableDirectories: [parent] })).shortMessage).toContain(
        `holds your home folder ${home}`,
      );
      expect(resolve({ cwd: path.join(home, "project") }).cwd).toBe(path.join(home, "project"));
    } finally {
      process.env.HOME = saved;
    }
  });

  it("refuses a dot-folder of the caller's home, or a folder in one, as the workspace or a writable directory (review, round 3, session 42: --writable ~/.config let a run set the user's global core.fsmonitor)", () => {
    const home = path.join(dir(), "me");
    for (const sub of [".config/git", ".cargo/bin", "project/.cache"])
      fs.mkdirSync(path.join(home, sub), { recursive: true });
    const saved = process.env.HOME;
    process.env.HOME = home;
    try {
      expect(
        usageError(() => resolve({ additionalWritableDirectories: [path.join(home, ".config")] })).shortMessage,
      ).toBe(
        `The writable directory ${home}/.config is a folder of your home's tools (their configuration, caches and programs: ~/.config/git/config, ~/.cargo/bin, ~/.ssh): a sandbox could change what your own commands run.`,
      );
      expect(usageError(() => resolve({ cwd: path.join(home, ".cargo/bin") })).shortMessage).toContain(
        `lies in ${home}/.cargo, a folder of your home's tools`,
      );
      // A project's own dot-folder is the project's.
      expect(resolve({ cwd: path.join(home, "project"), additionalWritableDirectories: [] }).cwd).toBe(
        path.join(home, "project"),
      );
      expect(resolve({ cwd: path.join(home, "project/.cache") }).cwd).toBe(path.join(home, "project/.cache"));
    } finally {
      process.env.HOME = saved;
    }
  });

  it("refuses a tree in a folder another user may replace it in (review, round 3, session 42: a swap for a link to the caller's home between the checks and the container's start); a sticky shared folder and the caller's own are fine", () => {
    const shared = dir();
    fs.mkdirSync(path.join(shared, "ws"));
    fs.chmodSync(shared, 0o777);
    const error = usageError(() => resolve({ cwd: path.join(shared, "ws") }));
    expect(error.shortMessage).toBe(
      `The cwd ${shared}/ws lies in ${shared}, which may be written by every user (mode 777): another user could replace the cwd with a link between sandbox-run's checks and the container's start, and the sandbox would get where the link leads.`,
    );
    expect(error.hint).toContain(`chmod o-w ${shared}`);
    expect(
      usageError(() => resolve({ additionalWritableDirectories: [path.join(shared, "ws")] })).shortMessage,
    ).toContain(`lies in ${shared}, which may be written by every user`);
    // Group-writable is left to the group (docs/security.md, not promised).
    fs.chmodSync(shared, 0o775);
    fs.chownSync(shared, process.geteuid!(), 4242);
    expect(resolve({ cwd: path.join(shared, "ws") }).cwd).toBe(path.join(shared, "ws"));
    // Another user's folder: its owner may rename what is in it, sticky or not. Judged for a caller
    // other than root, whose bind-mode sandbox writes as the caller (the tree itself too); root's
    // trees in a runner's folders (a CI container job's) are left alone.
    fs.chownSync(shared, 4242, process.getegid!());
    fs.chmodSync(shared, 0o1777);
    expect(othersMayReplace(path.join(shared, "ws"), 1500)).toEqual({
      dir: shared,
      why: "belongs to uid 4242",
      owner: true,
    });
    fs.chownSync(shared, 1500, process.getegid!());
    fs.chownSync(path.join(shared, "ws"), 4242, process.getegid!());
    expect(othersMayReplace(path.join(shared, "ws"), 1500)).toEqual({
      dir: path.join(shared, "ws"),
      why: "belongs to uid 4242",
      owner: true,
    });
    expect(othersMayReplace(path.join(shared, "ws"), 0)).toBeUndefined();
    expect(resolve({ cwd: path.join(shared, "ws") }).cwd).toBe(path.join(shared, "ws"));
    fs.chownSync(path.join(shared, "ws"), process.geteuid!(), process.getegid!());
    // The sticky bit keeps others from renaming what is not theirs (/tmp).
    fs.chownSync(shared, process.geteuid!(), process.getegid!());
    fs.chmodSync(shared, 0o1777);
    expect(resolve({ cwd: path.join(shared, "ws") }).cwd).toBe(path.join(shared, "ws"));
    fs.chmodSync(shared, 0o700);
    expect(resolve({ cwd: path.join(shared, "ws") }).cwd).toBe(path.join(shared, "ws"));
  });

  it("judges folders by identity too: TMPDIR reached through a bind mount of the workspace, and a writable directory that is the workspace under another name, are refused (review, round 3, session 42)", () => {
    expect(process.geteuid?.(), "mount needs root (the unit tests run as root here and on CI)").toBe(0);
    const project = dir();
    const alias = dir();
    expect(spawnSync("mount", ["--bind", project, alias]).status).toBe(0);
    const saved = process.env.TMPDIR;
    try {
      fs.mkdirSync(path.join(project, "tmp"));
      process.env.TMPDIR = path.join(alias, "tmp");
      expect(usageError(() => resolve({ cwd: project })).shortMessage).toContain(
        "is or holds sandbox-run's own run folders",
      );
      process.env.TMPDIR = saved;
      expect(usageError(() => resolve({ cwd: project, additionalWritableDirectories: [alias] })).shortMessage).toBe(
        `The mounted directories ${project} and ${alias} overlap.`,
      );
      expect(resolve({ cwd: project }).cwd).toBe(project);
    } finally {
      process.env.TMPDIR = saved;
      spawnSync("umount", [alias]);
    }
  });

  it("refuses sandbox-run's own run folders as a writable directory", () => {
    const parent = privateRunDirsParent();
    expect(usageError(() => resolve({ additionalWritableDirectories: [parent] })).shortMessage).toContain(
      "sandbox-run's own run folders",
    );
  });

  it("rejects a missing cwd", () => {
    const missing = path.join(ws, "does-not-exist");
    const error = usageError(() => resolve({ cwd: missing }));
    expect(error.code).toBe("usage");
    expect(error.shortMessage).toBe(`The cwd ${missing} does not exist.`);
  });

  it("rejects a file as cwd", () => {
    const file = path.join(dir(), "file.txt");
    fs.writeFileSync(file, "x");
    const error = usageError(() => resolve({ cwd: file }));
    expect(error.shortMessage).toContain("is not a directory");
  });

  it.each(["/", "/etc", "/usr", "/proc/self", "/usr/bin", "/run"])("rejects %s as cwd", (cwd) => {
    const error = usageError(() => resolve({ cwd }));
    expect(error.code).toBe("usage");
    expect(error.hint).toBe("Pass a project directory instead.");
  });

  it("rejects the host root with a message that says so", () => {
    expect(usageError(() => resolve({ cwd: "/" })).shortMessage).toContain("the root of the host");
  });

  it("rejects writable directories inside the workspace, equal to it, or containing it", () => {
    const parent = dir();
    const workspace = path.join(parent, "project");
    const inside = path.join(workspace, "sub");
    fs.mkdirSync(inside, { recursive: true });
    for (const writable of [inside, workspace, parent]) {
      const error = usageError(() => resolve({ cwd: workspace, additionalWritableDirectories: [writable] }));
      expect(error.code).toBe("usage");
      expect(error.shortMessage).toContain("overlap");
    }
  });

  it("rejects two writable directories that are the same through a symlink", () => {
    const parent = dir();
    const extra = path.join(parent, "extra");
    fs.mkdirSync(extra);
    const link = path.join(parent, "alias");
    fs.symlinkSync("extra", link);
    expect(usageError(() => resolve({ additionalWritableDirectories: [extra, link] })).shortMessage).toContain(
      "overlap",
    );
  });

  it("accepts a disjoint writable directory, canonicalised", () => {
    const extra = dir();
    expect(resolve({ additionalWritableDirectories: [extra] }).writableRoots).toEqual([extra]);
  });

  it("rejects writable directories under the read-only policy", () => {
    const error = usageError(() => resolve({ sandbox: "read-only", additionalWritableDirectories: [dir()] }));
    expect(error.code).toBe("usage");
    expect(error.shortMessage).toContain("read-only does not allow extra writable directories");
  });
});

describe("lentFolderProblem", () => {
  it.each([
    ["/var/lib/docker/volumes/x", "lies in /var/lib/docker, the container engine's state"],
    ["/var/lib/containerd", "lies in /var/lib/containerd"],
    ["/var/lib/kubelet/pods", "lies in /var/lib/kubelet"],
    ["/var/snap/docker/common", "lies in /var/snap/docker"],
    ["/var/snap", "holds the container engine's state"],
    ["/var/lib", "holds the container engine's state"],
    ["/run/docker", "lies in /run, host services' sockets"],
    ["/var/run/docker.sock.d", "lies in /var/run"],
    ["/etc/cron.d", "lies in /etc, the host's configuration"],
    ["/usr/local/bin", "lies in /usr, the host's programs"],
    ["/usr/src", "lies in /usr, the host's programs"],
    ["/lib64/x", "lies in /lib64"],
    ["/boot/grub", "lies in /boot"],
    ["/h/me", "is your home folder"],
    ["/h", "holds your home folder /h/me"],
    ["/t/sandbox-run-0", "sandbox-run's own run folders"],
    ["/t/sandbox-run-0/run-x", "sandbox-run's own run folders"],
    // Another temp folder's, whatever TMPDIR is now: a sandbox lent /tmp could make a run folder
    // there that a later reaper with TMPDIR=/tmp took for its own (and judged or handed back as root).
    ["/tmp", "sandbox-run's own run folders (/tmp/sandbox-run-0)"],
    ["/var/tmp", "sandbox-run's own run folders (/var/tmp/sandbox-run-0)"],
    ["/dev/shm", "sandbox-run's own run folders (/dev/shm/sandbox-run-0)"],
  ])("refuses %s", (folder, why) => {
    const problem = lentFolderProblem(folder, "/h/me", "/t")?.replace(/sandbox-run-\d+/g, "sandbox-run-0");
    expect(problem).toContain(why);
  });

  // Review, session 34: with HOME pointing elsewhere (sudo -E, a CI job's HOME=/github/home), the
  // account's real home was lent writable, and the sandbox wrote its .ssh.
  it("refuses the account's own home folder (its passwd entry's, SUDO_USER's, /root for root) whatever HOME says, and any folder holding it", () => {
    expect(lentFolderProblem("/home/u", "/tmp/x", "/t", ["/home/u"])).toBe(
      "is the home folder /home/u of your account (HOME says /tmp/x): a sandbox could write its shell's start-up files, ssh keys and git config",
    );
    expect(lentFolderProblem("/home", "/tmp/x", "/t", ["/home/u"])).toContain(
      "holds the home folder /home/u of your account",
    );
    expect(lentFolderProblem("/home/u/project", "/tmp/x", "/t", ["/home/u"])).toBeUndefined();
    expect(readOnlyFolderProblem("/home/u", "/tmp/x", "/t", ["/home/u"])).toContain(
      "is the home folder /home/u of your account (HOME says /tmp/x): a sandbox could read",
    );
    if (process.getuid?.() === 0) expect(accountHomes()).toContain("/root");
    // gc judges a lent tree without them: what may be handed back must not depend on who runs gc (fix34b).
    expect(lentFolderProblem("/home/u", "/tmp/x", "/t", GC_ACCOUNT_HOMES)).toBeUndefined();
    const saved = process.env.SUDO_USER;
    try {
      process.env.SUDO_USER = "root";
      expect(accountHomes()).toContain("/root");
    } finally {
      if (saved === undefined) delete process.env.SUDO_USER;
      else process.env.SUDO_USER = saved;
    }
  });

  it("refuses sandbox-run's cache (what every runner image is built from) and any folder holding it, where XDG_CACHE_HOME puts it too", () => {
    const saved = process.env.XDG_CACHE_HOME;
    try {
      delete process.env.XDG_CACHE_HOME;
      for (const folder of ["/h/me/.cache", "/h/me/.cache/sandbox-run", "/h/me/.cache/sandbox-run/build/deps-1"])
        expect(lentFolderProblem(folder, "/h/me", "/t")).toContain("sandbox-run's cache (/h/me/.cache/sandbox-run)");
      // Another tool's cache there is a folder of the home's tools (round 3, session 42).
      expect(lentFolderProblem("/h/me/.cache/pip", "/h/me", "/t")).toContain(
        "lies in /h/me/.cache, a folder of your home's tools",
      );
      process.env.XDG_CACHE_HOME = "/srv/cache";
      expect(lentFolderProblem("/srv", "/h/me", "/t")).toContain("sandbox-run's cache (/srv/cache/sandbox-run)");
      expect(lentFolderProblem("/h/me/.cache", "/h/me", "/t")).not.toContain("sandbox-run's cache");
      expect(lentFolderProblem("/srv/other", "/h/me", "/t")).toBeUndefined();
    } finally {
      if (saved === undefined) delete process.env.XDG_CACHE_HOME;
      else process.env.XDG_CACHE_HOME = saved;
    }
  });

  it.each(["/usr/src/app", "/usr/local/src/project", "/h/me/project", "/srv/repo"])(
    "lends %s (a project folder)",
    (folder) => {
      expect(lentFolderProblem(folder, "/h/me", "/t")).toBeUndefined();
    },
  );

  it.each(["/h/me/project", "/t/project", "/srv/work", "/var/tmp/x", "/library", "/usrlocal"])(
    "accepts %s",
    (folder) => {
      expect(lentFolderProblem(folder, "/h/me", "/t")).toBeUndefined();
    },
  );
});

describe("resolveRun: schema, prompt and the rest", () => {
  // The agent hands resolveRun its schema compiler, the dry run loads it; here, the test does.
  beforeAll(loadSchemaCompiler);

  it("compiles an object schema into a host-side validator", () => {
    const run = resolve({ schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } });
    expect(run.validator!.validate({ n: 3 })).toEqual({ ok: true, value: { n: 3 } });
    expect(run.validator!.validate({ n: "3" })).toEqual({ ok: false, issues: ["n: must be integer"] });
  });

  it.each([{ type: "array", items: { type: "string" } }, { type: "string" }, {}])(
    "rejects schema %j: it must be type object",
    (schema) => {
      const error = usageError(() => resolve({ schema }));
      expect(error.code).toBe("usage");
      expect(error.shortMessage).toContain('"type": "object"');
    },
  );

  it.each(["", "   \n\t"])("rejects the empty prompt %j", (prompt) => {
    const error = usageError(() => resolveRun(prompt, {}, { cwd: ws, models: MODELS, model: MODEL }, {}));
    expect(error.code).toBe("usage");
    expect(error.shortMessage).toBe("The prompt is empty.");
  });

  it.each([
    [42, "number"],
    [null, "null"],
    [{ text: "fix it" }, "object"],
  ])("a prompt that is not text (%j, from a JavaScript caller) is refused as such, not as empty", (prompt, kind) => {
    const error = usageError(() => resolveRun(prompt as never, {}, { cwd: ws, models: MODELS, model: MODEL }, {}));
    expect(error.shortMessage).toBe(`The prompt must be a string, not ${kind}.`);
  });

  it("rejects an unknown sandbox mode and a missing policy file", () => {
    expect(usageError(() => resolve({ sandbox: "yolo" as never })).shortMessage).toContain(
      'Unknown sandbox mode "yolo"',
    );
    expect(usageError(() => resolve({ policy: path.join(ws, "nope.json") })).shortMessage).toContain(
      "neither a built-in policy nor an existing file",
    );
  });

  it("rejects reserved extra Pi flags", () => {
    expect(usageError(() => resolve({ extraArgs: ["--tools", "bash"] })).shortMessage).toContain("--tools");
  });

  it("takes the timeout from the policy unless given, and rejects a non-positive one or one past a day", () => {
    expect(resolve({ sandbox: "read-only" }).timeoutMs).toBe(900_000);
    expect(resolve({ timeoutMs: 1234 }).timeoutMs).toBe(1234);
    expect(usageError(() => resolve({ timeoutMs: 0 })).code).toBe("usage");
    expect(resolve({ timeoutMs: 86_400_000 }).timeoutMs).toBe(86_400_000);
    expect(usageError(() => resolve({ timeoutMs: 1e23 })).shortMessage).toBe(
      "Timeout 1e+23 ms is longer than a run may last (86400 s, a day).",
    );
  });

  it("lets runtime and contextFiles override the policy", () => {
    const run = resolve({ runtime: "runsc", contextFiles: true });
    expect(run.policy.runtime).toBe("runsc");
    expect(run.policy.contextFiles).toBe(true);
  });

  it("reads a models file and reports one that is not JSON", () => {
    const file = path.join(dir(), "models.json");
    fs.writeFileSync(file, JSON.stringify(MODELS));
    expect(resolve({ models: file }).modelsJson).toEqual(MODELS);
    fs.writeFileSync(file, "{ nope");
    expect(usageError(() => resolve({ models: file })).shortMessage).toContain("is not valid JSON");
  });
});

describe("resolveRun: hand-back", () => {
  const policyWith = (extra: Record<string, unknown>) => ({ ...loadPolicy("workspace-write"), ...extra });

  it("is apply unless asked (run > constructor > policy); branch and patch force copy mode", () => {
    expect(resolve({}).handBack).toBe("apply");
    expect(resolve({}).workspaceMode).toBeUndefined();
    expect(resolve({ handBack: "branch" })).toMatchObject({ handBack: "branch", workspaceMode: "copy" });
    expect(resolve({}, { handBack: "patch" })).toMatchObject({ handBack: "patch", workspaceMode: "copy" });
    expect(resolve({ policy: policyWith({ handBack: "branch" }) })).toMatchObject({
      handBack: "branch",
      workspaceMode: "copy",
    });
    expect(resolve({ handBack: "apply" }, { handBack: "branch" }).handBack).toBe("apply");
  });

  it("refuses the bind mode (from the option, SANDBOX_RUN_WORKSPACE or the policy file), extra writable directories and unknown modes", () => {
    expect(usageError(() => resolve({ handBack: "branch", workspaceMode: "bind" })).message).toMatch(
      /Hand-back "branch" cannot use the bind workspace mode[\s\S]*Drop --workspace bind/,
    );
    expect(usageError(() => resolve({ handBack: "patch" }, {}, { SANDBOX_RUN_WORKSPACE: "bind" })).code).toBe("usage");
    expect(
      usageError(() => resolve({ policy: policyWith({ handBack: "branch", workspaceMode: "bind" }) })).message,
    ).toMatch(/handBack: "branch" needs copy mode/);
    expect(usageError(() => resolve({ handBack: "branch", additionalWritableDirectories: [dir()] })).message).toMatch(
      /covers the workspace only/,
    );
    expect(usageError(() => resolve({ handBack: "merge" as "apply" })).message).toMatch(
      /Unknown hand-back mode "merge"/,
    );
  });

  it("a read-only workspace brings nothing back: the mode is kept, the workspace mode is left alone", () => {
    expect(resolve({ sandbox: "read-only", handBack: "branch", workspaceMode: "bind" })).toMatchObject({
      handBack: "branch",
      workspaceMode: "bind",
    });
    // Its writable directories' changes would come back to no one: refused as for a writable workspace.
    expect(
      usageError(() =>
        resolve({
          policy: policyWith({ workspace: "read-only", tools: ["read", "bash", "grep", "find", "ls"] }),
          handBack: "patch",
          additionalWritableDirectories: [dir()],
        }),
      ).message,
    ).toMatch(/Hand-back "patch" covers the workspace only, and extra writable directories were given/);
  });
});

describe("resolveRun: a policy secret read from a file", () => {
  const secretPolicy = (file: string, readOnlyMounts: string[] = []) => ({
    ...loadPolicy("workspace-write"),
    network: "allowlist" as const,
    allowedDomains: ["github.com"],
    readOnlyMounts,
    secrets: { GH_TOKEN: { hosts: ["github.com"], inject: ["bearer" as const], from: { file } } },
  });

  it("is refused inside the workspace, a writable directory or a read-only mount, and through a link there", () => {
    const outside = dir();
    fs.writeFileSync(path.join(outside, "token"), "t".repeat(40));
    fs.writeFileSync(path.join(ws, "token"), "t".repeat(40));
    expect(usageError(() => resolve({ policy: secretPolicy(path.join(ws, "token")) })).message).toMatch(
      /secret GH_TOKEN is read from .*token, which lies inside .*, a folder this run mounts in the sandbox/,
    );
    const writable = dir();
    fs.writeFileSync(path.join(writable, "token"), "t".repeat(40));
    expect(
      usageError(() =>
        resolve({ policy: secretPolicy(path.join(writable, "token")), additionalWritableDirectories: [writable] }),
      ).message,
    ).toMatch(/which lies inside/);
    expect(usageError(() => resolve({ policy: secretPolicy(path.join(outside, "token"), [outside]) })).hint).toMatch(
      /Keep the token file outside the workspace/,
    );
    // A link in the workspace to a file outside: the sandbox can swap the link for the next run.
    fs.symlinkSync(path.join(outside, "token"), path.join(ws, "token-link"));
    expect(usageError(() => resolve({ policy: secretPolicy(path.join(ws, "token-link")) })).message).toMatch(
      /which lies inside/,
    );
    // A link outside to a file inside: the sandbox reads the value there.
    fs.symlinkSync(path.join(ws, "token"), path.join(outside, "to-ws"));
    expect(usageError(() => resolve({ policy: secretPolicy(path.join(outside, "to-ws")) })).message).toMatch(
      /which leads inside/,
    );
    // Outside every mounted tree it is read as before.
    expect(resolve({ policy: secretPolicy(path.join(outside, "token")) }).policy.secrets).toHaveProperty("GH_TOKEN");
  });
});

describe("resolveRun: sandbox-run's own installation", () => {
  // The package these tests import: its folder is what a devDependency install puts in node_modules.
  const packageRoot = fs.realpathSync(path.resolve(import.meta.dirname, "../.."));

  it("is refused inside a tree the sandbox may write and the host keeps (the workspace, a writable directory, a tree holding it)", () => {
    const refused = usageError(() => resolve({ cwd: packageRoot }));
    expect(refused.message).toMatch(
      new RegExp(
        `^sandbox-run runs from ${packageRoot}, a folder this run lets the sandbox write: the sandbox could change sandbox-run itself`,
      ),
    );
    expect(refused.hint).toMatch(/Install sandbox-run outside the folders it runs on/);
    // A writable directory inside it: its built-in policies, and a dependency it loads.
    const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const inside = (dir: string) =>
      new RegExp(
        `^sandbox-run runs from ${literal(packageRoot)}, and ${literal(dir)}, a folder this run lets the sandbox write, lies inside ${literal(packageRoot)}, where it loads code from`,
      );
    const policies = path.join(packageRoot, "policies");
    expect(usageError(() => resolve({ additionalWritableDirectories: [policies] })).message).toMatch(inside(policies));
    const zod = path.join(packageRoot, "node_modules", "zod");
    const zodRefusal = usageError(() => resolve({ additionalWritableDirectories: [zod] })).message;
    if (!fs.lstatSync(path.join(packageRoot, "node_modules")).isSymbolicLink()) expect(zodRefusal).toMatch(inside(zod));
    // A checkout whose node_modules links to another one's (a shared or hoisted install): the link
    // out of the tree is refused first.
    else
      expect(zodRefusal).toMatch(
        new RegExp(
          `^The writable directory ${literal(zod)} goes through the symbolic link ${literal(path.join(packageRoot, "node_modules"))}, which points to`,
        ),
      );
  });

  it("is no problem where nothing the sandbox writes comes back: read-only, or a branch", () => {
    expect(resolve({ cwd: packageRoot, sandbox: "read-only" }).cwd).toBe(packageRoot);
    expect(resolve({ cwd: packageRoot, handBack: "branch" }).handBack).toBe("branch");
  });
});

describe("resolveRun: how sandbox-run was started", () => {
  it("is refused when the next start goes through the workspace: a package manager's project there, a preload from it", () => {
    const ws = dir();
    const saved = { ...process.env };
    try {
      Object.assign(process.env, { npm_command: "exec", INIT_CWD: ws, npm_config_local_prefix: ws });
      expect(usageError(() => resolve({ cwd: ws })).message).toMatch(
        /started through a package manager .* in .*, inside .*, a folder this run lets the sandbox write: the package manager takes sandbox-run, node and their options from that project's node_modules\/.bin and .npmrc/,
      );
      // From a folder outside (the monorepo's top, the workspace a package below it): allowed.
      Object.assign(process.env, { INIT_CWD: os.tmpdir(), npm_config_local_prefix: os.tmpdir() });
      expect(resolve({ cwd: ws }).cwd).toBe(ws);
      for (const key of ["npm_command", "INIT_CWD", "npm_config_local_prefix"]) delete process.env[key];
      process.env.NODE_OPTIONS = `--require ${path.join(ws, ".pnp.cjs")}`;
      expect(usageError(() => resolve({ cwd: ws })).message).toMatch(/^Node preloads .*\.pnp\.cjs into sandbox-run/);
    } finally {
      for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
      Object.assign(process.env, saved);
    }
  });
});

describe("launchPaths", () => {
  it("names the script as invoked, the preloads (a package name where Node looks for it) and a package manager's project folders", () => {
    expect(
      launchPaths(
        {
          NODE_OPTIONS: '--require ./x.js --import=file:///a/b.mjs -r dotenv/config --require="./q.js"',
          npm_command: "run",
          INIT_CWD: "/repo",
        },
        ["/usr/bin/node", "/repo/node_modules/.bin/sandbox-run"],
        ["--loader", "/l.mjs"],
        "/w/a",
      ),
    ).toEqual([
      { path: "/repo/node_modules/.bin/sandbox-run", how: "script" },
      { path: "/l.mjs", how: "preload" },
      { path: "/w/a/x.js", how: "preload" },
      { path: "/a/b.mjs", how: "preload" },
      // Found in node_modules of the working directory and above (usually the workspace's).
      { path: "/w/a/node_modules/dotenv", how: "preload" },
      { path: "/w/node_modules/dotenv", how: "preload" },
      { path: "/node_modules/dotenv", how: "preload" },
      // Quotes are no part of the path.
      { path: "/w/a/q.js", how: "preload" },
      { path: "/repo", how: "package-manager" },
    ]);
    expect(
      launchPaths({ INIT_CWD: "/repo" }, ["node", "/usr/lib/node_modules/sandbox-run/dist/cli/main.js"], []),
    ).toEqual([{ path: "/usr/lib/node_modules/sandbox-run/dist/cli/main.js", how: "script" }]);
    // `node -e` and `node -` have no script: argv[1] is an argument.
    expect(launchPaths({}, ["node", "arg"], ["-e", "code"])).toEqual([]);
    expect(launchPaths({}, ["node", "-"], [])).toEqual([]);
  });
});

describe("resolveRun: a workspace whose git directory is outside what the run lends (review, session 28)", () => {
  it("warns that git will not work in the sandbox, and stops once that directory is lent", () => {
    const main = dir();
    fs.writeFileSync(path.join(main, "a.txt"), "a\n");
    const git = (...args: string[]) =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], {
        cwd: main,
        env: { PATH: process.env.PATH, HOME: "/nonexistent", GIT_CONFIG_NOSYSTEM: "1" },
      });
    git("init", "-q", "-b", "main");
    git("add", ".");
    git("commit", "-qm", "init");
    const linked = path.join(dir(), "linked");
    git("worktree", "add", "-q", "-b", "feat", linked);
    expect(resolve({ cwd: linked }).warnings).toEqual([
      expect.stringMatching(/^git inside the sandbox will not find this repository/),
    ]);
    expect(resolve({ cwd: linked, additionalWritableDirectories: [path.join(main, ".git")] }).warnings).toEqual([]);
    // A branch or patch hand-back refuses writable roots: its warning does not send the user there (review, session 33).
    const branch = resolve({ cwd: linked, handBack: "branch" }).warnings;
    expect(branch).toEqual([expect.stringMatching(/^git inside the sandbox will not find this repository/)]);
    expect(branch[0]).not.toContain("--writable");
    expect(branch[0]).toContain("run in the main worktree");
  });
});

describe("resolveRun: a prompt Pi's events cannot carry (review, session 33)", () => {
  it("a prompt over half of limits.maxLineMb is refused before anything starts, saying why; one under it is not", () => {
    const policy = { ...loadPolicy("workspace-write"), name: "small-lines" };
    policy.limits = { ...policy.limits, maxLineMb: 1 };
    const error = usageError(() =>
      resolveRun("x".repeat(600 * 1024), {}, { cwd: ws, models: MODELS, model: MODEL, policy }, {}),
    );
    expect(error.shortMessage).toMatch(/^The prompt is 0\.6 MiB, more than half of limits\.maxLineMb \(1 MiB\)/);
    expect(error.hint).toMatch(/Put the material in a file in the workspace/);
    expect(
      resolveRun("x".repeat(400 * 1024), {}, { cwd: ws, models: MODELS, model: MODEL, policy }, {}).prompt,
    ).toHaveLength(400 * 1024);
  });
});

describe("resolveRun: folders that cannot be used say why (review, session 33)", () => {
  it("an empty cwd or writable directory is refused, not taken for the process's folder", () => {
    expect(usageError(() => resolve({ cwd: "" })).shortMessage).toBe("The cwd is empty.");
    expect(usageError(() => resolve({ additionalWritableDirectories: [" "] })).shortMessage).toMatch(/ is empty\.$/);
  });

  it("only a folder that is not there 'does not exist': a path too long, a name that is not UTF-8, a file on the way", () => {
    const long = path.join(ws, "x".repeat(300));
    expect(usageError(() => resolve({ cwd: long })).shortMessage).toMatch(/path is too long/);
    const file = path.join(dir(), "f");
    fs.writeFileSync(file, "");
    expect(usageError(() => resolve({ cwd: path.join(file, "below") })).shortMessage).toMatch(
      /is a file, not a folder/,
    );
    expect(usageError(() => resolve({ cwd: path.join(ws, "bad\uFFFDname") })).shortMessage).toMatch(/not UTF-8/);
    expect(usageError(() => resolve({ cwd: path.join(ws, "missing") })).shortMessage).toMatch(/does not exist\.$/);
  });

  it("TMPDIR inside the workspace: the hint says to move TMPDIR", () => {
    const project = dir();
    const tmp = path.join(project, ".tmp");
    fs.mkdirSync(tmp);
    privateRunDirsParent(tmp);
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = tmp;
    try {
      const error = usageError(() => resolve({ cwd: project }));
      expect(error.shortMessage).toMatch(/run folders/);
      expect(error.hint).toMatch(/point TMPDIR at a folder outside it/);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
  });
});
