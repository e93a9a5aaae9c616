// A unix socket in a tree a bind-mode sandbox sees, that the sandbox's uid may connect to, keeps the
// run from starting (review, session 38, N2: a non-root caller's sandbox, running as the caller,
// had the caller's project-local PostgreSQL run a program on the host; run/plan/lent-sockets.ts).
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import type { Engine } from "../../src/engine/engine.js";
import { refuseNestedGitCredentials } from "../../src/run/plan/git-credentials.js";
import { refuseReachableSockets } from "../../src/run/plan/lent-sockets.js";
import { SANDBOX_UID } from "../../src/sandbox-contract.js";
import { findRepositories } from "../../src/workspace/nested-repositories.js";

const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-sockets-")));
const servers: net.Server[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  fs.rmSync(dir, { recursive: true, force: true });
});

const me = { uid: process.getuid?.() ?? 1000, gid: process.getgid?.() ?? 1000 };

/** A tree holding a listening unix socket at `rel`, of mode `mode`. */
async function treeWithSocket(rel: string, mode: number): Promise<{ root: string; socket: string }> {
  const root = fs.mkdtempSync(path.join(dir, "tree-"));
  const socket = path.join(root, rel);
  fs.mkdirSync(path.dirname(socket), { recursive: true });
  const server = net.createServer((c) => c.end());
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  fs.chmodSync(socket, mode);
  return { root, socket };
}

type Mode = "bind" | "copy";
/** The plan's part the check reads: a non-root caller's sandbox is the caller; a root caller's is SANDBOX_UID. */
function planned(
  root: string,
  workspaceMode: Mode,
  caller: "non-root" | "root",
  trees: { writableRoots?: string[] } = {},
) {
  const user = caller === "root" ? `${SANDBOX_UID}:${SANDBOX_UID}` : `${me.uid}:${me.gid}`;
  return {
    plan: { workspaceMode, user, ...(caller === "root" ? { handBackTo: { uid: 0, gid: 0 } } : {}) },
    run: { cwd: root, writableRoots: trees.writableRoots ?? [] },
  };
}

function check(trees: string[], p: ReturnType<typeof planned>): Promise<void> {
  const onWalked = refuseReachableSockets(p);
  return refuseNestedGitCredentials(trees, undefined, onWalked ? { onWalked } : {});
}

describe("findRepositories' sockets", () => {
  it("lists every unix socket in the tree, inside .git folders too when asked (where it finds no repository)", async () => {
    const { root } = await treeWithSocket(".devenv/state/postgres/.s.PGSQL.5432", 0o700);
    fs.mkdirSync(path.join(root, ".git/modules/sub"), { recursive: true });
    fs.writeFileSync(path.join(root, ".git/modules/sub/HEAD"), "");
    const inGit = path.join(root, ".git/fsmonitor--daemon.ipc");
    const server = net.createServer();
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(inGit, resolve));
    const found = await findRepositories(root, { intoGitDirs: true });
    expect(found.sockets.map((s) => path.relative(root, s)).sort()).toEqual(
      [".devenv/state/postgres/.s.PGSQL.5432", ".git/fsmonitor--daemon.ipc"].sort(),
    );
    expect(found.repositories.map((r) => r.workTree)).toEqual([root]);
    // Without the socket check (copy mode) git's folders are not walked, as before.
    const outside = await findRepositories(root);
    expect(outside.sockets.map((s) => path.relative(root, s))).toEqual([".devenv/state/postgres/.s.PGSQL.5432"]);
  });
});

describe("refuseReachableSockets", () => {
  it("refuses a non-root caller's bind mode over its own owner-only socket, naming it relative to the tree and saying what to do", async () => {
    const { root } = await treeWithSocket(".devenv/state/postgres/.s.PGSQL.5432", 0o700);
    const refused = check([root], planned(root, "bind", "non-root"));
    await expect(refused).rejects.toMatchObject({
      code: "usage",
      shortMessage: `The workspace holds a unix socket the sandbox could connect to: .devenv/state/postgres/.s.PGSQL.5432 (mode 0700, owner uid ${me.uid}). In bind mode the sandbox runs as your own uid, so the program serving it takes the sandbox's requests as yours (its peer-uid check passes).`,
      hint: expect.stringContaining("--workspace copy"),
    });
    await expect(refused).rejects.toMatchObject({ hint: expect.stringContaining("stop the program serving it") });
  });

  it("refuses a root caller's bind mode over a socket others may write, not over an owner-only one", async () => {
    const open = await treeWithSocket("run/app.sock", 0o777);
    await expect(check([open.root], planned(open.root, "bind", "root"))).rejects.toMatchObject({
      code: "usage",
      shortMessage: expect.stringContaining(
        `The workspace holds a unix socket the sandbox could connect to: run/app.sock (mode 0777, owner uid ${me.uid}). The sandbox (uid ${SANDBOX_UID}) may write it`,
      ),
    });
    const closed = await treeWithSocket("run/app.sock", 0o700);
    await expect(check([closed.root], planned(closed.root, "bind", "root"))).resolves.toBeUndefined();
  });

  it("names the writable root or read-only mount that holds one", async () => {
    const ws = fs.mkdtempSync(path.join(dir, "ws-"));
    const writable = await treeWithSocket(".overmind.sock", 0o755);
    await expect(
      check([ws, writable.root], planned(ws, "bind", "non-root", { writableRoots: [writable.root] })),
    ).rejects.toMatchObject({
      shortMessage: expect.stringContaining(`The writable root ${writable.root} holds a unix socket`),
    });
    const readOnly = await treeWithSocket("gnupg/S.gpg-agent", 0o700);
    await expect(check([ws, readOnly.root], planned(ws, "bind", "non-root"))).rejects.toMatchObject({
      shortMessage: expect.stringContaining(`The read-only mount ${readOnly.root} holds a unix socket`),
    });
  });

  it("lets copy mode through (no socket is copied), and a socket the sandbox may not write", async () => {
    const { root } = await treeWithSocket("tmux/sock", 0o700);
    expect(refuseReachableSockets(planned(root, "copy", "non-root"))).toBeUndefined();
    await expect(check([root], planned(root, "copy", "non-root"))).resolves.toBeUndefined();
    const readOnly = await treeWithSocket("tmux/sock", 0o500);
    await expect(check([readOnly.root], planned(readOnly.root, "bind", "non-root"))).resolves.toBeUndefined();
  });

  it("keeps a bind-mode run from starting, before any engine is asked; copy mode goes on to the engine", async () => {
    // Others may write it: reachable whoever runs the test (root's sandbox is SANDBOX_UID).
    const { root } = await treeWithSocket(".overmind.sock", 0o777);
    const models = {
      providers: {
        p: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", apiKey: "k", models: [{ id: "m" }] },
      },
    };
    // No engine: a run that got past the check would fail on it, not with this usage error.
    const agent = new ContainerPiAgent({
      engine: { sharesHostFilesystem: true } as Engine,
      models,
      hostEnv: { PATH: "/usr/bin:/bin" },
      reapOrphans: false,
    });
    const bind = agent.runPlanned(agent.plan("go", { model: "p/m", cwd: root, workspaceMode: "bind" }));
    await expect(bind).rejects.toMatchObject({
      code: "usage",
      shortMessage: expect.stringContaining(
        "The workspace holds a unix socket the sandbox could connect to: .overmind.sock",
      ),
    });
    const copy = agent.runPlanned(agent.plan("go", { model: "p/m", cwd: root, workspaceMode: "copy" }));
    await expect(copy).rejects.not.toMatchObject({ shortMessage: expect.stringContaining("unix socket") });
    await agent.close();
  });
});
