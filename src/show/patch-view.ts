// changes.patch (git's format: `git diff --no-index`, or `diff -ruN` where git was missing) split
// into one part per file, with the file's name, what happened to it, and its added and removed
// line counts. Names are taken from the patch as text: git quotes unusual ones C-style
// ("a/\303\251"), which is decoded for display; nothing here touches a file system.
import { unquoteGitPath as unquote } from "../util/git-quoted-path.js";
import type { ChangesView, FileDiffView } from "./run-view.js";
import { CAPS, FRAME, type TextBudget } from "./text-budget.js";

const MAX_FILES = 2_000;

export function patchView(
  patch: string,
  budget: TextBudget,
): Pick<ChangesView, "files" | "omittedFiles" | "totalFiles"> {
  const files: FileDiffView[] = [];
  const omittedFiles: string[] = [];
  const parts = splitFiles(patch);
  for (const part of parts) {
    const drawn = files.length < MAX_FILES;
    const view = fileView(part, budget, drawn);
    if (!view) continue; // past the page's outline (the budget counts it)
    if (drawn) files.push(view);
    else if (omittedFiles.length < MAX_FILES && budget.admit(FRAME.part, view.name)) omittedFiles.push(view.name);
  }
  // Every file counts, drawn, named or neither: the views say how many they leave out.
  return { files, omittedFiles, totalFiles: parts.length };
}

/** The patch's parts, each starting at a "diff " line (git: "diff --git", diff -ruN: "diff -ruN"). */
function splitFiles(patch: string): string[] {
  const parts: string[] = [];
  let start = -1;
  let at = 0;
  while (at <= patch.length) {
    const end = patch.indexOf("\n", at);
    const lineEnd = end === -1 ? patch.length : end;
    if (patch.startsWith("diff ", at)) {
      if (start !== -1) parts.push(patch.slice(start, at));
      start = at;
    } else if (start === -1 && lineEnd > at) start = at; // text before any "diff" line: one part of its own
    if (end === -1) break;
    at = end + 1;
  }
  if (start !== -1 && start < patch.length) parts.push(patch.slice(start));
  return parts;
}

/** One file's part; undefined when it is to be drawn and the page's outline has no room for it. */
function fileView(part: string, budget: TextBudget, draw: boolean): FileDiffView | undefined {
  const lines = part.split("\n");
  let oldName: string | undefined;
  let newName: string | undefined;
  let status: FileDiffView["status"] = "modified";
  let added = 0;
  let removed = 0;
  let inHunk = false;
  for (const line of lines) {
    if (line.startsWith("@@")) inHunk = true;
    else if (inHunk && line.startsWith("+")) added++;
    else if (inHunk && line.startsWith("-")) removed++;
    else if (!inHunk) {
      if (line.startsWith("--- ")) oldName = pathOf(line.slice(4), "a/");
      else if (line.startsWith("+++ ")) newName = pathOf(line.slice(4), "b/");
      else if (line.startsWith("rename from ")) oldName = unquote(line.slice(12));
      else if (line.startsWith("rename to ")) {
        newName = unquote(line.slice(10));
        status = "renamed";
      } else if (line.startsWith("new file mode")) status = "added";
      else if (line.startsWith("deleted file mode")) status = "deleted";
      else if (line.startsWith("Binary files ") || line === "GIT binary patch") status = "binary";
      else if (line.startsWith("old mode ") && status === "modified") status = "mode";
    }
  }
  if (newName === "/dev/null") {
    newName = undefined;
    status = status === "binary" ? status : "deleted";
  }
  if (oldName === "/dev/null") {
    oldName = undefined;
    status = status === "binary" ? status : "added";
  }
  const name = newName ?? oldName ?? namesFromDiffLine(lines[0] ?? "") ?? "(unnamed)";
  const shownOld = status === "renamed" && oldName && oldName !== name ? cutName(oldName) : undefined;
  if (draw && !budget.admit(FRAME.entry, cutName(name), shownOld)) return undefined;
  return {
    name: cutName(name),
    ...(shownOld !== undefined ? { oldName: shownOld } : {}),
    status,
    added,
    removed,
    body: draw ? budget.take(part.replace(/\n$/, ""), CAPS.fileDiff) : { text: "", omitted: part.length },
  };
}

/** "a/src/x.ts" (or "\"a/sp ace\"" quoted, or a diff -ruN path with a tab and a date) -> "src/x.ts". */
function pathOf(field: string, prefix: string): string {
  const name = unquote(field.replace(/\t.*$/, ""));
  return name.startsWith(prefix) ? name.slice(prefix.length) : name;
}

function namesFromDiffLine(line: string): string | undefined {
  const git = /^diff --git (?:"?a\/)(.*?)"? "?b\/(.*?)"?$/.exec(line);
  if (git) return unquote(git[2]!);
  const plain = /^diff \S+ (\S+) (\S+)$/.exec(line);
  return plain?.[2];
}

function cutName(name: string): string {
  return name.length > 1000 ? `${name.slice(0, 1000)}…` : name;
}
