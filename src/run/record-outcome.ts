// A finished call as its run record and the CLI's envelope show it: a success with the hand-back
// summarised (a patch's text goes into its file and the record's changes.patch, not into JSON),
// and the note that says a record was refused at its target. Pure and light (types only): the
// public operations face (operations.ts) hands these on without loading anything.
import type { RecordFinish } from "../record/run-recorder.js";
import type { RunDetails } from "./execute-run.js";

/** How the note that says a record was refused at its target (and kept elsewhere) begins. */
export const RECORD_REFUSED_NOTE = "not written to ";

/**
 * A successful run as its record keeps it. A patch hand-back's text is the record's changes.patch
 * (the workspace itself did not change), not a field of meta.json.
 */
export function recordedSuccess(details: RunDetails, patchFile?: string): RecordFinish {
  const handBack = handBackSummary(details, patchFile);
  const patch = details.handBack?.mode === "patch" ? details.handBack : undefined;
  return {
    ok: true,
    result: details.result,
    meta: { ...details, result: undefined, ...(handBack ? { handBack } : {}) },
    ...(patch ? { changes: { patch: patch.patch, notes: patch.notes } } : {}),
  };
}

/** The hand-back as an envelope or a record shows it: a patch's text stays in its file. */
export function handBackSummary(details: RunDetails, patchFile?: string): Record<string, unknown> | undefined {
  const handBack = details.handBack;
  if (!handBack) return undefined;
  if (handBack.mode === "branch") return { ...handBack };
  const { patch: _text, ...rest } = handBack;
  return { ...rest, patchFile: patchFile ?? null };
}
