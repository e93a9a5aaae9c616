// The run's timeline is where events and the failure leave a run: once the run's credential values
// are forbidden, no listener, no lastEvents() and no error carries them, in any form the scrubber
// knows (literal, without the header's scheme, JSON-escaped, base64).
import { describe, expect, it } from "vitest";
import { SandboxRunError } from "../../src/errors.js";
import { type RunEvent, RunTimeline } from "../../src/run/run-events.js";
import { modelRequestRefusal } from "../../src/run/run-services.js";
import { CREDENTIAL_REMOVED } from "../../src/util/scrubber.js";

const KEY = "sk-REAL-provider-key-0123456789";
const SECRET = String.raw`Pa"ss\w0<rd>&REAL-0123`;
const forms = [KEY, SECRET, JSON.stringify(SECRET).slice(1, -1), Buffer.from(KEY).toString("base64")];
const leaks = (value: unknown) =>
  forms.filter((form) => JSON.stringify(value).includes(form) || String(value).includes(form));

describe("RunTimeline: forbidden credentials", () => {
  it("are taken out of Pi's and the sandbox's events, for every listener and lastEvents()", () => {
    const seen: RunEvent[] = [];
    const timeline = new RunTimeline("r", [(e) => seen.push(e)]);
    timeline.forbid([`Bearer ${KEY}`, SECRET]);
    const message = `401 {"message":"Incorrect API key provided: ${KEY}","secret":${JSON.stringify(SECRET)},"b64":"${Buffer.from(KEY).toString("base64")}"}`;
    timeline.pi({
      type: "message_end",
      message: { role: "assistant", errorMessage: message, content: [{ text: SECRET }] },
    });
    timeline.sandbox("run.failed", { code: "model-error", message, nested: [{ deep: [KEY] }] });
    expect(seen).toHaveLength(2);
    expect(leaks(seen)).toEqual([]);
    expect(leaks(timeline.lastEvents())).toEqual([]);
    expect(JSON.stringify(seen)).toContain(`Incorrect API key provided: ${CREDENTIAL_REMOVED}`);
    // Events without a credential are passed on as they are.
    const plain = { type: "turn_start", n: 1 };
    timeline.pi(plain);
    expect(seen[2]!.data).toBe(plain);
  });

  it("are taken out of object keys and of JSON nested deeper than the walk goes (review: the sandbox writes the events)", () => {
    const seen: RunEvent[] = [];
    const timeline = new RunTimeline("r", [(e) => seen.push(e)]);
    timeline.forbid([`Bearer ${KEY}`]);
    let deep: unknown = { message: KEY };
    for (let i = 0; i < 70; i++) deep = { next: deep };
    timeline.pi({ type: "message_update", [KEY]: 1, nested: { [`x-${KEY}`]: [KEY] } });
    timeline.pi({ type: "tool_execution_end", deep });
    expect(leaks(seen)).toEqual([]);
    expect(leaks(timeline.lastEvents())).toEqual([]);
    expect(Object.keys(seen[0]!.data as object)).toContain(CREDENTIAL_REMOVED);
  });

  it("a structure too deep to write out is left out, never thrown out of the timeline (whole-change review: 10,000 levels ended the controller)", () => {
    const seen: RunEvent[] = [];
    const timeline = new RunTimeline("r", [(e) => seen.push(e)]);
    timeline.forbid([`Bearer ${KEY}`]);
    let deep: unknown = [KEY];
    for (let i = 0; i < 20_000; i++) deep = [deep];
    expect(() => timeline.pi({ type: "tool_execution_end", deep })).not.toThrow();
    expect(leaks(seen)).toEqual([]);
    expect(JSON.stringify(seen[0]!.data)).toContain("too deep to check for credentials");
  });

  it("are taken out of the error the run ends with: message, hint, stderr tail, last events, the files it left, its cause", () => {
    const timeline = new RunTimeline("r", []);
    timeline.forbid([`Bearer ${KEY}`, SECRET]);
    const cause = new Error(`upstream said ${KEY}`);
    const error = new SandboxRunError("model-error", `The model failed: Incorrect API key provided: ${KEY}`, {
      hint: `check ${SECRET}`,
      stderrTail: `key=${KEY}`,
      lastEvents: [{ data: { message: KEY } }],
      cause,
    });
    // What a failed run says it left: names the sandbox chose (review, session 27).
    error.changedFiles = { created: [`notes-${SECRET}.txt`], modified: [], deleted: [] };
    error.hostRunFiles = [{ path: `${SECRET}/.npmrc`, change: "created", why: "npm reads it" }];
    timeline.scrubError(error);
    expect(
      leaks([
        error.message,
        error.shortMessage,
        error.hint,
        error.stderrTail,
        error.stack,
        error.lastEvents,
        error.changedFiles,
        error.hostRunFiles,
        cause.message,
      ]),
    ).toEqual([]);
    expect(error.shortMessage).toBe(`The model failed: Incorrect API key provided: ${CREDENTIAL_REMOVED}`);
    expect(error.code).toBe("model-error");
  });
});

describe("modelRequestRefusal", () => {
  it("counts refusals of requests Pi may send, told by code and status only; never a route, path or method Pi does not use (whole-change review: a route named as a lure became the model error's words)", () => {
    expect(modelRequestRefusal({ reason: "turn-budget", status: 429 })).toBe("turn-budget, HTTP 429");
    expect(modelRequestRefusal({ reason: "request-policy", status: 403 })).toBe("request-policy, HTTP 403");
    expect(modelRequestRefusal({ reason: "unknown-route", status: 404 })).toBeUndefined();
    expect(modelRequestRefusal({ reason: "not-model-api", status: 404 })).toBeUndefined();
    expect(modelRequestRefusal({ reason: "liveness-method", status: 403 })).toBeUndefined();
    expect(modelRequestRefusal({ status: 200 })).toBeUndefined();
  });
});
