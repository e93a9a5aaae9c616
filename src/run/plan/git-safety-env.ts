// Defence in depth inside the sandbox: git, run innocently by the model (`git status`, `git diff`),
// must not run commands the repository chose. GIT_CONFIG_COUNT / GIT_CONFIG_KEY_n / _VALUE_n are git's
// highest-precedence configuration (after -c), so these entries win over any config file in the
// repository: no fsmonitor, no hooks, no pager, plain ssh, and every filter, diff and merge driver the
// repository defines replaced by a harmless one. (The host never runs git in the workspace at all;
// what the model's answer is comes from the gateway, not from anything git prints.)
import type { GitDrivers } from "../../workspace/git-config-scan.js";

/** A plain unified diff, called like an external diff driver (path old-file old-hex old-mode new-file ...). */
const PLAIN_DIFF = `f() { diff -u --label "a/$1" --label "b/$1" "$2" "$5"; [ $? -le 1 ]; }; f`;

export function gitSafetyEntries(drivers: GitDrivers): Array<[string, string]> {
  const entries: Array<[string, string]> = [
    ["core.fsmonitor", "false"],
    ["core.hooksPath", "/dev/null"],
    ["core.pager", "cat"],
    ["core.sshCommand", "ssh"],
    // A read-only workspace is lent only where the sandbox could not read it (session 27), so its
    // repository is another uid's: git's ownership check would refuse every command there. Inside
    // the sandbox it guards nothing (one uid runs everything; the settings above keep git from
    // running what a repository's config names).
    ["safe.directory", "*"],
    // A split index (core.splitIndex=true in the repository) keeps its cached trees where the host's
    // check cannot read them, so any `git add` there failed the run as git-pointers (review, session
    // 28): git in the sandbox writes whole indexes instead, which the host's git reads the same.
    ["core.splitIndex", "false"],
  ];
  if (drivers.externalDiff) entries.push(["diff.external", PLAIN_DIFF]);
  for (const name of drivers.filters) {
    entries.push([`filter.${name}.clean`, "cat"], [`filter.${name}.smudge`, "cat"]);
    entries.push([`filter.${name}.process`, ""], [`filter.${name}.required`, "false"]);
  }
  for (const name of drivers.diffs)
    entries.push([`diff.${name}.command`, PLAIN_DIFF], [`diff.${name}.textconv`, "cat"]);
  for (const name of drivers.merges) entries.push([`merge.${name}.driver`, "false"]);
  return entries;
}

/** Appends `entries` to git's environment configuration after any the caller set (later entries win). */
export function withGitConfig(env: Record<string, string>, entries: Array<[string, string]>): Record<string, string> {
  const given = Number(env.GIT_CONFIG_COUNT ?? 0);
  let count = Number.isInteger(given) && given >= 0 ? given : 0;
  const out = { ...env };
  for (const [key, value] of entries) {
    out[`GIT_CONFIG_KEY_${count}`] = key;
    out[`GIT_CONFIG_VALUE_${count}`] = value;
    count++;
  }
  out.GIT_CONFIG_COUNT = String(count);
  // Beats a repository's pager.<command> as well as core.pager.
  out.GIT_PAGER = "cat";
  return out;
}
