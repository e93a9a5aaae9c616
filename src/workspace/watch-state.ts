// What judging a bind-mode run needs besides the files the watch already keeps in its private folder
// (the snapshots and the kept copy): the trees, the rules' settings and what the walk before the run
// learnt. Saved once the watch has started, removed once the run is judged; a controller that dies
// in between leaves it, and a reaper (`sandbox-run gc`) judges the run from it as the controller
// would have (workspace-watch.ts, resume). The folder is the host's own (run-dirs.ts: inside a 0700
// parent, never mounted into a sandbox), so the file is read as ours, but still checked field by
// field: one that is not whole (a controller that died while writing it) or not of this version is
// not judged from (`gc` says so, and runs over every tree stay refused until then).

import { HostDir } from "../util/host-dir.js";
import { readSmallFile } from "../util/read-fd.js";
import { lazily, z } from "../util/zod.js";
import { WATCH_STATE_FILE } from "./watch-state-file.js";

/** Paths and pointers of up to 10,000 git directories per tree, and what their config names: well below this. */
const MAX_STATE_BYTES = 64 * 1024 * 1024;

/** The state's schema, built on first use (zod loads only when a state is read). */
function buildSavedWatch() {
  const absolute = z.string().refine((p) => p.startsWith("/") && !p.includes("\0"), "an absolute path");
  const relative = z.string().refine((p) => !p.startsWith("/") && !p.includes("\0"), "a relative path");

  const savedTree = z.object({
    root: absolute,
    /** The root directory's device and inode ("dev:ino"): a tree replaced since is not judged against this one's snapshot. */
    rootIdentity: z.string(),
    prefix: z.string(),
    protectedPaths: z.array(z.string()),
    allocatedBytes: z.number().int().nonnegative(),
    entries: z.number().int().nonnegative(),
    peakHeldNames: z.number().int().nonnegative(),
    configPaths: z.array(z.tuple([relative, z.string()])),
    /** Folders where the host's command names are guarded: [folder, why, except ("" for none)]. */
    commandFolders: z.array(z.tuple([z.union([relative, z.literal("")]), z.string(), z.string()])).optional(),
    hostCommands: z.array(z.string()).optional(),
    gitDirs: z.array(relative),
    keptGitDirs: z.array(relative),
    objectStores: z.array(z.tuple([z.string(), relative])),
  });

  const savedWatch = z.object({
    version: z.literal(1),
    workspace: absolute,
    workspaceWritable: z.boolean(),
    writableRoots: z.array(absolute),
    protectedPaths: z.array(z.string()),
    disabledProtections: z.array(z.string()),
    maxEntries: z.number().int().positive().optional(),
    firstPassMs: z.number().nonnegative(),
    trees: z.array(savedTree),
    /** The caller's own facts about the run (the engine it ran on), kept beside the watch's. */
    about: z.record(z.string(), z.string()),
  });
  return savedWatch;
}
const savedWatchSchema = lazily(buildSavedWatch);

export type SavedWatch = z.infer<ReturnType<typeof buildSavedWatch>>;

/** Writes the state into the folder (a new file through the folder's fd, never through a link). */
export function writeWatchState(stateDir: string, state: SavedWatch): void {
  HostDir.writeNewIn(stateDir, WATCH_STATE_FILE, `${JSON.stringify(state)}\n`, 0o600);
}

/** The state in `file` (the state file, or the name a reaper moved it to), or undefined when there is none or it is not whole. */
export function readWatchState(file: string): SavedWatch | undefined {
  return parseWatchState(readSmallFile(file, MAX_STATE_BYTES));
}

function parseWatchState(bytes: Buffer | null | undefined): SavedWatch | undefined {
  if (!bytes) return undefined;
  try {
    const parsed = savedWatchSchema().safeParse(JSON.parse(bytes.toString("utf8")));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
