#!/usr/bin/env bash
# The other triton series beside the installed 3.6.0, each in its own folder (first on PYTHONPATH only for the
# subprocess of the test that wants it; tests/_helpers.py triton_series_dir):
#   .triton38/ 3.8.0: torch 2.14.1's pin, hence SGLang 0.5.23's; the Hopper backend accepts it (its GPU tests ran);
#   .triton39/ 3.9.0: torch 2.15's pin; the Hopper backend accepts it (its GPU tests ran on 2026-12-05).
# tests/test_hopper_compile.py and tests/test_triton_compile.py compile the kernels for sm_90 under each.
# --no-deps --target: never touches the environment's torch or triton. Idempotent (a folder that already holds its
# version is kept).
set -euo pipefail
PY=${PYTHON:-python}
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
for VERSION in 3.8.0 3.9.0; do
  DIR="$ROOT/.triton$(echo "$VERSION" | cut -d. -f1,2 | tr -d .)"
  if [ "$(cat "$DIR/.version" 2>/dev/null)" != "$VERSION" ]; then
    rm -rf "$DIR"
    "$PY" -m pip install --quiet --no-deps --target "$DIR" "triton==$VERSION"
    echo "$VERSION" > "$DIR/.version"
  fi
  echo "[45-triton-series] triton $VERSION in $DIR"
done
