// An option given as undefined is an option not given (the types say so since session 27): a call's
// `configFiles: { engines: undefined }` must not hide the agent's engines file from the check that
// refuses one inside the workspace (review, session 27: the spread let it through).
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { tempTrees } from "../support/temp-trees.js";

const { dir } = tempTrees("sandbox-run-undefined-options-");

describe("options given as undefined", () => {
  it("a call's configFiles.engines: undefined keeps the agent's engines file under the workspace-config check", async () => {
    const ws = fs.realpathSync(dir("ws-"));
    const enginesFile = path.join(ws, "engines.json");
    fs.writeFileSync(
      enginesFile,
      JSON.stringify({ engines: [{ name: "e", host: "unix:///nonexistent.sock", capacity: 1 }] }),
    );
    const hostEnv = { PATH: process.env.PATH ?? "", OPENAI_API_KEY: "sk-test-0123456789abcdef0123" };
    const agent = new ContainerPiAgent({
      cwd: ws,
      model: "openai/gpt-4o",
      hostEnv,
      reapOrphans: false,
      engines: enginesFile,
      refuseWorkspaceConfig: true,
    });
    try {
      expect(() => agent.plan("hello", {})).toThrow(/engines/);
      expect(() =>
        agent.plan("hello", { configFiles: { engines: undefined }, sandbox: undefined, cwd: undefined }),
      ).toThrow(/engines/);
    } finally {
      await agent.close();
    }
  });
});
