#!/usr/bin/env bash
# Provision OpenSSH (Debian's `openssh-server`, which brings the client and ssh-keygen) for the tests
# that watch remote hosts through real sshd servers on 127.0.0.1 (tests/remote/). No service is
# started here (no systemd): the tests start their own sshd on free ports with throwaway keys.
#
#   eval "$(scripts/provision/sshd.sh)"   # prints: export ENGINEDECK_SSHD=/usr/sbin/sshd
#
# Env: ENGINEDECK_SKIP_SSH=1 skips the tests marked `ssh` instead (they are reported as skipped).
set -euo pipefail
SKIP_VAR=ENGINEDECK_SKIP_SSH
PROVISION_NAME=sshd
# shellcheck source=scripts/provision/common.sh disable=SC2034
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

sshd=${ENGINEDECK_SSHD:-/usr/sbin/sshd}
if [ ! -x "$sshd" ] || ! command -v ssh >/dev/null || ! command -v ssh-keygen >/dev/null; then
  t0=$(now)
  apt_install openssh-server
  log "installed openssh-server in $(elapsed "$t0") s"
fi
[ -x "$sshd" ] || die "$sshd not found after installing openssh-server"
log "sshd: $("$sshd" -V 2>&1 | head -n1 || true)"
echo "export ENGINEDECK_SSHD=$sshd"
