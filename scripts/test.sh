#!/usr/bin/env bash
# npm test: install what is missing, type-check, lint, then run every mocha suite. The suites start their own
# Temporal and FerretDB on free ports with throwaway data (test/support/stack.ts) and stop them at the end,
# even when tests fail. With MONGO_URL / TEMPORAL_ADDRESS set, those servers are used instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --all --with-browser --with-test-server
echo "flow-notify test: type-check and lint" >&2
# Side by side: each is mostly one core's work for several seconds.
npx tsc --noEmit -p . &
typecheck=$!
lint_status=0
npx eslint --max-warnings=0 . || lint_status=$?
typecheck_status=0
wait "$typecheck" || typecheck_status=$?
if [ "$typecheck_status" -ne 0 ] || [ "$lint_status" -ne 0 ]; then exit 1; fi
exec npx mocha "$@"
