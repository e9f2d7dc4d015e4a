#!/usr/bin/env bash
# Provision kubectl (Debian's `kubernetes-client`) for the Kubernetes source's logs test
# (tests/kube/: `kubectl logs` against the test's own API server on 127.0.0.1; no cluster).
#
#   eval "$(scripts/provision/kubectl.sh)"   # prints: export ENGINEDECK_KUBECTL=/usr/bin/kubectl
#
# Env: ENGINEDECK_SKIP_KUBECTL=1 skips that test instead (it is reported as skipped).
set -euo pipefail
SKIP_VAR=ENGINEDECK_SKIP_KUBECTL
PROVISION_NAME=kubectl
# shellcheck source=scripts/provision/common.sh disable=SC2034
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if ! command -v kubectl >/dev/null; then
  t0=$(now)
  apt_install kubernetes-client
  log "installed kubernetes-client in $(elapsed "$t0") s"
fi
kubectl=$(command -v kubectl) || die "kubectl not found after installing kubernetes-client"
log "kubectl: $("$kubectl" version --client 2>/dev/null | head -n1 || true)"
echo "export ENGINEDECK_KUBECTL=$kubectl"
