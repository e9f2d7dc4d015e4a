#!/usr/bin/env bash
# Provision a Docker Engine and the images the integration tests use, with no container registry.
#
#   eval "$(scripts/provision/docker.sh)"   # prints: export ENGINEDECK_SIM_IMAGE=enginedeck/sim:dev
#
# Idempotent: installs docker.io + mmdebstrap only when missing, starts dockerd only when the API
# does not answer (an already running daemon is reused, never restarted), builds the base image only
# when absent, and rebuilds the simulator image every time (cached layers make that a few seconds).
#
# Env: ENGINEDECK_BASE_IMAGE (default enginedeck/pybase:bookworm), ENGINEDECK_SIM_IMAGE (default
#      enginedeck/sim:dev), ENGINEDECK_DOCKERD_LOG (default /var/log/enginedeck-dockerd.log),
#      FORCE_BASE=1 to rebuild the base image.
set -euo pipefail
SKIP_VAR=ENGINEDECK_SKIP_DOCKER
PROVISION_NAME=docker
# shellcheck source=scripts/provision/common.sh disable=SC2034
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

BASE_TAG="${ENGINEDECK_BASE_IMAGE:-enginedeck/pybase:bookworm}"
SIM_TAG="${ENGINEDECK_SIM_IMAGE:-enginedeck/sim:dev}"
DOCKERD_LOG="${ENGINEDECK_DOCKERD_LOG:-/var/log/enginedeck-dockerd.log}"
export DEBIAN_FRONTEND=noninteractive
# The machine image's /usr/local/bin/docker (CLI 28) has no buildx; the legacy builder works with
# Debian's 20.10 daemon (it prints a deprecation notice, which is harmless).
export DOCKER_BUILDKIT=0

daemon_up() { timeout 5 docker info >/dev/null 2>&1; }

install_packages() {
  local need=()
  command -v dockerd >/dev/null || need+=(docker.io)
  command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
  # The docker CLI may be the only thing present (this machine kind ships one without an engine).
  command -v docker >/dev/null || need+=(docker.io)
  [ ${#need[@]} -eq 0 ] && return 0
  local t0; t0=$(now)
  # --no-install-recommends skips apparmor, needrestart, criu, git; docker.io works without them.
  apt_install "${need[@]}"
  log "installed ${need[*]} in $(elapsed "$t0") s"
}

launch_dockerd() {  # $@: extra dockerd args. 0 when the API answers, 1 when dockerd died or hung.
  # setsid + closed fds: the daemon outlives this script and holds none of its caller's pipes.
  setsid nohup dockerd "$@" </dev/null >>"$DOCKERD_LOG" 2>&1 9>&- &
  local pid=$!
  for _ in $(seq 1 150); do  # up to ~30 s
    if daemon_up; then
      echo "$pid" >"$ENGINEDECK_CACHE/dockerd.pid"
      log "dockerd up (pid $pid${*:+, args: $*}); log: $DOCKERD_LOG"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { log "dockerd exited: $(grep -E 'failed to start daemon' "$DOCKERD_LOG" | tail -n1)"; return 1; }
    sleep 0.2
  done
  log "dockerd did not answer within 30 s; stopping pid $pid (see $DOCKERD_LOG)"
  kill "$pid" 2>/dev/null || true
  return 1
}

start_daemon() {
  if daemon_up; then
    log "reusing the running Docker daemon ($(docker version -f '{{.Server.Version}}' 2>/dev/null))"
    return 0
  fi
  # A daemon chosen through DOCKER_HOST is someone else's to start.
  [ -z "${DOCKER_HOST:-}" ] || die "no Docker daemon answers at DOCKER_HOST=$DOCKER_HOST"
  if [ "$(id -u)" -ne 0 ] && [ -S /var/run/docker.sock ] && [ ! -w /var/run/docker.sock ]; then
    die "no permission on /var/run/docker.sock (join the 'docker' group), or set ENGINEDECK_SKIP_DOCKER=1 to skip the Docker tests"
  fi
  [ "$(id -u)" -eq 0 ] || die "the Docker daemon does not answer and only root can start it here; start dockerd (as root), or set ENGINEDECK_SKIP_DOCKER=1 to skip the Docker tests"
  command -v dockerd >/dev/null || die "dockerd is not installed"
  mkdir -p "$ENGINEDECK_CACHE" "$(dirname "$DOCKERD_LOG")"
  local t0; t0=$(now)
  # No systemd on these machines (and policy-rc.d forbids service starts): run dockerd directly.
  # Defaults first (docker0 bridge + iptables NAT: -p 127.0.0.1:H:C works, containers have egress).
  if ! launch_dockerd; then
    # Sandboxes without usable iptables ("failed to create NAT chain DOCKER"): no NAT, no default
    # bridge. Tests then publish ports on a user-defined network or use --network host.
    log "retrying dockerd with --iptables=false --bridge=none"
    launch_dockerd --iptables=false --bridge=none || die "could not start dockerd; see $DOCKERD_LOG"
  fi
  log "dockerd started in $(elapsed "$t0") s"
}

build_base() {
  if [ -z "${FORCE_BASE:-}" ] && docker image inspect "$BASE_TAG" >/dev/null 2>&1; then
    log "base image $BASE_TAG present"
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || die "base image $BASE_TAG is missing and building it (mmdebstrap) needs root"
  local old t0
  old=$(docker image inspect -f '{{.Id}}' "$BASE_TAG" 2>/dev/null || true)
  t0=$(now)
  # / is ext4 mounted with 'discard' on this machine kind: a chroot on tmpfs is ~3x faster.
  if [ -d /dev/shm ] && [ "$(df -Pk /dev/shm | awk 'NR==2{print $4}')" -gt 1500000 ]; then export TMPDIR=/dev/shm; fi
  # The hooks are shell code that mmdebstrap runs with $1 = the chroot: single quotes on purpose.
  # shellcheck disable=SC2016
  local hooks=(
    # Slim like debian:*-slim: delete docs after unpacking (path-exclude at unpack time would disable
    # mmdebstrap's fast extraction) and keep the rule for later apt installs inside the image.
    --customize-hook='printf "%s\n" "path-exclude=/usr/share/doc/*" "path-include=/usr/share/doc/*/copyright" "path-exclude=/usr/share/man/*" "path-exclude=/usr/share/locale/*" "path-exclude=/usr/share/info/*" > "$1/etc/dpkg/dpkg.cfg.d/docker-slim"'
    --customize-hook='find "$1/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete; rm -rf "$1"/usr/share/man/* "$1"/usr/share/locale/* "$1"/usr/share/info/*'
  )
  # Egress may go through a TLS-intercepting proxy whose CA is installed here; without it pip in
  # image builds fails with CERTIFICATE_VERIFY_FAILED. The image therefore belongs to this machine.
  if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
    # shellcheck disable=SC2016
    hooks+=(--customize-hook='mkdir -p "$1/usr/local/share/ca-certificates" && cp /usr/local/share/ca-certificates/*.crt "$1/usr/local/share/ca-certificates/" && chroot "$1" update-ca-certificates >/dev/null 2>&1')
  fi
  log "building $BASE_TAG: mmdebstrap bookworm (python3, python3-venv, ca-certificates) | docker import"
  mmdebstrap --quiet --variant=apt --dpkgopt=force-unsafe-io \
    --include=python3,python3-venv,ca-certificates \
    "${hooks[@]}" \
    bookworm - \
  | docker import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV LANG=C.UTF-8' \
      --change 'ENV PYTHONUNBUFFERED=1' \
      --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
      --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
      --change 'ENV REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt' \
      --change 'CMD ["python3"]' \
      - "$BASE_TAG" >/dev/null
  docker run --rm --network none "$BASE_TAG" python3 -c 'import ssl, venv, sys; print("base ok: python", sys.version.split()[0])' >&2
  if [ -n "$old" ] && [ "$old" != "$(docker image inspect -f '{{.Id}}' "$BASE_TAG")" ]; then
    # Still the parent of the previous sim image: then it can only go after the sim rebuild.
    docker rmi "$old" >/dev/null 2>&1 || STALE_BASE=$old
  fi
  log "base image built in $(elapsed "$t0") s"
}

build_sim() {
  local old t0 out
  old=$(docker image inspect -f '{{.Id}}' "$SIM_TAG" 2>/dev/null || true)
  t0=$(now)
  # Always rebuild: the layer cache makes an unchanged tree a few seconds, a changed one correct.
  # --network host: pip inside the build uses the host's resolver and needs no NAT.
  if ! out=$(docker build --network host --build-arg "BASE=$BASE_TAG" -t "$SIM_TAG" \
      --label org.enginedeck.source=provision -f "$REPO_ROOT/Dockerfile.sim" "$REPO_ROOT" 2>&1); then
    printf '%s\n' "$out" | tail -n 40 >&2
    die "docker build of $SIM_TAG failed"
  fi
  local new; new=$(docker image inspect -f '{{.Id}}' "$SIM_TAG")
  if [ -n "$old" ] && [ "$old" != "$new" ]; then docker rmi "$old" >/dev/null 2>&1 || true; fi
  docker run --rm --network none --entrypoint enginedeck "$SIM_TAG" --help >/dev/null \
    || die "$SIM_TAG does not run 'enginedeck --help'"
  log "sim image $SIM_TAG ($(docker image inspect -f '{{.Size}}' "$SIM_TAG" | awk '{printf "%.0f MB", $1/1e6}')) built in $(elapsed "$t0") s$([ "$old" = "$new" ] && echo ' (unchanged)')"
}

mkdir -p "$ENGINEDECK_CACHE"
# One provisioner at a time per machine: two would start two daemons or build the base image twice.
exec 9>"$ENGINEDECK_CACHE/.docker.lock"
flock 9
install_packages
start_daemon
build_base
build_sim
if [ -n "${STALE_BASE:-}" ]; then docker rmi "$STALE_BASE" >/dev/null 2>&1 || true; fi
printf 'export ENGINEDECK_SIM_IMAGE=%q\n' "$SIM_TAG"
printf 'export ENGINEDECK_BASE_IMAGE=%q\n' "$BASE_TAG"
