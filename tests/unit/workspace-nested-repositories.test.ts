// Every repository in a tree the sandbox sees, found by what its folders hold: the walk behind the
// refusal of a credential in a nested checkout's git config (run/plan/git-credentials.ts).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { refuseNestedGitCredentials } from "../../src/run/plan/git-credentials.js";
import { findRepositories } from "../../src/workspace/nested-repositories.js";

function tree(files: Record<string, string>): string {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-nested-")));
  for (const [name, text] of Object.entries(files)) {
    // A name ending in "/" is a folder.
    fs.mkdirSync(name.endsWith("/") ? path.join(dir, name) : path.dirname(path.join(dir, name)), { recursive: true });
    if (!name.endsWith("/")) fs.writeFileSync(path.join(dir, name), text);
  }
  return dir;
}

const HEADER = '[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic c2VjcmV0\n';

describe("findRepositories", () => {
  it("finds the top repository, nested checkouts, a .git file's repository, a bare one and what is inside it but its objects; not inside .git, not through links", async () => {
    const root = tree({
      ".git/config": "",
      ".git/modules/sub/config": "",
      "vendor/lib/.git/config": "",
      "pr/deep/er/app/.git/HEAD": "",
      "wt/.git": "gitdir: ../elsewhere\n",
      "mirror.git/HEAD": "ref: refs/heads/main\n",
      "mirror.git/config": "",
      "mirror.git/objects/": "",
      "mirror.git/refs/": "",
      "mirror.git/inner/.git/config": "",
      "outside/x/.git/config": "",
    });
    fs.symlinkSync(path.join(root, "outside"), path.join(root, "link"));
    const found = await findRepositories(root);
    expect(found.cut).toBe(false);
    expect(found.repositories.map((r) => path.relative(root, r.workTree) || ".").sort()).toEqual(
      [".", "mirror.git", "mirror.git/inner", "outside/x", "pr/deep/er/app", "vendor/lib", "wt"].sort(),
    );
    expect(found.repositories.find((r) => r.workTree.endsWith("/wt"))?.gitDir).toBeUndefined();
    expect(found.repositories.find((r) => r.workTree.endsWith("/vendor/lib"))?.gitDir).toBeUndefined();
    expect(found.repositories.find((r) => r.workTree.endsWith("/mirror.git"))?.gitDir).toBe(
      path.join(root, "mirror.git"),
    );
  });

  it("says the walk was cut past its entry or repository budget", async () => {
    const root = tree({ "a/.git/config": "", "b/.git/config": "", "c/d/e": "" });
    expect((await findRepositories(root, { maxEntries: 3 })).cut).toBe(true);
    expect((await findRepositories(root, { maxRepositories: 1 })).cut).toBe(true);
    expect((await findRepositories(root)).cut).toBe(false);
  });
});

describe("refuseNestedGitCredentials", () => {
  it("refuses a token in a nested checkout's config, a linked worktree's, a bare repository's and a nested submodule's, naming the repository and never the value", async () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ "vendor/lib/.git/config": HEADER }, "vendor/lib"],
      [{ "wt/.git": "gitdir: ../meta/wt\n", "meta/wt/config": HEADER }, "wt"],
      [{ "m.git/HEAD": "", "m.git/config": HEADER, "m.git/objects/": "", "m.git/refs/": "" }, "m.git"],
      [{ "pr/.git/config": "", "pr/.git/modules/dep/config": HEADER }, "pr"],
    ];
    for (const [files, repo] of cases) {
      const root = tree({ "README.md": "", ...files });
      const refused = refuseNestedGitCredentials([root]);
      await expect(refused).rejects.toMatchObject({
        code: "usage",
        shortMessage: `The git config of ${path.join(root, repo)} holds a credential the sandbox could read: http.https://github.com/.extraheader.`,
      });
      await expect(refused).rejects.not.toMatchObject({ shortMessage: expect.stringContaining("c2VjcmV0") });
    }
  });

  // Review, session 34 (fix34): four committed files that look bare hid a checkout below them; a
  // bare repository lent as a tree was never scanned; a folder enterable but not listable was passed
  // over; a symlinked HEAD or .git, a linked worktree's config.worktree were not read.
  it("is not hidden by decoys, a bare tree, an unlistable folder, links, or a worktree's own config", async () => {
    const decoy = tree({
      "vendor/HEAD": "",
      "vendor/config": "",
      "vendor/objects/.keep": "",
      "vendor/refs/.keep": "",
      "vendor/lib/.git/config": HEADER,
    });
    await expect(refuseNestedGitCredentials([decoy])).rejects.toMatchObject({
      shortMessage: expect.stringContaining(`The git config of ${path.join(decoy, "vendor/lib")} holds a credential`),
    });
    const bareTree = tree({ HEAD: "ref: refs/heads/main\n", config: HEADER, "objects/": "", "refs/": "" });
    await expect(refuseNestedGitCredentials([bareTree])).rejects.toMatchObject({
      shortMessage: expect.stringContaining(`The git config of ${bareTree} holds a credential`),
    });
    const linked = tree({ "m.git/refs/": "", "m.git/objects/": "", "m.git/config": HEADER, "real-head": "ref: x\n" });
    fs.symlinkSync(path.join(linked, "real-head"), path.join(linked, "m.git/HEAD"));
    await expect(refuseNestedGitCredentials([linked])).rejects.toMatchObject({
      shortMessage: expect.stringContaining(`${path.join(linked, "m.git")} holds a credential`),
    });
    const dotGitLink = tree({ "meta/config": HEADER, "meta/HEAD": "", "app/x": "" });
    fs.symlinkSync("../meta", path.join(dotGitLink, "app/.git"));
    await expect(refuseNestedGitCredentials([dotGitLink])).rejects.toMatchObject({
      shortMessage: expect.stringContaining(`${path.join(dotGitLink, "app")} holds a credential`),
    });
    const worktree = tree({
      ".git/config": "[extensions]\n\tworktreeConfig = true\n",
      ".git/worktrees/wt/config.worktree": HEADER,
    });
    await expect(refuseNestedGitCredentials([worktree])).rejects.toMatchObject({
      shortMessage: expect.stringContaining("holds a credential"),
    });
  });

  it("refuses a folder it may enter but not list, naming it (checked as an unprivileged uid: root lists every folder)", () => {
    // Under /tmp itself: the tests' own temp folder is closed to other uids.
    const folder = fs.realpathSync(fs.mkdtempSync(path.join("/tmp", "sandbox-run-nested-")));
    fs.chmodSync(folder, 0o755);
    const root = path.join(folder, "tree");
    fs.mkdirSync(path.join(root, "vendor/lib/.git"), { recursive: true });
    fs.writeFileSync(path.join(root, "vendor/lib/.git/config"), HEADER);
    fs.mkdirSync(path.join(root, "closed"));
    fs.chmodSync(path.join(root, "vendor"), 0o311);
    // Neither listed nor entered: passed over (a path in it cannot be read by that uid either).
    fs.chmodSync(path.join(root, "closed"), 0o700);
    const script = path.join(folder, "walk.mts");
    fs.writeFileSync(
      script,
      `import { findRepositories } from ${JSON.stringify(path.resolve("src/workspace/nested-repositories.ts"))};\nconsole.log(JSON.stringify(await findRepositories(${JSON.stringify(root)})));\n`,
    );
    try {
      // tsx's cache needs a folder that uid may write.
      const scratch = path.join(folder, "scratch");
      fs.mkdirSync(scratch, { mode: 0o1777 });
      fs.chmodSync(scratch, 0o1777);
      const node = [process.execPath, "--import", "tsx", script];
      const command =
        process.getuid?.() === 0
          ? ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", ...node]
          : node;
      const run = spawnSync(command[0]!, command.slice(1), {
        encoding: "utf8",
        env: { ...process.env, HOME: scratch, TMPDIR: scratch },
      });
      expect(run.status, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout).unlistable).toEqual({ dir: path.join(root, "vendor"), code: "EACCES" });
    } finally {
      fs.chmodSync(path.join(root, "vendor"), 0o755);
      fs.chmodSync(path.join(root, "closed"), 0o755);
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });

  it("lets a tree of clean repositories through", async () => {
    const clean = tree({
      ".git/config": "[core]\n\tbare = false\n",
      "vendor/lib/.git/config": '[remote "origin"]\n\turl = https://github.com/o/r\n',
    });
    await expect(refuseNestedGitCredentials([clean])).resolves.toBeUndefined();
  });

  it("refuses a tree too large to check whole, saying what to lend instead", async () => {
    const big = tree({ "a/b/c": "", "d/e/f": "", "g/h": "" });
    await expect(refuseNestedGitCredentials([big], undefined, { maxEntries: 4 })).rejects.toMatchObject({
      code: "usage",
      shortMessage: expect.stringContaining(`${big} holds more than 4 entries or 10,000 repositories`),
      hint: expect.stringContaining("Lend a smaller tree"),
    });
  });

  it("does not read a nested repository's config that a link leads out of the tree", async () => {
    const outside = tree({ config: HEADER });
    const root = tree({ "vendor/lib/.git/HEAD": "" });
    fs.symlinkSync(path.join(outside, "config"), path.join(root, "vendor/lib/.git/config"));
    await expect(refuseNestedGitCredentials([root])).resolves.toBeUndefined();
  });
});
