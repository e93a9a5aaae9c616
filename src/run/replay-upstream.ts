// A replayed run's model: the replay server started for the run, its route pointed at it (no
// credential, nothing leaves the host), divergences turned into events and, when they end the
// replay, into the run's trip; and, once the run is over, how it went against the recording.
import type { GatewayRoute } from "../gateway/model-gateway.js";
import { compareOutcome } from "../replay/compare-outcome.js";
import { type Divergence, startReplayServer } from "../replay/replay-server.js";
import type { ReplayCall } from "../replay/replay-source.js";
import type { ReplaySummary } from "../replay/replay-summary.js";
import { versionDrift } from "../replay/replay-source.js";
import type { ChangedFiles } from "../workspace/workspace-snapshot.js";
import type { EventThrottle } from "./event-throttle.js";
import { currentVersions } from "./record-run.js";
import type { RunTimeline } from "./run-events.js";
import type { RunTrip } from "./run-trip.js";

export interface ReplayUpstream {
  /** The run's routes, answered by the replay server. */
  routes: GatewayRoute[];
  /** How the run went against the recording (call once it succeeded). */
  summary(outcome: { result: unknown; changedFiles: ChangedFiles }): ReplaySummary;
  close(): Promise<void>;
}

export async function startReplayUpstream(
  replay: ReplayCall,
  routes: readonly GatewayRoute[],
  run: { piVersion: string; timeline: RunTimeline; trip: RunTrip; driven: EventThrottle },
): Promise<ReplayUpstream> {
  const { record } = replay;
  const now = { ...currentVersions(), pi: run.piVersion };
  const drift = versionDrift(record.versions, now);
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
      run.trip.fire({ code: "replay-divergence", message: divergenceMessage(divergence, record.dir, drift) });
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
    }),
    close: () => server.close(),
  };
}

function divergenceMessage(divergence: Divergence, record: string, drift: string | undefined): string {
  const versions = drift ? ` Note: ${drift}; Pi's request shape may have changed between these versions.` : "";
  return `The replay of ${record} diverged at model request ${divergence.generation}: ${divergence.difference}.${versions}`;
}
