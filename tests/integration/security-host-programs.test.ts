// The host's own programs are never found in a tree the sandbox writes (docs/security.md F9; review,
// session 26). The caller's PATH holds the workspace's `node_modules/.bin` (what `npm run` puts
// first), its `bin/` and a relative entry (the working directory is the workspace); the sandbox
// plants `git` and `diff` in all of them, which write a marker on the host when run. The host runs
// git during the run's checks (a commit the sandbox made) and for the record's patch after the
// apply: it must use the real git, in bind and in copy mode, and the record still holds the patch.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
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
      const script = Buffer.from(planted(marker)).toString("base64");
      const plant = ["node_modules/.bin", "bin", "tools"]
        .flatMap((dir) => ["git", "diff"].map((name) => `${dir}/${name}`))
        .map((file) => `mkdir -p ${path.dirname(file)} && echo ${script} | base64 -d > ${file} && chmod 755 ${file}`)
        .join(" && ");
      const record = path.join(markers, `record-${mode}`);
      const modelId = `host-programs-${mode}-${Date.now()}`;
      server.setScript(modelId, [
        bash(
          `${plant} && echo change >> README.md && git -c user.name=m -c user.email=m@m commit -qam work && echo planted`,
        ),
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
      // The sandbox's files came back (this is no refusal), and the real git wrote the record's patch.
      expect(fs.existsSync(path.join(ws, "node_modules/.bin/git"))).toBe(true);
      expect(fs.readFileSync(path.join(record, "changes.patch"), "utf8")).toMatch(/^\+change$/m);
    });
});
