// A replayed run's model: the record checked against what the replay runs under (the caller's
// policy, image, workspace and roots; a record that asks for more is refused before anything
// starts), the replay server started for the run, its route pointed at it (no credential, nothing
// leaves the host), divergences turned into events and, when they end the replay, into the run's
// trip; and, once the run is over, how it went against the recording.
import { usageError } from "../errors.js";
import type { GatewayRoute } from "../gateway/model-gateway.js";
import { compareOutcome } from "../replay/compare-outcome.js";
import {
  compareRecord,
  describeDifference,
  type RecordDifference,
  sameModelContext,
} from "../replay/compare-record.js";
import { type Divergence, startReplayServer } from "../replay/replay-server.js";
import type { ReplayCall } from "../replay/replay-source.js";
import { versionDrift } from "../replay/replay-source.js";
import type { ReplaySummary } from "../replay/replay-summary.js";
import type { ChangedFiles } from "../workspace/workspace-snapshot.js";
import { currentVersions } from "./current-versions.js";
import type { EventThrottle } from "./event-throttle.js";
import type { PlannedRun } from "./plan/prepare-plan.js";
import type { RunTimeline } from "./run-events.js";
import type { RunTrip } from "./run-trip.js";

export interface ReplayUpstream {
  /** The run's routes, answered by the replay server. */
  routes: GatewayRoute[];
  /** How the run went against the recording (call once it succeeded). */
  summary(outcome: { result: unknown; changedFiles: ChangedFiles }): ReplaySummary;
  close(): Promise<void>;
}

/**
 * The planned replay checked against its record: a usage error naming the differences when the
 * recorded run had more than this one gets across the boundary; otherwise the call with every
 * difference listed and whether to compare the model's context (same tools and context files).
 */
export function checkReplayedRecord(planned: PlannedRun, replay: ReplayCall): ReplayCall {
  const { record } = replay;
  const { run, plan } = planned;
  const differences = compareRecord(
    {
      policy: record.policy,
      image: record.call.image,
      workspace: record.call.workspace,
      writableRoots: record.call.writableRoots,
      extraArgs: record.call.extraArgs,
    },
    {
      policy: run.policy,
      image: plan.image,
      workspace: { host: run.cwd, sandbox: plan.workingDir },
      writableRoots: run.writableRoots,
      extraArgs: run.extraArgs,
    },
  );
  const more = differences.filter((d) => d.needsMore);
  if (more.length > 0) {
    throw usageError(
      `The record ${record.dir} asks for more than this replay's policy (${run.policy.name}) gives, so it is not replayed: ${more.map(describeDifference).join("; ")}.`,
      "A record is never configuration: the replay runs under your policy, image and folders (--policy, --image, --cwd, --writable, or the defaults). If you trust what the recorded run needed, replay under a policy of your own that grants it; otherwise record the run again.",
    );
  }
  return {
    ...replay,
    compareContext: replay.compareContext ?? sameModelContext(record.policy, run.policy),
    differences,
  };
}

export async function startReplayUpstream(
  replay: ReplayCall,
  routes: readonly GatewayRoute[],
  run: { piVersion: string; timeline: RunTimeline; trip: RunTrip; driven: EventThrottle },
): Promise<ReplayUpstream> {
  const { record } = replay;
  const now = { ...currentVersions(), pi: run.piVersion };
  const drift = versionDrift(record.versions, now);
  const differences = replay.differences ?? [];
  if (differences.length > 0) {
    run.timeline.sandbox("replay.record-differs", {
      record: record.dir,
      differences: differences.map(({ field, recorded, now }) => ({ field, recorded, now })),
    });
  }
  const elsewhere = [workspaceDifference(differences), platformDifference(differences)].filter(Boolean).join(" ");
  const server = await startReplayServer({
    exchanges: record.exchanges,
    api: routes[0]?.api ?? "",
    mode: replay.mode,
    speed: replay.speed,
    compareContext: replay.compareContext,
    onContextDifference: (difference) =>
      run.timeline.sandbox("replay.context-differs", { difference, record: record.dir }),
    onDivergence: (divergence) => {
      const data = { ...divergence, mode: replay.mode, record: record.dir };
      // Lenient ones can come once per request the sandbox makes: throttled like other sandbox-driven events.
      if (!divergence.fatal) return run.driven.offer("replay.divergence", { type: "replay.divergence", data });
      run.timeline.sandbox("replay.divergence", data);
      run.trip.fire({
        code: "replay-divergence",
        message: divergenceMessage(divergence, record.dir, drift, elsewhere),
      });
    },
  });
  return {
    routes: routes.map((route) => ({ ...route, upstreamBaseUrl: server.baseUrl, headers: {} })),
    summary: ({ result, changedFiles }) => ({
      record: record.dir,
      mode: replay.mode,
      ...server.report(),
      outcome: compareOutcome(record.outcome, { ok: true, result, changedFiles }),
      versions: { recorded: record.versions, now },
      recordDifferences: differences.map(({ field, recorded, now }) => ({ field, recorded, now })),
    }),
    close: () => server.close(),
  };
}

function divergenceMessage(
  divergence: Divergence,
  record: string,
  drift: string | undefined,
  elsewhere: string | undefined,
): string {
  const versions = drift ? ` Note: ${drift}; Pi's request shape may have changed between these versions.` : "";
  // A replay from another folder first of all: that explains a listing or a file that differs.
  const workspace = elsewhere ? `${elsewhere} ` : "";
  return `${workspace}The replay of ${record} diverged at model request ${divergence.generation}: ${divergence.difference}.${versions}`;
}

/** "This replay's workspace is not the recorded one (recorded /a, now /b)." when the folder or its path inside differs. */
function workspaceDifference(differences: readonly RecordDifference[]): string | undefined {
  const shown = differences
    .filter((d) => d.field === "workspace" || d.field === "workspacePath")
    .map(
      (d) => `${d.field === "workspace" ? "folder" : "path inside the sandbox"}: recorded ${d.recorded}, now ${d.now}`,
    );
  return shown.length > 0 ? `This replay's workspace is not the recorded one (${shown.join("; ")}).` : undefined;
}

/**
 * The platform, when the record names another (a replay runs on the caller's: a record is never
 * obeyed): `uname -m` alone diverges then (review, session 33: an arm64 record replayed on amd64).
 */
export function platformDifference(differences: readonly RecordDifference[]): string | undefined {
  const d = differences.find((difference) => difference.field === "policy.platform");
  if (!d) return undefined;
  const now = d.now === "(none)" ? "the engine's own" : d.now;
  const how = d.recorded === "(none)" ? "leave --platform out" : `replay with --platform ${d.recorded}`;
  return `The record ran on platform ${d.recorded === "(none)" ? "the engine's own" : d.recorded}, this replay on ${now} (${how} to run as it did).`;
}
