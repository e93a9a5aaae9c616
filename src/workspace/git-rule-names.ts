// The names of the git checks that need more than one entry (a policy turns one off by naming it in
// disableBuiltinProtections), apart from their code so the rule walk can name them without a cycle.

/** Object-store files the run created or changed are what their names say (git-object-check.ts). */
export const OBJECT_RULE = "git-objects";
/** Commits the run's refs name, and index entries, change no protected path (git-ref-check.ts). */
export const REF_RULE = "git-refs";
