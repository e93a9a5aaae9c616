// The Node the controller needs on the host: package.json's engines.node (">=20.4"), the one place
// that says it. Older ones fail late and badly (Node 18 ended a run with ERR_INTERNAL_ASSERTION in
// the relay's HTTP/2 and left its container behind, review of session 37), so a ContainerPiAgent
// refuses them when it is made and doctor says FAIL; the CLI (cli/main.ts) refuses them before its
// commands load, with the same words. The words and install lines are scripts/quickstart.sh's,
// which says the same before `npm ci`; tests/unit/node-version.test.ts holds them equal.
import { enginesNode } from "./package-version.js";

export type NodeVersion = readonly [major: number, minor: number, patch: number];

/** "20.4", "v20.4.0", "22.1.0-nightly": the leading numbers (missing ones 0), or undefined. */
export function parseNodeVersion(text: string): NodeVersion | undefined {
  const match = /^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(text.trim());
  if (!match) return undefined;
  return [Number(match[1]), Number(match[2] ?? 0), Number(match[3] ?? 0)];
}

/** The lowest Node an engines range of the form ">=20.4" (or ">= 20.4.1") allows; undefined for any other form. */
export function minimumOfRange(range: string | undefined): NodeVersion | undefined {
  const match = range === undefined ? null : /^>=\s*(\d+(?:\.\d+){0,2})$/.exec(range.trim());
  return match ? parseNodeVersion(match[1]!) : undefined;
}

/** The lowest Node this package runs on, from its package.json (undefined where that cannot be read). */
export function minimumNodeVersion(): NodeVersion | undefined {
  return minimumOfRange(enginesNode());
}

export function formatNodeVersion([major, minor, patch]: NodeVersion): string {
  return patch === 0 ? `${major}.${minor}` : `${major}.${minor}.${patch}`;
}

/** Whether `version` is below `minimum` (an unreadable version or minimum is not refused). */
export function isOlderThan(version: string, minimum: NodeVersion | undefined): boolean {
  const running = parseNodeVersion(version);
  if (!running || !minimum) return false;
  for (let i = 0; i < 3; i++) if (running[i] !== minimum[i]) return running[i]! < minimum[i]!;
  return false;
}

/** How to get a Node that is new enough: scripts/quickstart.sh's lines. */
export const INSTALL_NODE_LINES = [
  "Debian/Ubuntu: curl -fsSL https://deb.nodesource.com/setup_24.x | sudo -E bash - && sudo apt-get install -y nodejs",
  "any Linux, as your user: curl -fsSL https://raw.githubusercontent.com/nvm-sh/nvm/v0.40.3/install.sh | bash, then nvm install 24",
  "(Debian 12's own nodejs package is Node 18: too old)",
] as const;

/**
 * When the Node running this (default: this process's) is older than the package needs: what is
 * wrong, in one sentence, and the install lines. Undefined when it is new enough.
 */
export function nodeTooOld(
  version: string = process.versions.node,
  minimum: NodeVersion | undefined = minimumNodeVersion(),
): { message: string; install: readonly string[] } | undefined {
  if (!minimum || !isOlderThan(version, minimum)) return undefined;
  return {
    message: `Node v${version.replace(/^v/, "")} is older than sandbox-run needs (>= ${formatNodeVersion(minimum)}): install Node 22 or 24 (LTS), then run it again`,
    install: INSTALL_NODE_LINES,
  };
}
