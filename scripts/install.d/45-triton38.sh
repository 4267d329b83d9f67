#!/usr/bin/env bash
# triton 3.8.0 beside the installed 3.6.0, in its own folder (.triton38/, first on PYTHONPATH only for the test that
# wants it): the Hopper backend accepts the 3.8 series (torch 2.14.1's pin, hence SGLang 0.5.23's), so
# tests/test_hopper_compile.py compiles its kernels under 3.8 too. --no-deps --target: never touches the
# environment's torch or triton. Idempotent (skipped when .triton38 already holds 3.8.0).
set -euo pipefail
PY=${PYTHON:-python}
DIR="$(cd "$(dirname "$0")/../.." && pwd)/.triton38"
VERSION=3.8.0
if [ "$(cat "$DIR/.version" 2>/dev/null)" != "$VERSION" ]; then
  rm -rf "$DIR"
  "$PY" -m pip install --quiet --no-deps --target "$DIR" "triton==$VERSION"
  echo "$VERSION" > "$DIR/.version"
fi
echo "[45-triton38] triton $VERSION in $DIR"
