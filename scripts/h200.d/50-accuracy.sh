#!/usr/bin/env bash
# Accuracy study on the H200 (issue 6): the layer over MXFP4 caches vs the fp64 oracle at full size, every
# ScaleMode, fp8/bf16 references. Called by scripts/h200.sh as `bash 50-accuracy.sh $OUT` with atom_mxfp4 on
# PYTHONPATH (python3 -P: the repo root must not shadow that package shim); must finish in ~4 minutes. Leaves two files: $OUT/accuracy_h200.md and $OUT/accuracy_h200.tar.gz
# (results.json, results.md, *.png). Re-render here with
#   atom-mxfp4 eval accuracy --from-results results.json --out-dir docs/accuracy/h200
# Knobs: ACC_LIMIT_S (default 225), ACC_BACKEND (default: best available), ACC_ARGS (replaces the sizes below).
set -u -o pipefail
OUT_ROOT=${1:?usage: 50-accuracy.sh OUT}
RES="$OUT_ROOT/accuracy_h200"
rm -rf "$RES" && mkdir -p "$RES"
PLOTS=""
python3 -P -c "import matplotlib" 2>/dev/null || { echo "[50-accuracy] matplotlib missing: no plots (re-render later)"; PLOTS="--no-plots"; }
BACKEND=""
[ -n "${ACC_BACKEND:-}" ] && BACKEND="--backend $ACC_BACKEND"
# the oracle is fp64 on the host CPU: its cost grows with N, so 128K runs last and without emulated rows
ARGS=${ACC_ARGS:-"--tokens 8192 --long-tokens 32768,131072 --queries 64 --seeds 0,1,2 --dense --no-emulate"}
START=$SECONDS
run_study() {  # $1: extra arguments (a backend); the time left of ACC_LIMIT_S
  local left=$(( ${ACC_LIMIT_S:-225} - (SECONDS - START) ))
  [ "$left" -gt 20 ] || { echo "[50-accuracy] no time left"; return 124; }
  timeout "$left" python3 -P -m atom_mxfp4.evals.cli eval accuracy $ARGS --device cuda $1 $PLOTS \
    --out-dir "$RES" 2>&1 | tail -60
  return "${PIPESTATUS[0]}"
}
run_study "$BACKEND"
status=$?
if [ "$status" -ne 0 ] && [ -z "$BACKEND" ] && [ ! -f "$RES/results.json" ]; then
  # the study is about the cache format, not one backend: when the default (Triton) backend fails before any
  # case finished, say so and measure with the torch backend on the GPU (results.md names the backend)
  echo "[50-accuracy] default backend failed (exit $status, see above): rerunning with --backend torch"
  run_study "--backend torch"
  status=$?
fi
[ -f "$RES/results.md" ] && cp "$RES/results.md" "$OUT_ROOT/accuracy_h200.md"
[ -f "$RES/results.json" ] && [ ! -f "$RES/results.md" ] && echo "[50-accuracy] cut short: results.json holds the finished cases"
tar -czf "$OUT_ROOT/accuracy_h200.tar.gz" -C "$RES" . && rm -rf "$RES"
exit $status
