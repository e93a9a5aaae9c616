#!/usr/bin/env bash
# From a fresh machine to a finished sandboxed run: engine, dependencies, image, demo.
set -euo pipefail
cd "$(dirname "$0")/.."
# sandbox-run's controller runs on the host's Node (>= 20.4, package.json's engines); Pi and the
# Node it needs (24) live in the runner image, never on the host.
node_too_old() {
  printf 'quickstart: %s\n' "$1" >&2
  printf 'quickstart: install Node 22 or 24 (LTS), then run %s again:\n' "$0" >&2
  printf '  Debian/Ubuntu: curl -fsSL https://deb.nodesource.com/setup_24.x | sudo -E bash - && sudo apt-get install -y nodejs\n' >&2
  printf '  any Linux, as your user: curl -fsSL https://raw.githubusercontent.com/nvm-sh/nvm/v0.40.3/install.sh | bash, then nvm install 24\n' >&2
  printf "  (Debian 12's own nodejs package is Node 18: too old)\n" >&2
  exit 3
}
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || node_too_old "no node and npm on PATH"
# The minimum is package.json's (src/util/node-version.ts reads it too, for the CLI, doctor and the library).
min=$(node -p 'require("./package.json").engines.node.replace(/^>=\s*/, "")')
node -e 'const [r, m] = [process.versions.node, process.argv[1]].map((v) => (v.split(".").map(Number).concat(0, 0)));
  const i = [0, 1, 2].find((k) => r[k] !== m[k]); process.exit(i === undefined || r[i] > m[i] ? 0 : 1)' "$min" ||
  node_too_old "Node $(node --version) is older than sandbox-run needs (>= $min)"
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 22 ]; then
  printf 'quickstart: note: Node %s works, but Node 20 is past its end of life: move to 22 or 24 when you can.\n' "$(node --version)" >&2
  printf 'quickstart: (npm ci warns EBADENGINE for @earendil-works/pi-schema, which declares Pi'"'"'s own Node >= 22.19; the part sandbox-run runs on the host works on Node 20.)\n' >&2
fi
scripts/setup-host.sh
npm ci --no-audit --no-fund
npm run build
node dist/cli/main.js image build
node dist/cli/main.js demo
