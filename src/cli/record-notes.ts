// What a run's record notes say on stderr: where a refused record went instead, or what it lacks.
// One wording for a single run and a batch's tasks.
import { RECORD_REFUSED_NOTE } from "../operations.js";
import { terminalLine } from "./terminal-text.js";

/** The line (without "sandbox-run: " and the newline) that tells a person about one record note. */
export function recordNoteLine(note: string): string {
  return note.startsWith(RECORD_REFUSED_NOTE)
    ? `the run record was ${terminalLine(note)}`
    : `the run record is incomplete: ${terminalLine(note)}`;
}
