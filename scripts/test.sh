#!/usr/bin/env bash
# npm test: install what is missing, then run every mocha suite, the type-check, the lint and the cycle check
# (madge) beside them. The
# suites start their own Temporal and FerretDB on free ports with throwaway data (test/support/stack.ts) and stop them at the end,
# even when tests fail. With MONGO_URL / TEMPORAL_ADDRESS set, those servers are used instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --all --with-browser --with-test-server
# The type-check and the lint (one TypeScript program for both, scripts/typecheckAndLint.ts) and the cycle check run
# beside the suites (which mostly wait on the servers): their output is kept and shown at the end, and either
# failing fails the run.
checks="$(mktemp -d)"
trap 'rm -rf "$checks"' EXIT
node -r ts-node/register scripts/typecheckAndLint.ts >"$checks/typecheck-and-lint" 2>&1 &
typecheck_and_lint=$!
npx madge --circular --ts-config tsconfig.json . >"$checks/cycles" 2>&1 &
cycles=$!
mocha_status=0
npx mocha "$@" || mocha_status=$?
checks_status=0
wait "$typecheck_and_lint" || checks_status=$?
cycles_status=0
wait "$cycles" || cycles_status=$?
if [ -s "$checks/typecheck-and-lint" ]; then
  echo "flow-notify test: the type-check and the lint said:" >&2
  cat "$checks/typecheck-and-lint" >&2
fi
[ "$checks_status" -eq 0 ] || echo "flow-notify test: the type-check or the lint failed" >&2
if [ "$cycles_status" -ne 0 ]; then
  cat "$checks/cycles" >&2
  echo "flow-notify test: madge found an import cycle" >&2
fi
if [ "$mocha_status" -ne 0 ] || [ "$checks_status" -ne 0 ] || [ "$cycles_status" -ne 0 ]; then
  exit 1
fi
