// Whether a replayed run ended as the recorded one did: the same result (deep-equal) and the same
// changed files, or the same error code. Pure; the words are for the CLI's output and reports.
import { isDeepStrictEqual } from "node:util";
import type { ChangedFiles } from "../workspace/workspace-snapshot.js";
import type { RecordedOutcome } from "./load-record.js";

type ReplayedOutcome = { ok: true; result: unknown; changedFiles: ChangedFiles } | { ok: false; code: string };

export interface OutcomeComparison {
  /** The replay ended as the recording did. */
  matches: boolean;
  /** What differs, one line each (empty when it matches). */
  differences: string[];
}

export function compareOutcome(recorded: RecordedOutcome, now: ReplayedOutcome): OutcomeComparison {
  const differences: string[] = [];
  if (recorded.ok && now.ok) {
    if (!isDeepStrictEqual(recorded.result, now.result)) {
      differences.push(`result differs: recorded ${excerpt(recorded.result)}, now ${excerpt(now.result)}`);
    }
    if (recorded.changedFiles) {
      for (const kind of ["created", "modified", "deleted"] as const) {
        const before = [...recorded.changedFiles[kind]].sort();
        const after = [...now.changedFiles[kind]].sort();
        if (!isDeepStrictEqual(before, after)) {
          differences.push(`${kind} files differ: recorded ${excerpt(before)}, now ${excerpt(after)}`);
        }
      }
    }
  } else if (recorded.ok) {
    differences.push(`the recorded run succeeded; this one failed (${(now as { code: string }).code})`);
  } else if (now.ok) {
    differences.push(`the recorded run failed (${recorded.error.code}); this one succeeded`);
  } else if (recorded.error.code !== now.code) {
    differences.push(`the recorded run failed with ${recorded.error.code}; this one with ${now.code}`);
  }
  return { matches: differences.length === 0, differences };
}

function excerpt(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 120 ? `${text.slice(0, 119)}…` : text;
}
