// What a hand-back that does not apply reports: the branch and its commit, or the patch.
import type { BranchHandBack } from "./branch-commit.js";
import type { PatchHandBack } from "./change-patch.js";

export type { BranchHandBack } from "./branch-commit.js";
export type { PatchHandBack } from "./change-patch.js";

/** `RunDetails.handBack`: present when the hand-back mode is "branch" or "patch" and the workspace was writable. */
export type HandBackReport = BranchHandBack | PatchHandBack;
