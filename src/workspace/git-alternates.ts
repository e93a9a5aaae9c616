// An object store's `info/alternates`: the other stores git borrows objects from, and whose own
// `info/alternates` it reads in turn (five deep). A store named there may lie in a lent tree where
// nothing judges it as a git directory (`git clone --reference ./store`): the sandbox could make
// its `info/alternates` a link to a host file or a FIFO, and the host's git, or the user's, would
// read it (its lines quoted in git's errors) or hang (review, session 37). So the chain is read
// here, never by git: through fds, only regular files, and the host's git is given stores whose
// `info/` it cannot reach (git-object-reader.ts); and the stores the chain names before the run
// have their alternates files protected (git-config-paths.ts).
import fs from "node:fs";
import path from "node:path";
import { unquoteGitPath } from "../util/git-quoted-path.js";
import { readSmallFile } from "../util/read-fd.js";
import { atPath } from "./fd-walk.js";

/** How deep git follows alternates of alternates (its own limit). */
export const MAX_ALTERNATES_DEPTH = 5;
/** More than any real repository borrows from: past it the chain is not followed. */
export const MAX_ALTERNATE_STORES = 16;
const MAX_ALTERNATES_BYTES = 64 * 1024;

/** The stores an alternates file names, as git reads it: one per line, `#` comments, C-quoted or plain, relative to `storeDir`. */
export function parseAlternates(text: string, storeDir: string): string[] {
  const out: string[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.replace(/\r$/, "");
    if (line === "" || line.startsWith("#") || line.includes("\0")) continue;
    out.push(path.resolve(storeDir, unquoteGitPath(line)));
  }
  return out;
}

/**
 * The alternates file of the store whose directory fd is `storeFd`, read through fds: `info`
 * opened without following a link, `alternates` only as a regular file (never a FIFO or device);
 * undefined when there is none or it is anything else.
 */
export function readAlternatesAt(storeFd: number): string | undefined {
  let info: number;
  try {
    info = fs.openSync(
      atPath(storeFd, "info"),
      fs.constants.O_RDONLY | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW,
    );
  } catch {
    return undefined;
  }
  try {
    return readSmallFile(atPath(info, "alternates") as string, MAX_ALTERNATES_BYTES)?.toString("utf8");
  } finally {
    fs.closeSync(info);
  }
}

/** One store the chain names, and the alternates file that names it. */
export interface BorrowedStore {
  store: string;
  source: string;
}

/**
 * The stores a repository's object directory borrows from, by path, as the host has them before a
 * run: breadth first, to git's depth, each once. A file that is a link, or no regular file, is not
 * followed (git would; what it names is judged unread).
 */
export function borrowedStores(objectsDir: string): BorrowedStore[] {
  const out: BorrowedStore[] = [];
  const seen = new Set([path.resolve(objectsDir)]);
  let level = [path.resolve(objectsDir)];
  for (let depth = 0; depth < MAX_ALTERNATES_DEPTH && level.length > 0; depth++) {
    const next: string[] = [];
    for (const store of level) {
      const source = path.join(store, "info", "alternates");
      const text = readSmallFile(source, MAX_ALTERNATES_BYTES)?.toString("utf8");
      if (text === undefined) continue;
      for (const named of parseAlternates(text, store)) {
        if (seen.has(named) || out.length >= MAX_ALTERNATE_STORES) continue;
        seen.add(named);
        out.push({ store: named, source });
        next.push(named);
      }
    }
    level = next;
  }
  return out;
}
