// The name of a watch's saved state in its folder (watch-state.ts), alone in a module of its own:
// the run-folder reaper needs the name, not the parser (and the CLI's planning loads the reaper's module).
export const WATCH_STATE_FILE = "watch.json";
/** A reaper's claim of the state while it judges the run: `<prefix><its pid>` (run/judge-dead-run.ts). */
export const WATCH_STATE_CLAIM_PREFIX = `${WATCH_STATE_FILE}.judging-`;
/**
 * Beside a state whose judgement threw (workspace-watch.ts finish()): the run waits for `gc` even
 * while its controller lives on (a library in a long-running process), and runs over its trees are
 * refused until then.
 */
export const WATCH_STATE_FAILED = "watch.failed";
/**
 * The folder beside a watch's state folder (in the run's folder) where packs this host could not
 * check are set aside (restore-tree.ts). Not one of the names a run folder's cleanup removes
 * (run/run-dirs.ts), so it outlives the run; `gc` lists it until the user has put the packs back
 * or removed it.
 */
export const UNCHECKED_PACKS_DIR = "unchecked-packs";
/**
 * What a judgement found, written into the state folder before it starts putting things back: a
 * controller killed mid-restore leaves a tree that a later judgement (gc) finds partly clean, and
 * this says what the run had done (review, session 35: gc said "nothing it was not allowed to
 * change" of a run that had planted an .envrc). Removed with the state folder.
 */
export const WATCH_FOUND_FILE = "found.json";
