// How a replayed run went against its recording: what RunDetails.replay and the CLI report.
import type { RecordVersions } from "../record/record-format.js";
import type { OutcomeComparison } from "./compare-outcome.js";
import type { ReplayMode, ReplayReport } from "./replay-server.js";

export interface ReplaySummary extends ReplayReport {
  /** The record folder. */
  record: string;
  mode: ReplayMode;
  /** Whether the run ended as the recorded one did (result and changed files). */
  outcome: OutcomeComparison;
  versions: { recorded: RecordVersions; now: RecordVersions };
  /** How the record's policy, image, workspace and roots differ from what the replay ran under (reported, never applied). */
  recordDifferences: Array<{ field: string; recorded: string; now: string }>;
}
