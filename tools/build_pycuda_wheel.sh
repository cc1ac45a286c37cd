#!/usr/bin/env bash
# Build a pycuda wheel (pycuda publishes no binary wheels) for one Python, on a machine without a
# GPU or an NVIDIA driver:
#
#     tools/build_pycuda_wheel.sh OUT_DIR [PYTHON]
#
# * pycuda's source: $PYCUDA_SDIST (a .tar.gz), else pycuda==$PYCUDA_VERSION downloaded with pip.
# * CUDA's headers: $CUDA_INC_DIR (a folder holding cuda.h and cudaProfiler.h), else those of the
#   nvidia-cuda-runtime and nvidia-cuda-profiler-api wheels ($NVIDIA_WHEEL_DIR holding them, else
#   downloaded with pip), else the local CUDA toolkit's.
# * libcuda: pycuda's extension links against the driver library, which only a GPU machine has.
#   The link uses a stand-in built here from cuda.h's declarations (every driver function, each
#   an empty body) with the real library's soname, libcuda.so.1: the extension records that
#   name and the real driver satisfies it at run time.  The stand-in lives in a temporary folder
#   deleted on exit; it is never installed, never in the wheel, never on a library path, and the
#   script fails if the extension records a run path to it.
#
# Needs a C/C++ compiler and, for PYTHON, pip (the build itself runs in pip's isolated build
# environment: setuptools, wheel and numpy come from the package index).  CURAND is left out
# (pycuda.curandom would need libcurand); OpenGL interop is off.  Prints the wheel's path.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: $0 OUT_DIR [PYTHON]" >&2
    exit 2
fi
OUT=$(realpath -m "$1")
PY=${2:-python3}
PYCUDA_VERSION=${PYCUDA_VERSION:-2026.1}
NVIDIA_RUNTIME_VERSION=${NVIDIA_RUNTIME_VERSION:-13.5.37}
NVIDIA_PROFILER_VERSION=${NVIDIA_PROFILER_VERSION:-13.4.92}
CC=${CC:-cc}

mkdir -p "$OUT"
work=$(mktemp -d "${TMPDIR:-/tmp}/pycuda-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

# --- CUDA headers ------------------------------------------------------------------------------
find_header() {       # the folder holding cuda.h under $1, if any
    local h
    h=$(find "$1" -name cuda.h -path '*include*' -print -quit 2>/dev/null || true)
    [[ -n "$h" ]] && dirname "$h"
}
inc=${CUDA_INC_DIR:-}
if [[ -z "$inc" ]]; then
    # cuda.h is in the runtime's wheel, cudaProfiler.h (which pycuda includes too) in its own
    mkdir -p "$work/nvidia"
    for pkg in "nvidia_cuda_runtime nvidia-cuda-runtime==$NVIDIA_RUNTIME_VERSION" \
               "nvidia_cuda_profiler_api nvidia-cuda-profiler-api==$NVIDIA_PROFILER_VERSION"; do
        read -r file requirement <<< "$pkg"
        whl=""
        if [[ -n "${NVIDIA_WHEEL_DIR:-}" ]]; then
            whl=$(ls "$NVIDIA_WHEEL_DIR"/"$file"-*.whl 2>/dev/null | head -n 1 || true)
        fi
        if [[ -z "$whl" ]] && "$PY" -m pip download --quiet --no-deps -d "$work/nvidia" \
                "$requirement" >&2; then
            whl=$(ls "$work"/nvidia/"$file"-*.whl | head -n 1)
        fi
        [[ -n "$whl" ]] && "$PY" -m zipfile -e "$whl" "$work/nvidia/unpacked"
    done
    inc=$(find_header "$work/nvidia/unpacked" || true)
    if [[ -n "$inc" && ! -f "$inc/cudaProfiler.h" ]]; then
        inc=""          # half a set of headers: the toolkit's, if any, instead
    fi
fi
if [[ -z "$inc" ]] && command -v nvcc >/dev/null; then
    inc=$(find_header "$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")" || true)
fi
if [[ -z "$inc" || ! -f "$inc/cuda.h" ]]; then
    echo "$0: no cuda.h found (set CUDA_INC_DIR, NVIDIA_WHEEL_DIR, or install CUDA's toolkit)" >&2
    exit 1
fi
echo "CUDA headers: $inc" >&2

# --- the link-time stand-in for libcuda --------------------------------------------------------
# every driver function cuda.h declares, under the versioned names its macros map to (cuCtxCreate
# is cuCtxCreate_v4...): those are the symbols the extension will ask the real driver for
mkdir -p "$work/stub"
printf '#include <cuda.h>\n#include <cudaProfiler.h>\n' | "$CC" -E -P -I"$inc" -x c - > "$work/stub/cuda.i"
"$PY" - "$work/stub/cuda.i" "$work/stub/libcuda.c" <<'PYEOF'
import re
import sys
text = open(sys.argv[1]).read()
names = sorted(set(re.findall(r"\b(cu[A-Z]\w*)\s*\(", text)))
if len(names) < 100:
    sys.exit(f"only {len(names)} driver functions found in cuda.h")
with open(sys.argv[2], "w") as f:
    f.write("/* link-time stand-in for libcuda.so.1: never loaded */\n")
    f.writelines(f"void {n}(void) {{}}\n" for n in names)
print(f"libcuda stand-in: {len(names)} functions", file=sys.stderr)
PYEOF
"$CC" -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$work/stub/libcuda.so" "$work/stub/libcuda.c"

# --- pycuda's source ---------------------------------------------------------------------------
sdist=${PYCUDA_SDIST:-}
if [[ -z "$sdist" ]]; then
    "$PY" -m pip download --quiet --no-deps --no-binary pycuda -d "$work/sdist" \
        "pycuda==$PYCUDA_VERSION" >&2
    sdist=$(ls "$work"/sdist/pycuda-*.tar.gz | head -n 1)
fi
mkdir -p "$work/src"
tar -xzf "$sdist" -C "$work/src"
src=$(ls -d "$work"/src/pycuda-*/ | head -n 1)

# --- configure and build -----------------------------------------------------------------------
(cd "$src" && "$PY" configure.py --cuda-root="$(dirname "$inc")" --cuda-inc-dir="$inc" \
    --cudadrv-lib-dir="$work/stub" --no-cuda-enable-curand >&2)
"$PY" -m pip wheel --quiet --no-deps -w "$work/wheel" "$src" >&2
wheel=$(ls "$work"/wheel/pycuda-*.whl | head -n 1)

# the wheel must not point at (or carry) the stand-in
mkdir -p "$work/check"
"$PY" -m zipfile -e "$wheel" "$work/check"
if find "$work/check" -name 'libcuda*' | grep -q .; then
    echo "$0: the wheel carries a libcuda" >&2
    exit 1
fi
for so in "$work"/check/pycuda/*.so; do
    if command -v readelf >/dev/null && readelf -d "$so" | grep -E 'RPATH|RUNPATH' | grep -q "$work"; then
        echo "$0: $so records a run path to the libcuda stand-in" >&2
        exit 1
    fi
done
cp "$wheel" "$OUT/"
echo "$OUT/$(basename "$wheel")"
