// The name of a run folder's list of its staging directories (staging-dir.ts), alone in a module of
// its own: the run-folder code (run/run-dirs.ts) needs the name, not the staging code (and the CLI's
// planning loads run-dirs.ts: with staging-dir.ts came the tree removal and fd walks, ~20 KB).
/** The file in a run folder that lists the run's staging directories, for the reaper. */
export const STAGING_RECORD = "staging.json";
