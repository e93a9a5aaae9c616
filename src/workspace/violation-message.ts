// The words of a policy violation: which paths, which rule, what was put back, and what to do.
// The hint never tells the user to run a command in the workspace: the tree is what the
// sandbox left, and git, direnv or an editor started there is what a trap waits for.
import { escapeUnsafeInJson, HIDING_OR_SPLITTING } from "../util/unsafe-chars.js";
import { protectionWhy } from "./builtin-protections.js";
import { SPECIAL_LEFT_RULE } from "./special-entries.js";
import type { WorkspaceReport } from "./workspace-watch.js";

/**
 * A path as a message shows it. The sandbox names the files: a name with a line break or another
 * control character is shown quoted and escaped (`".husky/x\nsandbox-run: done"`), so it cannot
 * start a line of its own in the error a terminal prints, nor hide part of the list.
 */
export function shownPath(path: string): string {
  if (!HIDING_OR_SPLITTING.test(path)) return path || ".";
  return escapeUnsafeInJson(JSON.stringify(path));
}

/** The first items, each shown by `show` (paths: shownPath; descriptions already hold shown paths). */
const list = (items: readonly string[], show: (item: string) => string = (item) => item, max = 10) => {
  const shown = items.slice(0, max).map(show);
  return `${shown.join(", ")}${items.length > shown.length ? ` and ${items.length - shown.length} more` : ""}`;
};

/** What the message needs: the violations (each with its rule), how many, and what was restored. */
export type ViolationSummary = Pick<WorkspaceReport, "violationCount" | "restore"> & {
  violations: ReadonlyArray<{ path: string; change: string; rule?: string; detail?: string }>;
};

export function violationMessage(
  report: ViolationSummary,
  policyName: string,
  options: { applied?: boolean } = {},
): { message: string; hint: string } {
  const count = report.violationCount;
  // One path a built-in rule and the policy's protectedPaths both refuse is one entry, its rules
  // together (review, session 33: ".git/hooks/pre-commit (created, git-metadata), .git/hooks/pre-commit (created)").
  const byPath = new Map<string, { path: string; change: string; rules: string[]; details: string[] }>();
  for (const v of report.violations) {
    const key = `${v.path}\0${v.change}`;
    const entry = byPath.get(key) ?? { path: v.path, change: v.change, rules: [], details: [] };
    byPath.set(key, entry);
    if (v.rule && v.rule !== "protectedPaths" && !entry.rules.includes(v.rule)) entry.rules.push(v.rule);
    if (v.detail && v.rule !== "walk" && !entry.details.includes(v.detail)) entry.details.push(v.detail);
  }
  const described = [...byPath.values()].map(
    (v) =>
      `${shownPath(v.path)} (${v.change}${v.rules.map((r) => `, ${r}`).join("")}${v.details.map((d) => `: ${shownPath(d)}`).join("")})`,
  );
  const more = count > report.violations.length ? ` and ${count - report.violations.length} more` : "";
  // Copy mode judges the returned tree before anything reaches the host: nothing was applied.
  const notApplied = options.applied === false;
  const parts = [
    `The agent changed protected paths of policy ${policyName}: ${list(described)}${more}. The result was withheld${notApplied ? " and none of the run's changes were applied" : ""}.`,
  ];
  const r = report.restore;
  if (r) {
    const done: string[] = [];
    // A path the restore could not complete is said once, as NOT restored (review, session 31: a
    // guarded file too large to keep was listed as both).
    const incomplete = new Set([...r.notRestored.map((n) => n.path), ...r.remaining.map((v) => v.path)]);
    const reverted = r.reverted.filter((p) => !incomplete.has(p));
    if (reverted.length) done.push(`put back as before the run: ${list(reverted, shownPath)}`);
    if (r.removed.length) done.push(`removed (the run created them): ${list(r.removed, shownPath)}`);
    if (r.objects?.length)
      done.push(
        `removed from the git object store (not what their names say; git now reports them missing instead of reading them, and a clone or backup has them): ${list(r.objects, shownPath)}`,
      );
    if (r.modes.length) done.push(`directory modes set back: ${list(r.modes, shownPath)}`);
    if (done.length) parts.push(`Restored: ${done.join("; ")}.`);
    // A path not restored is named once: the check after the restore finds it again (review, session 33).
    const notRestored = new Set(r.notRestored.map((n) => n.path));
    const left = [
      ...r.notRestored.map((n) => `${shownPath(n.path)} (${n.why})`),
      ...r.remaining
        .filter((v) => !notRestored.has(v.path))
        .map((v) => `${shownPath(v.path)} (${v.change}, ${v.rule})`),
    ];
    if (left.length) parts.push(`NOT restored: ${list(left)}.`);
  }
  const rules = [...new Set(report.violations.map((v) => v.rule ?? "protectedPaths"))];
  const allowable = rules.filter((rule) => rule !== SPECIAL_LEFT_RULE);
  const policyWay = rules.includes("walk")
    ? "Entries the host cannot read or name were made in the tree; they cannot be allowed by a policy."
    : [
        ...(allowable.length < rules.length
          ? ["A FIFO, socket or device the run left that the host could not remove cannot be allowed by a policy."]
          : []),
        ...(allowable.length > 0
          ? [
              `If the task must change these paths, use a policy that allows it (${allowable
                .map((rule) =>
                  rule === "protectedPaths" ? "protectedPaths without them" : `disableBuiltinProtections: ["${rule}"]`,
                )
                .join(", ")})${runsOnHost(allowable)}.`,
            ]
          : []),
      ].join(" ");
  const clean = !r || r.clean;
  // A git directory put back as a whole: its refs and HEAD are as before, so the run's commits are on
  // no branch, and the run's other changes stay in the tree (review, session 29: a rebase left
  // stopped on a conflict; the hint said nothing was left and there was nothing to undo).
  const gitReverted = r?.reverted.some((p) => p === ".git" || p.endsWith("/.git")) ?? false;
  const objectsWhere = r?.setAside?.length ? "in the repository, or in the packs set aside" : "in the repository";
  const kept = gitReverted
    ? `The repository's refs and HEAD are as before the run: commits the run made are on no branch now (their objects are still ${objectsWhere}). The run's other changes stay in the workspace (changedFiles).`
    : "The run's other changes stay in the workspace (changedFiles).";
  // Every path not restored was removed (its content before the run was never kept): nothing of the run is left there.
  const allRemoved =
    r?.notRestored.every((n) => /: (removed|left out)$/.test(n.why)) === true &&
    r.remaining.every((v) => v.change === "deleted" && r.notRestored.some((n) => n.path === v.path));
  const hint = notApplied
    ? `The workspace is as it was before the run. ${policyWay}`
    : clean
      ? // Packs set aside unchecked (this host could not run its check) wait for the user (host-trouble.ts).
        `What broke the policy is undone${r?.setAside?.length ? "" : "; there is nothing to undo by hand"}. ${kept} ${policyWay}`
      : allRemoved
        ? `What the run left at the paths listed as NOT restored is removed; what they held before the run could not be kept: get them back from version control or a backup. ${kept} ${policyWay}`
        : `Until the paths listed as NOT restored are deleted by hand (from outside the folder, e.g. a file manager or rm with the full path), do not run git, direnv, a shell with a git prompt or an editor in that workspace. ${policyWay}`;
  return { message: parts.join(" "), hint };
}

/**
 * What allowing the rules would let the sandbox do, in the rules' own words: the sandbox chooses
 * which protection it trips, and a hint to turn one off must say that the file runs on this machine.
 */
function runsOnHost(rules: readonly string[]): string {
  const whys = rules.flatMap((rule) => {
    const why = protectionWhy(rule) ?? GIT_RULE_RISKS.get(rule);
    return why ? [`${rule} ${why}`] : [];
  });
  return whys.length === 0 ? "" : `; only if you trust what this run wrote to run on this machine: ${whys.join("; ")}`;
}

/**
 * What turning a git or mode rule off lets the sandbox make the host do: a hint for a sparse
 * checkout's git-metadata must say that the next run could write the config and hooks host git
 * runs (review, session 28). Never a git command: a hint names none to run in the tree.
 */
const GIT_RULE_RISKS: ReadonlyMap<string, string> = new Map([
  ["git-metadata", "the sandbox could then write the repository's config and hooks, which host git runs"],
  [
    "git-entry-kinds",
    "host git could then write through links the sandbox left in a git directory, into whatever they name",
  ],
  ["git-modes", "other local users could then rewrite what host git reads"],
  [
    "git-pointers",
    "an index or ref could then name paths outside the worktree or in .git/hooks, which host git writes",
  ],
  ["git-objects", "objects could then hold other content than their names say, which host git reads unchecked"],
  ["git-refs", "commits and index entries could then put new content at protected paths, which host git writes back"],
  ["git-config-paths", "files the repository's git config makes executable could then change, and host git runs them"],
  ["new-repositories", "a new repository's config could then run wherever a shell prompt or a tool runs git in it"],
  ["directory-modes", "other local users could then plant files in the workspace"],
]);
