#!/usr/bin/env bash
# npm test: install what is missing, then run every mocha suite, the type-check, the lint and the cycle check
# (madge) beside them. The
# suites start their own Temporal and FerretDB on free ports with throwaway data (test/support/stack.ts) and stop them at the end,
# even when tests fail. With MONGO_URL / TEMPORAL_ADDRESS set, those servers are used instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --all --with-browser --with-test-server
# The type-check and the lint run beside the suites (which mostly wait on the servers): their output is kept
# and shown at the end, and either failing fails the run.
checks="$(mktemp -d)"
trap 'rm -rf "$checks"' EXIT
npx tsc --noEmit -p . >"$checks/typecheck" 2>&1 &
typecheck=$!
npx eslint --max-warnings=0 . >"$checks/lint" 2>&1 &
lint=$!
npx madge --circular --ts-config tsconfig.json . >"$checks/cycles" 2>&1 &
cycles=$!
mocha_status=0
npx mocha "$@" || mocha_status=$?
typecheck_status=0
wait "$typecheck" || typecheck_status=$?
lint_status=0
wait "$lint" || lint_status=$?
cycles_status=0
wait "$cycles" || cycles_status=$?
for check in typecheck lint; do
  if [ -s "$checks/$check" ]; then
    echo "flow-notify test: $check said:" >&2
    cat "$checks/$check" >&2
  fi
done
[ "$typecheck_status" -eq 0 ] || echo "flow-notify test: the type-check failed" >&2
[ "$lint_status" -eq 0 ] || echo "flow-notify test: the lint failed" >&2
if [ "$cycles_status" -ne 0 ]; then
  cat "$checks/cycles" >&2
  echo "flow-notify test: madge found an import cycle" >&2
fi
if [ "$mocha_status" -ne 0 ] || [ "$typecheck_status" -ne 0 ] || [ "$lint_status" -ne 0 ] || [ "$cycles_status" -ne 0 ]; then
  exit 1
fi
