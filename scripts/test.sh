#!/usr/bin/env bash
# The test command behind `make test`: provision the services the integration tests need, then
# ruff, mypy and pytest (all tests). Exits non-zero if any step fails; all three checks always run.
#
#   scripts/test.sh [pytest args...]
#
# Services (see scripts/provision/):
#   Docker Engine + images enginedeck/pybase:bookworm, enginedeck/sim:dev   (needs root the first time)
#   llama-server (built once, cached in ~/.cache/enginedeck) + tiny GGUF model
#   promtool and the Prometheus server (Debian's prometheus package)
#   OpenSSH server and client (Debian's openssh-server), for real sshd servers on 127.0.0.1
#   kubectl (Debian's kubernetes-client), for the Kubernetes source's logs test
# Explicit opt-outs, for machines without root/Docker or without time for the 5-min llama.cpp build:
#   ENGINEDECK_SKIP_DOCKER=1     skip Docker provisioning; tests marked `docker` are reported as skipped
#   ENGINEDECK_SKIP_LLAMACPP=1   same for llama.cpp and tests marked `llamacpp`
#   ENGINEDECK_SKIP_PROMTOOL=1   same for Prometheus' promtool and tests marked `promtool`
#   ENGINEDECK_SKIP_SSH=1        same for OpenSSH and tests marked `ssh`
#   ENGINEDECK_SKIP_PROMETHEUS=1 skip the tests marked `prometheus` (a real server; provisioned with promtool)
#   ENGINEDECK_SKIP_KUBECTL=1    same for kubectl and the test that runs it
# Without them a missing service is a test failure, never a silent skip.
# Pre-set ENGINEDECK_LLAMA_SERVER + ENGINEDECK_TINY_GGUF (existing files) are used as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
[ -x "$BIN/pytest" ] || { echo "test.sh: no .venv with dev tools; run 'make test' (it creates .venv)" >&2; exit 1; }

is_set() { case "${!1:-}" in "" | 0 | false | no) return 1 ;; *) return 0 ;; esac; }
stage_start() { STAGE_T0=$(date +%s.%N); printf '\n=== %s\n' "$1" >&2; }
stage_end() { awk -v a="$STAGE_T0" -v b="$(date +%s.%N)" -v s="$1" 'BEGIN { printf "=== %s: %.1f s\n", s, b - a }' >&2; }

# Provision scripts print `export ...` lines (eval'd here) and log to stderr. A provisioning failure
# stops everything here: the tests behind it could only fail with less helpful messages.
# llama.cpp runs in the background while Docker provisions: on a fresh machine its ~5-7 min
# compile then overlaps the apt/base-image work instead of following it.
tmp=$(mktemp -d)
llama_pid=
cleanup() {
  # The background provisioner is a process group of its own (setsid): stop all of it (pip, cmake, cc).
  if [ -n "$llama_pid" ] && kill -0 "$llama_pid" 2>/dev/null; then kill -TERM -- "-$llama_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
skipped=()
# provision LABEL SCRIPT SKIPVAR: eval what scripts/provision/SCRIPT.sh prints, or note LABEL as
# skipped when SKIPVAR is set. A provisioning failure stops everything here.
provision() {
  local label=$1 script=$2 var=$3 out
  if is_set "$var"; then
    skipped+=("$label ($var=${!var})")
    return
  fi
  stage_start "provision $script"
  if ! out=$("scripts/provision/$script.sh"); then
    echo "test.sh: provisioning '$script' failed (see the messages above)" >&2
    exit 1
  fi
  eval "$out"
  stage_end "provision $script"
}
if is_set ENGINEDECK_SKIP_LLAMACPP; then
  skipped+=("llamacpp (ENGINEDECK_SKIP_LLAMACPP=$ENGINEDECK_SKIP_LLAMACPP)")
elif [ -x "${ENGINEDECK_LLAMA_SERVER:-}" ] && [ -f "${ENGINEDECK_TINY_GGUF:-}" ]; then
  echo "test.sh: using pre-set ENGINEDECK_LLAMA_SERVER and ENGINEDECK_TINY_GGUF" >&2
else
  llama_t0=$(date +%s.%N)
  echo "=== provision llamacpp (background)" >&2
  setsid scripts/provision/llamacpp.sh >"$tmp/llamacpp.env" &
  llama_pid=$!
fi
provision docker docker ENGINEDECK_SKIP_DOCKER
if [ -n "$llama_pid" ]; then
  status=0
  wait "$llama_pid" || status=$?
  llama_pid=
  if [ "$status" -ne 0 ]; then
    echo "test.sh: provisioning 'llamacpp' failed (see the messages above)" >&2
    exit 1
  fi
  eval "$(cat "$tmp/llamacpp.env")"
  STAGE_T0=$llama_t0 stage_end "provision llamacpp (background, wall time)"
fi
provision promtool promtool ENGINEDECK_SKIP_PROMTOOL
provision ssh sshd ENGINEDECK_SKIP_SSH
provision kubectl kubectl ENGINEDECK_SKIP_KUBECTL
for s in ${skipped[@]+"${skipped[@]}"}; do
  echo "test.sh: SKIPPED service $s - its tests will be reported as skipped" >&2
done

failed=()
check() {
  local name=$1
  shift
  stage_start "$name"
  if "$@"; then stage_end "$name"; else stage_end "$name (FAILED)"; failed+=("$name"); fi
}
check ruff "$BIN/ruff" check .
check mypy "$BIN/mypy"
# A shell started in the background (`make test &`, nohup, some CI runners) hands its children SIGINT
# and SIGQUIT ignored, and bash cannot undo that; Python then installs no KeyboardInterrupt handler and
# tests that Ctrl-C a subprocess fail. Reset both to the default before exec'ing pytest.
with_default_signals() {
  "$BIN/python" -c 'import os, signal, sys
for s in (signal.SIGINT, signal.SIGQUIT): signal.signal(s, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}
check pytest with_default_signals "$BIN/pytest" "$@"

echo >&2
for s in ${skipped[@]+"${skipped[@]}"}; do echo "test.sh: note: service $s was skipped" >&2; done
if [ ${#failed[@]} -gt 0 ]; then
  echo "test.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: all passed" >&2
