// Records the workflow's two calls into recordings/1 and recordings/2 (the fixtures its test replays).
//
//   node --import tsx examples/workflow/record.ts                         # against the scripted model below
//   node --import tsx examples/workflow/record.ts anthropic/claude-sonnet-4-5   # against a live model
//
// With a live model, run it once with the provider's key set, review the recordings, commit them.
// This repository has no key, so its recordings were made against a scripted model that answers
// the way a good model would; the replay does not care who answered.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { bindAgent, ContainerPiAgent } from "sandbox-run";
import { scriptedModel } from "sandbox-run/testing";
import { demoRepo, SANDBOX_REPO_PATH, triageAndFix } from "./triage-and-fix.js";

const recordings = path.join(path.dirname(fileURLToPath(import.meta.url)), "recordings");
const liveModel = process.argv[2];

// One script serves both calls: the first conversation ends with the final tool, the second with text.
const scripted = liveModel
  ? undefined
  : await scriptedModel((turn, conversation) => {
      const triage = conversation.tools.some((tool) => tool.name === "sandbox_run_final_result");
      if (triage) {
        if (turn === 0)
          return { toolCalls: [{ name: "bash", arguments: { command: "cat test.sh calc.sh; sh test.sh" } }] };
        return {
          final: { test: "add", file: "calc.sh", cause: "add() subtracts its arguments instead of adding them" },
        };
      }
      if (turn === 0)
        return {
          toolCalls: [
            { name: "edit", arguments: { path: "calc.sh", edits: [{ oldText: "$1 - $2", newText: "$1 + $2" }] } },
          ],
        };
      if (turn === 1) return { toolCalls: [{ name: "bash", arguments: { command: "sh test.sh" } }] };
      return { text: "Fixed calc.sh: add() now adds. `sh test.sh` prints `ok 1 add`." };
    });

fs.rmSync(recordings, { recursive: true, force: true });
const agent = new ContainerPiAgent({
  ...(scripted ? scripted.options : { model: liveModel }),
  recordTo: recordings,
  workspacePath: SANDBOX_REPO_PATH,
});
try {
  const outcome = await triageAndFix(bindAgent(agent), demoRepo());
  console.log(JSON.stringify(outcome, null, 2));
} finally {
  await scripted?.close();
}
