#!/usr/bin/env bash
# Run the prepared GPU check (scripts/gpu_check.py) on a machine with an NVIDIA GPU.
# Uses $PYTHON, else the project's .venv, else python3. Prints nvidia-smi's view first, to compare.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
if ! "$PY" -c "import pynvml, psutil" >/dev/null 2>&1; then
  echo "gpu_check: $PY lacks nvidia-ml-py/psutil: $PY -m pip install nvidia-ml-py psutil" >&2
  exit 2
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total,utilization.gpu,power.draw,temperature.gpu \
    --format=csv || true
else
  echo "(nvidia-smi not found)"
fi
exec "$PY" scripts/gpu_check.py "$@"
