// A record is untrusted input, never configuration: a replay runs under the caller's policy,
// image, workspace and writable roots, and what the record says about them is only compared. This
// is that comparison (pure). A difference where the recorded run had more than this replay gives
// across the boundary (more network, a host folder mounted, a writable root, a secret, a host CA
// bundle, weaker runtime isolation, a writable workspace where this one is read-only) means the
// record asks for more than the caller grants: the replay is refused and the difference named.
// Everything else (limits, tools, protections, image, paths) is reported and the replay goes on.
import { isDeepStrictEqual } from "node:util";
import type { Policy } from "../policy/policy-schema.js";
import { matchesDomain } from "../proxy/domain-filter.js";

export interface RecordDifference {
  /** What differs: a policy field (`policy.network`), `image`, `workspace`, `writableRoots`, ... */
  field: string;
  recorded: string;
  now: string;
  /** The recorded run had more than this replay gives across the boundary: the replay is refused. */
  needsMore: boolean;
}

/** What the record says about the recorded run (all of it untrusted). */
interface RecordedSide {
  policy: Policy;
  image: string;
  workspace: { host: string; sandbox: string };
  writableRoots: readonly string[];
  extraArgs: readonly string[];
}

/** What this replay runs under (the caller's choices and the defaults). */
export interface EffectiveSide {
  policy: Policy;
  image: string;
  workspace: { host: string; sandbox: string };
  writableRoots: readonly string[];
  extraArgs: readonly string[];
}

const NETWORK_RANK = { none: 0, allowlist: 1, open: 2 } as const;
/** Compared field by field below; any other field that differs is reported as a whole. */
const COMPARED = new Set([
  "network",
  "allowedDomains",
  "secrets",
  "readOnlyMounts",
  "trustHostCaBundle",
  "runtime",
  "workspace",
  "writableRoots",
  "limits",
]);

export function compareRecord(recorded: RecordedSide, now: EffectiveSide): RecordDifference[] {
  const differences: RecordDifference[] = [];
  const add = (field: string, was: unknown, is: unknown, needsMore: boolean) =>
    differences.push({ field, recorded: show(was), now: show(is), needsMore });
  const before = recorded.policy;
  const after = now.policy;

  if (before.network !== after.network) {
    add("policy.network", before.network, after.network, NETWORK_RANK[before.network] > NETWORK_RANK[after.network]);
  }
  if (!isDeepStrictEqual(before.allowedDomains, after.allowedDomains)) {
    const uncovered =
      after.network === "open"
        ? []
        : before.allowedDomains.filter((d) => !after.allowedDomains.some((e) => covers(e, d)));
    add("policy.allowedDomains", before.allowedDomains, after.allowedDomains, uncovered.length > 0);
  }
  compareSecrets(before, after, add);
  if (!isDeepStrictEqual(before.readOnlyMounts, after.readOnlyMounts)) {
    // By name only: a record's path is never looked at on this host.
    const missing = before.readOnlyMounts.filter((m) => !after.readOnlyMounts.includes(m));
    add("policy.readOnlyMounts", before.readOnlyMounts, after.readOnlyMounts, missing.length > 0);
  }
  if (before.trustHostCaBundle !== after.trustHostCaBundle) {
    add("policy.trustHostCaBundle", before.trustHostCaBundle, after.trustHostCaBundle, before.trustHostCaBundle);
  }
  if (before.runtime !== after.runtime) {
    add("policy.runtime", before.runtime, after.runtime, before.runtime === "runc" && after.runtime === "runsc");
  }
  if (before.workspace !== after.workspace) {
    add("policy.workspace", before.workspace, after.workspace, before.workspace === "read-write");
  }
  if (before.writableRoots !== after.writableRoots) {
    add(
      "policy.writableRoots",
      before.writableRoots,
      after.writableRoots,
      before.writableRoots && recorded.writableRoots.length > 0,
    );
  }
  for (const [name, value] of Object.entries(before.limits)) {
    const is = (after.limits as Record<string, unknown>)[name];
    if (!isDeepStrictEqual(value, is)) add(`policy.limits.${name}`, value, is, false);
  }
  const fields = new Set([...Object.keys(before), ...Object.keys(after)]);
  for (const field of [...fields].sort()) {
    if (COMPARED.has(field)) continue;
    const was = (before as Record<string, unknown>)[field];
    const is = (after as Record<string, unknown>)[field];
    if (!isDeepStrictEqual(was, is)) add(`policy.${field}`, was, is, false);
  }

  // Host paths are compared, never used: writable roots by number (their paths are the recording
  // machine's), then by name.
  if (recorded.writableRoots.length > now.writableRoots.length) {
    add("writableRoots", recorded.writableRoots, now.writableRoots, true);
  } else if (!isDeepStrictEqual([...recorded.writableRoots].sort(), [...now.writableRoots].sort())) {
    add("writableRoots", recorded.writableRoots, now.writableRoots, false);
  }
  if (recorded.image !== now.image) add("image", recorded.image, now.image, false);
  if (recorded.workspace.host !== now.workspace.host) {
    add("workspace", recorded.workspace.host, now.workspace.host, false);
  }
  if (recorded.workspace.sandbox !== now.workspace.sandbox) {
    add("workspacePath", recorded.workspace.sandbox, now.workspace.sandbox, false);
  }
  if (!isDeepStrictEqual(recorded.extraArgs, now.extraArgs)) add("extraArgs", recorded.extraArgs, now.extraArgs, false);
  return differences;
}

/** Whether the two policies give Pi the same tools and context files (so the same system prompt). */
export function sameModelContext(recorded: Policy, now: Policy): boolean {
  return (
    isDeepStrictEqual([...recorded.tools].sort(), [...now.tools].sort()) && recorded.contextFiles === now.contextFiles
  );
}

/** One line per difference, refusals first: for messages and the CLI. */
export function describeDifference(d: RecordDifference): string {
  return `${d.field}: recorded ${d.recorded}, now ${d.now}`;
}

function compareSecrets(
  before: Policy,
  after: Policy,
  add: (field: string, was: unknown, is: unknown, needsMore: boolean) => void,
): void {
  const names = new Set([...Object.keys(before.secrets ?? {}), ...Object.keys(after.secrets ?? {})]);
  for (const name of [...names].sort()) {
    const was = before.secrets?.[name];
    const is = after.secrets?.[name];
    if (isDeepStrictEqual(was, is)) continue;
    // A secret this replay does not give, sent to other hosts, or read from elsewhere on the host.
    const needsMore =
      was !== undefined &&
      (is === undefined ||
        was.hosts.some((host) => !is.hosts.includes(host)) ||
        !isDeepStrictEqual(was.from ?? null, is.from ?? null));
    add(`policy.secrets.${name}`, was ?? "(none)", is ?? "(none)", needsMore);
  }
}

/** Whether allow-list entry `pattern` lets through everything entry `entry` does. */
function covers(pattern: string, entry: string): boolean {
  if (pattern === entry) return true;
  if (entry.startsWith("*.")) return pattern.startsWith("*.") && matchesDomain(entry.slice(2), pattern);
  return matchesDomain(entry, pattern);
}

const MAX_SHOWN = 160;

function show(value: unknown): string {
  if (value === undefined) return "(none)";
  const text = typeof value === "string" ? value : (JSON.stringify(value) ?? String(value));
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN - 1)}…` : text;
}
