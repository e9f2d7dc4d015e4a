# shellcheck shell=bash disable=SC2034
# Shared helpers for scripts/provision/*.sh (sourced, not executed).
# Logs go to stderr; stdout is reserved for `export NAME=value` lines that callers eval.

ENGINEDECK_CACHE="${ENGINEDECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/enginedeck}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

log() { printf '[provision %s %(%H:%M:%S)T] %s\n' "${PROVISION_NAME:-?}" -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Seconds since the epoch with milliseconds, for stage timings.
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# apt-get install the named packages, or fail with a clear message when we are not root.
apt_install() {
  if [ "$(id -u)" -ne 0 ]; then
    die "missing packages: $* - install them as root (apt-get install $*), or set ${SKIP_VAR:-the skip variable}=1 to run the tests without this service"
  fi
  export DEBIAN_FRONTEND=noninteractive
  log "apt-get install $*"
  # Serialised: the docker and llamacpp provisioners may run at the same time (scripts/test.sh), and
  # apt-get fails at once when another apt holds the dpkg lock.
  (
    flock 8
    apt-get update -qq >&2
    apt-get install -y -qq -o DPkg::Lock::Timeout=300 --no-install-recommends "$@" >/dev/null
  ) 8>/var/lock/enginedeck-apt.lock
}
