// The host's own programs are never found in a tree the sandbox writes (docs/security.md F9; review,
// session 26). The caller's PATH holds the workspace's `node_modules/.bin` (what `npm run` puts
// first), its `bin/` and a relative entry (the working directory is the workspace); the repository
// ships `git` and `diff` in all of them, which write a marker on the host when run. The host runs
// git during the run's checks (a commit the sandbox made) and for the record's patch after the
// apply: it must use the real git, in bind and in copy mode, and the record still holds the patch.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { isSandboxRunError } from "../../src/errors.js";
import { modelsFor } from "../support/harness.js";
import {
  bash,
  DONE_SCHEMA,
  finish,
  hostilePolicy,
  hostileWorkspace,
  useHostileModelServer,
} from "../support/hostile-model.js";

const server = useHostileModelServer();
const markers = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-host-programs-"));
afterAll(() => fs.rmSync(markers, { recursive: true, force: true }));

function gitRepo(): string {
  const ws = hostileWorkspace({ "README.md": "readme\n", "package.json": '{"name":"x"}\n' });
  const git = (...args: string[]) =>
    spawnSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], {
      cwd: ws,
      env: { PATH: "/usr/bin:/bin", HOME: ws, GIT_CONFIG_NOSYSTEM: "1" },
    });
  git("init", "-q");
  git("add", ".");
  git("commit", "-qm", "init");
  return ws;
}

/** A program that leaves a line in `marker` (a host folder the sandbox never sees) and exits 1. */
function planted(marker: string): string {
  return `#!/bin/sh\necho "ran on the host: $0 $*" >> ${marker}\nexit 1\n`;
}

describe("host programs and the caller's PATH", () => {
  for (const mode of ["bind", "copy"] as const)
    it(`${mode} mode: git and diff planted in PATH folders of the workspace never run on the host (checks, record)`, async () => {
      const ws = gitRepo();
      const marker = path.join(markers, `${mode}.txt`);
      // The repository's own (hostile, like everything in it): a host command's name the sandbox
      // wrote into a folder of the caller's PATH is refused and removed (docs/security.md W2c), so
      // the programs are there before the run, as a repository ships them.
      for (const file of ["node_modules/.bin", "bin", "tools"].flatMap((dir) =>
        ["git", "diff"].map((n) => `${dir}/${n}`),
      )) {
        fs.mkdirSync(path.join(ws, path.dirname(file)), { recursive: true });
        fs.writeFileSync(path.join(ws, file), planted(marker), { mode: 0o755 });
      }
      const record = path.join(markers, `record-${mode}`);
      const modelId = `host-programs-${mode}-${Date.now()}`;
      server.setScript(modelId, [
        bash("echo change >> README.md && git -c user.name=m -c user.email=m@m commit -qam work && echo committed"),
        finish(),
      ]);
      const savedPath = process.env.PATH;
      const savedCwd = process.cwd();
      // What `npm run` and direnv give the caller's shell, and a relative entry read from the workspace.
      process.env.PATH = `${ws}/node_modules/.bin:${ws}/bin:tools:${savedPath}`;
      process.chdir(ws);
      const agent = new ContainerPiAgent({
        models: modelsFor(server, [modelId]),
        reapOrphans: false,
        warm: { calls: 1 },
      });
      try {
        const details = await agent.runDetailed("Do the task.", {
          model: `scripted/${modelId}`,
          cwd: ws,
          policy: hostilePolicy(),
          schema: DONE_SCHEMA,
          record,
          workspaceMode: mode,
        });
        expect(details.result).toEqual({ done: true });
      } finally {
        process.env.PATH = savedPath;
        process.chdir(savedCwd);
        await agent.close();
      }
      expect(fs.existsSync(marker) ? fs.readFileSync(marker, "utf8") : "").toBe("");
      // The run's work came back (this is no refusal), and the real git wrote the record's patch.
      expect(fs.existsSync(path.join(ws, "node_modules/.bin/git"))).toBe(true);
      expect(fs.readFileSync(path.join(record, "changes.patch"), "utf8")).toMatch(/^\+change$/m);
    });
});

// Round 3, session 42 (docs/security.md W2c): what the caller's own next command finds first.
describe("a host command's name the sandbox writes into a folder of the caller's PATH", () => {
  for (const mode of ["bind", "copy"] as const)
    it(`${mode} mode: is refused and removed (a CI step's $GITHUB_PATH entry, made by the run)`, async () => {
      const ws = gitRepo();
      const modelId = `caller-path-${mode}-${Date.now()}`;
      server.setScript(modelId, [
        bash(
          "mkdir -p ci-bin && printf '#!/bin/sh\\necho pwned\\n' > ci-bin/git && chmod 755 ci-bin/git && echo made > ci-bin/notes.txt",
        ),
        finish(),
      ]);
      const savedPath = process.env.PATH;
      process.env.PATH = `${ws}/ci-bin:${savedPath}`;
      const agent = new ContainerPiAgent({
        models: modelsFor(server, [modelId]),
        reapOrphans: false,
        warm: { calls: 1 },
      });
      let refused: unknown;
      try {
        refused = await agent
          .runDetailed("Do the task.", {
            model: `scripted/${modelId}`,
            cwd: ws,
            policy: hostilePolicy(),
            schema: DONE_SCHEMA,
            workspaceMode: mode,
          })
          .then(
            () => undefined,
            (error: unknown) => error,
          );
      } finally {
        process.env.PATH = savedPath;
        await agent.close();
      }
      expect(isSandboxRunError(refused) && refused.code, String(refused)).toBe("policy-violation");
      expect((refused as Error).message).toContain(
        `ci-bin/git (created, git-config-paths: the caller's PATH entry ${ws}/ci-bin (a host command's name) in the caller's environment)`,
      );
      expect(fs.existsSync(path.join(ws, "ci-bin/git"))).toBe(false);
    });
});
