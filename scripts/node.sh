#!/usr/bin/env bash
# Runs a TypeScript entry point of this project from sources, after installing what is missing: under ts-node's
# own launcher, not `node -r ts-node/register`, whose flag every worker thread would inherit (scripts/sourceEntry.ts).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/install.sh"
exec node "$root/node_modules/ts-node/dist/bin.js" --project "$root/tsconfig.json" "$@"
