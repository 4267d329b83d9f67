#!/usr/bin/env bash
# FlyDSL backend (issue 5): flydsl 0.4.2 (the gfx950 kernel language, ships its own MLIR/LLVM) and ziglang
# (provides ld.lld, which the AMDGPU code-object link needs; no ROCm on CPU machines). Neither depends on torch
# (installed with --no-deps, so pip can never swap torch). Then the ld.lld shim in a stable place:
#   $ATOM_MXFP4_ROCM_SHIM (default /tmp/atom_mxfp4_rocm)/llvm/bin/ld.lld -> python -m ziglang ld.lld
# Nothing is exported: atom_mxfp4/kernels/flydsl/compile.py sets ROCM_PATH, FLYDSL_COMPILE_ONLY=1, ARCH=gfx950 only in the
# compiler subprocess (and recreates the shim itself when it is missing). Idempotent.
set -euo pipefail
PY=${PYTHON:-python}
FLYDSL_VERSION=0.4.2
ZIGLANG_VERSION=0.17.1
SHIM_DIR=${ATOM_MXFP4_ROCM_SHIM:-/tmp/atom_mxfp4_rocm}

if ! $PY - "$FLYDSL_VERSION" "$ZIGLANG_VERSION" <<'PYEOF' 2>/dev/null; then
import sys, importlib.metadata as md
assert md.version("flydsl") == sys.argv[1] and md.version("ziglang") == sys.argv[2]
PYEOF
  $PY -m pip install --quiet --no-deps "flydsl==$FLYDSL_VERSION" "ziglang==$ZIGLANG_VERSION"
fi

mkdir -p "$SHIM_DIR/llvm/bin"
shim="$SHIM_DIR/llvm/bin/ld.lld"
want=$(printf '#!/bin/sh\nexec "%s" -m ziglang ld.lld "$@"\n' "$($PY -c 'import sys; print(sys.executable)')")
if [ ! -x "$shim" ] || [ "$(cat "$shim")" != "$want" ]; then
  printf '%s\n' "$want" > "$shim.tmp.$$" && chmod +x "$shim.tmp.$$" && mv "$shim.tmp.$$" "$shim"
fi
"$shim" --version >/dev/null
$PY -c 'import flydsl, flydsl.compiler, ziglang; print("[20-flydsl] flydsl", flydsl.__version__, "+ ld.lld shim at '"$shim"'")'
