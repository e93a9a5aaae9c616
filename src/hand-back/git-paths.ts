// Names git treats as its own metadata: a `.git` path component in any case, the forms NTFS
// and 8.3 short names make of it (`.git.`, `.git `, `git~1`), which git refuses in a tree too.
// Nothing at or below such a name is ever handed back: it is repository state, not a change.

/** Whether one path component names a git directory (or a git-refused alias of one). */
export function isGitName(component: string): boolean {
  return /^\.git[. ]*$/i.test(component) || /^git~\d+$/i.test(component);
}

/** Whether a "/"-separated relative path is, or lies below, a git directory. */
export function isGitMetadata(rel: string): boolean {
  return rel.split("/").some(isGitName);
}
