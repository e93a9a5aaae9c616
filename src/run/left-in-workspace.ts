// What a failed bind-mode run left in the workspace: its changes, less what the restore put back.
// A protected path it changed is put back (or removed) after the run, and the error's changedFiles
// and the CLI's "the run's changes stay" line listed it all the same (review, session 30).
import type { RestoreReport } from "../workspace/restore-tree.js";
import type { ChangedFiles } from "../workspace/workspace-snapshot.js";

export function leftInWorkspace(changed: ChangedFiles, restore: RestoreReport | undefined): ChangedFiles {
  const scopes = restore ? [...restore.reverted, ...restore.removed, ...restore.objects] : [];
  if (scopes.length === 0) return changed;
  const putBack = (p: string) => scopes.some((scope) => p === scope || p.startsWith(`${scope}/`));
  const kept = (list: string[]) => list.filter((p) => !putBack(p));
  const created = kept(changed.created);
  const modified = kept(changed.modified);
  const deleted = kept(changed.deleted);
  if (!changed.truncated) return { created, modified, deleted };
  // Cut lists: the counts lose what was put back among the listed ones (the rest is not known by name).
  const { truncated } = changed;
  return {
    created,
    modified,
    deleted,
    truncated: {
      created: truncated.created - (changed.created.length - created.length),
      modified: truncated.modified - (changed.modified.length - modified.length),
      deleted: truncated.deleted - (changed.deleted.length - deleted.length),
    },
  };
}
