#!/usr/bin/env bash
# Collect every wheel tools/gpu_check.sh installs on a GPU machine that has no network:
#
#     tools/gpu_wheels.sh WHEEL_DIR [PYTHON]
#
# Run it on a machine with network, with PYTHON (default python3) of the same version as the GPU
# machine's Python: the wheels are that interpreter's (its cpXY tag and platform).  WHEEL_DIR gets
#
# * a pycuda wheel: one already in WHEEL_DIR for this Python is kept, else $PYCUDA_WHEEL is copied,
#   else tools/build_pycuda_wheel.sh builds one (a few minutes; no GPU needed);
# * a wheel of dynograph built from this source tree (its tracked and untracked, not ignored,
#   files, copied to a temporary folder so the tree gets no build output);
# * dynograph's dependencies with the cuda and examples extras (the nvidia-cuda-nvrtc wheel among
#   them), pytest and pytest-xdist, at the versions constraints.txt pins, and pip, setuptools
#   and wheel (the venv's pip, and building this source tree where the dynograph wheel is left
#   out): binary wheels only, so nothing is compiled on the GPU machine.
#
# Copy WHEEL_DIR and this source tree to the GPU machine, then run tools/gpu_check.sh WHEEL_DIR.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: $0 WHEEL_DIR [PYTHON]" >&2
    exit 2
fi
OUT=$(realpath -m "$1")
PY=${2:-python3}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$OUT"
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-wheels.XXXXXX")
trap 'rm -rf "$work"' EXIT

tag=$("$PY" -c 'import sys; assert sys.version_info >= (3, 10), "Python 3.10 or later"; print("cp%d%d" % sys.version_info[:2])')
echo "wheels for $tag ($("$PY" -c 'import sys; print(sys.executable)')) in $OUT" >&2

# --- pycuda ------------------------------------------------------------------------------------
pycuda=$(ls "$OUT"/pycuda-*-"$tag"-"$tag"-*.whl 2>/dev/null | tail -n 1 || true)
if [[ -n "$pycuda" ]]; then
    echo "keeping $(basename "$pycuda")" >&2
elif [[ -n "${PYCUDA_WHEEL:-}" ]]; then
    [[ "$(basename "$PYCUDA_WHEEL")" == *-"$tag"-* ]] || { echo "$0: $PYCUDA_WHEEL is not for $tag" >&2; exit 1; }
    cp "$PYCUDA_WHEEL" "$OUT/"
    pycuda=$OUT/$(basename "$PYCUDA_WHEEL")
else
    pycuda=$("$ROOT/tools/build_pycuda_wheel.sh" "$OUT" "$PY" | tail -n 1)
fi
pycuda_version=$(basename "$pycuda" | cut -d- -f2)

# --- dynograph -----------------------------------------------------------------------------------
mkdir -p "$work/src"
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$ROOT" ls-files -z --cached --others --exclude-standard \
        | (cd "$ROOT" && xargs -0 sh -c 'for f; do if [ -f "$f" ]; then printf "%s\0" "$f"; fi; done' _) \
        | (cd "$ROOT" && tar --null -T - -cf -) | tar -xf - -C "$work/src"
else
    (cd "$ROOT" && tar --exclude=.git --exclude='.*venv*' --exclude=build -cf - .) | tar -xf - -C "$work/src"
fi
rm -f "$OUT"/dynograph-*.whl
"$PY" -m pip wheel --quiet --no-deps -w "$OUT" "$work/src" >&2
dynograph=$(ls "$OUT"/dynograph-*.whl | tail -n 1)
echo "built $(basename "$dynograph")" >&2

# --- everything they need ----------------------------------------------------------------------
# dynograph's requirements with the cuda and examples extras, read from the wheel's metadata
# (resolving "dynograph" itself against the index could pick another project of that name)
"$PY" - "$dynograph" > "$work/requirements.txt" <<'PYEOF'
import re
import sys
import zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    text = z.read(meta).decode()
for line in text.splitlines():
    if not line.startswith("Requires-Dist:"):
        continue
    requirement, _, marker = line.split(":", 1)[1].strip().partition(";")
    extra = re.search(r"extra\s*==\s*['\"]([\w-]+)['\"]", marker)
    if extra is None or extra.group(1) in ("cuda", "examples"):
        print(requirement.strip())
PYEOF
echo "pycuda==$pycuda_version" >> "$work/requirements.txt"
printf '%s\n' pytest pytest-xdist pip "setuptools>=68" wheel >> "$work/requirements.txt"
"$PY" -m pip download --quiet --only-binary=:all: -d "$OUT" --find-links "$OUT" \
    -c "$ROOT/constraints.txt" -r "$work/requirements.txt" >&2
echo "$(ls "$OUT"/*.whl | wc -l) wheels in $OUT" >&2
