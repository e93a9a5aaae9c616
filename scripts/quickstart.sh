#!/usr/bin/env bash
# From a fresh machine to a finished sandboxed run: engine, dependencies, image, demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-host.sh
npm ci --no-audit --no-fund
npm run build
node dist/cli/main.js image build
node dist/cli/main.js demo
