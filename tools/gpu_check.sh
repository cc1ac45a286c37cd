#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU and no network, install dynograph and its CUDA
# dependencies into a fresh virtual environment from the wheels in WHEEL_DIR only, run the GPU
# tests and benchmarks within 8 minutes, and write one JSON report:
#
#     tools/gpu_wheels.sh WHEEL_DIR                     # first, on a machine with network
#     tools/gpu_check.sh WHEEL_DIR [OUT_JSON] [--tests GLOB,...] [--budget S] [--isolated]
#                                  [--run-without-gpu] [--keep]
#
# PYTHON picks the interpreter (default python3; 3.10 or later, and the version WHEEL_DIR's pycuda
# wheel was built for).  The stages, their limits and the report are described in
# tools/gpu_check.py and docs/cuda.md ("The GPU check").  Exit status: 0 every stage passed,
# 1 a stage failed, 2 bad arguments, 3 no usable GPU (the GPU stages say "skipped: <reason>").
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
if ! command -v "$PY" >/dev/null; then
    echo "$0: no $PY on PATH (set PYTHON)" >&2
    exit 2
fi
exec "$PY" "$ROOT/tools/gpu_check.py" "$@"
