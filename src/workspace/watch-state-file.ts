// The name of a watch's saved state in its folder (watch-state.ts), alone in a module of its own:
// the run-folder reaper needs the name, not the parser (and the CLI's planning loads the reaper's module).
export const WATCH_STATE_FILE = "watch.json";
