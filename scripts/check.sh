#!/usr/bin/env bash
# The command behind `make check`, the fast tier: ruff, mypy and every test that needs no root and no
# external service (Docker, llama-server, sshd, Prometheus, promtool, kubectl). Such tests carry a
# marker naming their service (pyproject.toml); this deselects them. Provisions nothing.
#
# Test functions measured at a second or more (tests/slow_tests.txt, marked `slow` by tests/conftest.py)
# are left out too, so that this stays under three minutes on a 2-core machine; --all runs them.
#
#   scripts/check.sh [--all] [pytest args...]
#
# Exits non-zero if any step fails; all three steps always run.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
[ -x "$BIN/pytest" ] || { echo "check.sh: no .venv with dev tools; run 'make check' (it creates .venv)" >&2; exit 1; }

SELECT="not docker and not llamacpp and not ssh and not prometheus and not promtool and not kubectl"
if [ "${1:-}" = "--all" ]; then
  shift
else
  SELECT="$SELECT and not slow"
fi

stage_start() { STAGE_T0=$(date +%s.%N); printf '\n=== %s\n' "$1" >&2; }
stage_end() { awk -v a="$STAGE_T0" -v b="$(date +%s.%N)" -v s="$1" 'BEGIN { printf "=== %s: %.1f s\n", s, b - a }' >&2; }
failed=()
check() {
  local name=$1
  shift
  stage_start "$name"
  if "$@"; then stage_end "$name"; else stage_end "$name (FAILED)"; failed+=("$name"); fi
}
# A shell started in the background hands its children SIGINT ignored, and tests that Ctrl-C a
# subprocess then wait forever; scripts/test.sh does the same reset before pytest.
with_default_signals() {
  "$BIN/python" -c 'import os, signal, sys
for s in (signal.SIGINT, signal.SIGQUIT): signal.signal(s, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}
check ruff "$BIN/ruff" check .
check mypy "$BIN/mypy"
check pytest with_default_signals "$BIN/pytest" -q -m "$SELECT" "$@"

if [ ${#failed[@]} -gt 0 ]; then
  echo "check.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "check.sh: all passed" >&2
