// The order vitest starts a step's files in: longest first, from tests/support/file-seconds.json
// (seconds per project and file, measured on the 2-core CI machine). Vitest's own order needs the
// durations of an earlier run on the same machine, which a fresh clone has not got, and falls back to
// the largest file first; but some short files run long (a 57-line file makes a million files), and
// one of them started last ran alone for its ~35 s at the end of a step while three workers were idle.
// Longest first leaves the short files for the end, where they fill the workers. Files not in the
// table (new ones) are guessed from their size. Regenerate the table from a run's log after large
// changes: the order matters, not the exact seconds.
import fs from "node:fs";
import path from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import measured from "./file-seconds.json" with { type: "json" };

const SECONDS: Record<string, number> = measured;
/** A file not in the table: about a second per 400 bytes of test code (what the table's files show). */
const BYTES_PER_SECOND = 400;

export class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const seconds = new Map<TestSpecification, number>();
    for (const file of files) {
      const key = `${file.project.name}:${path.relative(root, file.moduleId)}`;
      seconds.set(file, SECONDS[key] ?? sizeOf(file.moduleId) / BYTES_PER_SECOND);
    }
    return [...files].sort((a, b) => seconds.get(b)! - seconds.get(a)!);
  }
}

function sizeOf(file: string): number {
  try {
    return fs.statSync(file).size;
  } catch {
    return 0;
  }
}
