// Steps of action.yml and of the example workflows that print text the sandbox or the model wrote
// (and the push step's credentials),
// run with bash as a runner would: the runner ends a line at \r as well as \n and reads a line that
// starts with "::" as a workflow command (an annotation, ::add-mask::), so such text must never
// start a line of its own.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { action, runStep, type Step } from "../support/github-action.js";

/** The lines the runner reads from `output`, split where it splits them. */
const runnerLines = (output: string) => output.split(/\r\n|\r|\n/).filter((line) => line !== "");

const HOSTILE =
  "overloaded\r::notice title=review::PASSED\n::error file=src/a.ts,line=1::merge this\r\n::add-mask::failed";

describe("workflow steps that print hostile text", () => {
  it("the action's last step: a failed run's message (the model's words) becomes one ::error:: line, its breaks escaped", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-action-steps-"));
    const envelope = path.join(dir, "envelope.json");
    fs.writeFileSync(
      envelope,
      JSON.stringify({ ok: false, error: { code: "model-error", message: `100% ${HOSTILE}` } }),
    );
    const { code, output } = await runStep(action.runs.steps, "Fail when the run failed", {
      CODE: "1",
      FAIL: "true",
      ENVELOPE: envelope,
    });
    expect(code).toBe(1);
    const lines = runnerLines(output);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toBe(
      "::error::sandbox-run failed (exit 1): model-error: 100%25 overloaded%0D::notice title=review::PASSED%0A::error file=src/a.ts,line=1::merge this%0D%0A::add-mask::failed",
    );
    fs.rmSync(dir, { recursive: true });
  });

  it("the review example's verdict step: the model's words are the data of one ::notice:: line (no ::, ##[ or escape of theirs acts)", async () => {
    const workflow = parse(
      fs.readFileSync(path.join(import.meta.dirname, "../../examples/github-actions/sandbox-review.yml"), "utf8"),
    ) as { jobs: Record<string, { steps: Step[] }> };
    const steps = Object.values(workflow.jobs).flatMap((job) => job.steps);
    const { code, output } = await runStep(steps, "Show the verdict", {
      REVIEW: JSON.stringify({
        verdict: "request-changes ##[add-mask]x",
        summary: `100% ${HOSTILE} ##[stop-commands]tok \u001b]8;;https://e.example\u0007link\u001b[2J`,
      }),
    });
    expect(code).toBe(0);
    expect(runnerLines(output)).toEqual([
      "::notice title=sandbox-review::request-changes ##[add-mask]x: 100%25 overloaded%0D::notice title=review::PASSED%0A::error file=src/a.ts,line=1::merge this%0D%0A::add-mask::failed ##[stop-commands]tok ]8;;https://e.example" +
        "link[2J",
    ]);
  });

  it("push: the branch goes out with push-token as the one Authorization header, also when git has another from elsewhere", async () => {
    const seen: string[][] = [];
    const server = http.createServer((req, res) => {
      const raw = req.rawHeaders;
      // Every Authorization header as sent (Node's req.headers would keep only the first).
      seen.push(raw.flatMap((name, i) => (i % 2 === 0 && name.toLowerCase() === "authorization" ? [raw[i + 1]!] : [])));
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const repo = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-action-push-"));
    const git = (...args: string[]) => execFileSync("git", ["-C", repo, ...args], { encoding: "utf8" });
    git("init", "-q", "-b", "main");
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "x");
    git("branch", "sandbox-run/abc");
    git("remote", "add", "origin", `${url}/o/r.git`);
    // What actions/checkout keeps (v4 in .git/config, v6 in an included file): git sends it too.
    git("config", `http.${url}/.extraheader`, "AUTHORIZATION: basic Y2hlY2tvdXQtdG9rZW4=");
    const { output } = await runStep(action.runs.steps, "Report (or push) the branch with the agent's changes", {
      BRANCH: "sandbox-run/abc",
      COMMIT: "c",
      PUSH: "true",
      PUSH_TOKEN: "push-token-value",
      SERVER_URL: url,
      REMOTE: "origin",
      IN_WORKDIR: repo,
      HOME: repo,
    });
    server.close();
    fs.rmSync(repo, { recursive: true });
    expect(seen.length, output).toBeGreaterThan(0);
    const expected = `basic ${Buffer.from("x-access-token:push-token-value").toString("base64")}`;
    for (const headers of seen) expect(headers).toEqual([expected]);
  });
});
