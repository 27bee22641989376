#!/usr/bin/env bash
# npm test: install what is missing, type-check, lint, then run every mocha suite. The suites start their own
# Temporal and FerretDB on free ports with throwaway data (test/support/stack.ts) and stop them at the end,
# even when tests fail. With MONGO_URL / TEMPORAL_ADDRESS set, those servers are used instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --all --with-browser --with-test-server
echo "flow-notify test: type-check and lint" >&2
npx tsc --noEmit -p .
npx eslint --max-warnings=0 .
exec npx mocha "$@"
