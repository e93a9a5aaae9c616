// A replay source: recorded runs a ContainerPiAgent answers its calls from, instead of a live model
// provider (`new ContainerPiAgent({ replay: replayRecord([...]) })`). The n-th call of the agent
// (or of the run that names the source) takes the n-th record. A call then runs for real (fresh
// sandbox, real Pi, the caller's prompt, schema, policy, image and writable roots) with its model
// requests answered by a replay server from that record, and the run's workspace mounted where the
// recording saw it unless the caller says where. A record is untrusted input: what it says about
// its policy, image and paths is compared with the caller's (compare-record.ts), never obeyed.
import fs from "node:fs";
import path from "node:path";
import { usageError } from "../errors.js";
import { ANTHROPIC_OAUTH_PLACEHOLDER_API_KEY } from "../gateway/provider-routes.js";
import type { RecordVersions } from "../record/record-format.js";
import type { RecordDifference } from "./compare-record.js";
import { type LoadedRecord, loadRecord } from "./load-record.js";
import type { ReplayMode, ReplaySpeed } from "./replay-server.js";

export interface ReplayOptions {
  /** strict (default): the first request that differs from the recording stops the run; lenient: report and go on. */
  mode?: ReplayMode;
  /** fast (default): answers at once; recorded: with the recorded timing. */
  speed?: ReplaySpeed;
  /**
   * Whether the model, system prompt and tool list must match the recording too (default true).
   * Set it to false to replay under another policy on purpose (its tools differ): then only the
   * messages (the prompt, the model's calls and the tool results) are compared.
   */
  compareContext?: boolean;
}

export interface ReplayCall {
  record: LoadedRecord;
  mode: ReplayMode;
  speed: ReplaySpeed;
  /** Undefined: compare the context when this replay's policy gives Pi the same tools as the recorded one. */
  compareContext?: boolean;
  /** How the record differs from what this replay runs under (set when the call is planned). */
  differences?: RecordDifference[];
}

export interface ReplaySource {
  /** The record folders, in the order calls take them. */
  readonly records: readonly string[];
  /** The next call's recording, checked (SHA256SUMS) and loaded; a usage error past the last one. */
  next(): ReplayCall;
  /** Puts the record next() gave last back (its call failed before it was planned, as it did when recorded). */
  rewind?(): void;
}

/**
 * Answers an agent's calls from run records written with --record (or the `record` option): the
 * n-th call takes the n-th folder. One folder that is not itself a record but holds numbered ones
 * (what the agent's `recordTo` writes: 1/, 2/, ...) stands for those, in order. Each record is
 * checked against its SHA256SUMS when its call is planned; a record that does not check out is
 * refused.
 */
export function replayRecord(records: string | readonly string[], options: ReplayOptions = {}): ReplaySource {
  const dirs = typeof records === "string" ? recordsIn(records) : [...records];
  if (dirs.length === 0) throw usageError("replayRecord() needs at least one record folder.");
  const mode = options.mode ?? "strict";
  const speed = options.speed ?? "fast";
  if (mode !== "strict" && mode !== "lenient")
    throw usageError(`Replay mode must be strict or lenient, not "${mode}".`);
  if (speed !== "fast" && speed !== "recorded")
    throw usageError(`Replay speed must be fast or recorded, not "${speed}".`);
  let taken = 0;
  return {
    records: dirs,
    next() {
      const dir = dirs[taken];
      if (dir === undefined) {
        throw usageError(
          `The replay source holds ${dirs.length} record${dirs.length === 1 ? "" : "s"} and this is call ${taken + 1}.`,
          "Record every call the workflow makes, and give replayRecord() one folder per call, in order.",
        );
      }
      const record = loadRecord(dir);
      taken++;
      return { record, mode, speed, compareContext: options.compareContext !== false };
    },
    rewind() {
      if (taken > 0) taken--;
    },
  };
}

/** `dir` itself when it is a record, else the numbered records inside it (1, 2, ...), in order. */
function recordsIn(dir: string): string[] {
  if (fs.existsSync(path.join(dir, "SHA256SUMS"))) return [dir];
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [dir]; // loadRecord says what is wrong with it
  }
  const numbered = names.filter((name) => /^[1-9][0-9]*$/.test(name)).sort((a, b) => Number(a) - Number(b));
  return numbered.length > 0 ? numbered.map((name) => path.join(dir, name)) : [dir];
}

/** The gateway's upstream for a replayed route until the run starts its replay server. */
export const REPLAY_UPSTREAM_PLACEHOLDER = "http://sandbox-run-replay.invalid";
const REPLAY_KEY = "sandbox-run-replay-no-key";
const REPLAY_OAUTH_KEY = "sk-ant-oat01-sandbox-run-replay-no-key";

/**
 * What a replayed call changes in the run's options: the recorded model, routed through a
 * models.json that gives Pi in the sandbox exactly what it got when the run was recorded (same
 * provider entry, the gateway's URL, the same kind of placeholder key), and, unless the caller
 * named one (`callerWorkspacePath`), the place inside the sandbox where the recording saw the
 * workspace (a path in the container, checked like any workspacePath; it names nothing on the host).
 * No credential is involved: the key is a fixed dummy the replay server ignores, and no header,
 * URL or command of the record is used.
 */
export function replayRunOptions(
  record: LoadedRecord,
  callerWorkspacePath?: string,
): {
  model: string;
  models: Record<string, unknown>;
  workspacePath: string;
} {
  const { call } = record;
  const slash = call.model.indexOf("/");
  const providerId = slash > 0 ? call.model.slice(0, slash) : "";
  const providers = call.sandboxModelsJson as { providers: Record<string, unknown> };
  const entry = Object.hasOwn(providers.providers, providerId) ? providers.providers[providerId] : undefined;
  if (!providerId || !entry || typeof entry !== "object") {
    throw usageError(
      `The record ${record.dir} does not describe the provider of its model ${JSON.stringify(call.model)}.`,
      "Record the run again with this version of sandbox-run.",
    );
  }
  const recorded = entry as Record<string, unknown>;
  const { headers: _h, apiKey, baseUrl: _b, models, modelOverrides, ...rest } = recorded;
  const provider: Record<string, unknown> = {
    ...rest,
    baseUrl: REPLAY_UPSTREAM_PLACEHOLDER,
    // Pi shapes Anthropic requests by the kind of key: keep the kind the recording had.
    apiKey: apiKey === ANTHROPIC_OAUTH_PLACEHOLDER_API_KEY ? REPLAY_OAUTH_KEY : REPLAY_KEY,
  };
  // No header of the record is used anywhere: a record is input, and headers are where commands live.
  if (Array.isArray(models)) {
    provider.models = models.map((model) => {
      if (!model || typeof model !== "object") return model;
      const { headers: _mh, baseUrl: _mb, ...modelRest } = model as Record<string, unknown>;
      return modelRest;
    });
  }
  if (modelOverrides && typeof modelOverrides === "object") {
    provider.modelOverrides = Object.fromEntries(
      Object.entries(modelOverrides as Record<string, unknown>).map(([id, override]) => {
        if (!override || typeof override !== "object") return [id, override];
        const { headers: _oh, ...overrideRest } = override as Record<string, unknown>;
        return [id, overrideRest];
      }),
    );
  }
  return {
    model: call.model,
    models: { providers: { [providerId]: provider } },
    workspacePath: callerWorkspacePath ?? call.workspace.sandbox,
  };
}

/** Whether a record was made by other versions than these, and a sentence naming both when so. */
export function versionDrift(recorded: RecordVersions, now: RecordVersions): string | undefined {
  if (recorded.sandboxRun === now.sandboxRun && recorded.pi === now.pi) return undefined;
  return `the record was made by sandbox-run ${recorded.sandboxRun} with Pi ${recorded.pi}; this is sandbox-run ${now.sandboxRun} with Pi ${now.pi}`;
}
