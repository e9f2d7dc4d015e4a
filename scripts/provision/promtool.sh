#!/usr/bin/env bash
# Provision Prometheus' `promtool` and server (Debian's `prometheus` package) for the tests that check
# exported rules and OpenMetrics files with the real tool, and those that read a real server as a
# [sources.*] (tests/prometheus/: the tests start it themselves; ENGINEDECK_SKIP_PROMETHEUS=1 skips them).
#
#   eval "$(scripts/provision/promtool.sh)"   # prints: export ENGINEDECK_PROMTOOL=/usr/bin/promtool
#
# Env: ENGINEDECK_SKIP_PROMTOOL=1 skips the tests marked `promtool` instead (they are reported as skipped).
set -euo pipefail
SKIP_VAR=ENGINEDECK_SKIP_PROMTOOL
PROVISION_NAME=promtool
# shellcheck source=scripts/provision/common.sh disable=SC2034
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  t0=$(now)
  # Debian's prometheus package ships promtool; its service is never started here (no systemd).
  apt_install prometheus
  log "installed prometheus (server and promtool) in $(elapsed "$t0") s"
fi
tool="$(command -v promtool)" || die "promtool not found after installing prometheus"
log "promtool: $("$tool" --version 2>&1 | head -n1)"
echo "export ENGINEDECK_PROMTOOL=$tool"
server="$(command -v prometheus)" || die "prometheus not found after installing it"
echo "export ENGINEDECK_PROMETHEUS=$server"
