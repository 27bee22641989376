#!/usr/bin/env bash
# Runs a TypeScript entry point of this project with ts-node, after installing what is missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/install.sh"
exec node -r ts-node/register "$@"
