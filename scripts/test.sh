#!/usr/bin/env bash
# The test command: lint, types, then pytest. (Service provisioning is added by the CI work.)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
"$BIN/ruff" check .
"$BIN/mypy"
"$BIN/pytest" "$@"
