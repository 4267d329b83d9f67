#!/usr/bin/env bash
# Accuracy studies on the H200 (issues 6 and 13): the layer over MXFP4 caches vs the fp64 oracle at full size, with
# the MXFP4 and the fp8 index-K, fp8/bf16 references. Called by scripts/gpu_run.sh as `bash 50-accuracy.sh $OUT` with
# atom_mxfp4 on PYTHONPATH; must finish in ~5 minutes.
# Leaves $OUT/accuracy_h200.md (every study's results.md) and $OUT/accuracy_h200.tar.gz (one folder per study:
# results.json, results.md, *.png). Re-render here with
#   atom-mxfp4 eval accuracy --from-results STUDY/results.json --out-dir docs/accuracy/...
# Knobs: ACC_LIMIT_S (default 330, all studies together), ACC_BACKEND (default: best available), ACC_STUDIES
# (replaces the studies below: "name=arguments" entries separated by ";").
set -u -o pipefail
OUT_ROOT=${1:?usage: 50-accuracy.sh OUT}
RES="$OUT_ROOT/accuracy_h200"
rm -rf "$RES" && mkdir -p "$RES"
PLOTS=""
python3 -c "import matplotlib" 2>/dev/null || { echo "[50-accuracy] matplotlib missing: no plots (re-render later)"; PLOTS="--no-plots"; }
BACKEND=""
[ -n "${ACC_BACKEND:-}" ] && BACKEND="--backend $ACC_BACKEND"
# The oracle is fp64 on the host CPU: its cost grows with N, so 128K runs last and without emulated rows.
# main: every family, ScaleMode.MSE (the default), both index-K dtypes (the study's default --index-k-dtypes);
# near_dup: the family built against a 4-bit scorer, at 32K and 128K.
COMMON="--queries 64 --seeds 0,1,2 --scale-modes mse --no-emulate"
STUDIES=${ACC_STUDIES:-"main=--tokens 8192 --long-tokens 32768,131072 --dense $COMMON;near-dup-32768=--families near_dup --tokens 32768 $COMMON;near-dup-131072=--families near_dup --tokens 131072 $COMMON"}
START=$SECONDS
run_study() {  # $1: folder, $2: arguments, $3: extra arguments (a backend)
  local left=$(( ${ACC_LIMIT_S:-330} - (SECONDS - START) ))
  [ "$left" -gt 20 ] || { echo "[50-accuracy] no time left for $1"; return 124; }
  echo "[50-accuracy] $1: eval accuracy $2 $3 ($left s left)"
  # shellcheck disable=SC2086  # the arguments are word lists
  timeout "$left" python3 -m atom_mxfp4.evals.cli eval accuracy $2 --device cuda $3 $PLOTS \
    --out-dir "$RES/$1" 2>&1 | tail -40
  return "${PIPESTATUS[0]}"
}
status=0
: > "$OUT_ROOT/accuracy_h200.md"
IFS=';' read -r -a entries <<< "$STUDIES"
for entry in "${entries[@]}"; do
  name=${entry%%=*}
  args=${entry#*=}
  run_study "$name" "$args" "$BACKEND"
  rc=$?
  if [ "$rc" -ne 0 ] && [ -z "$BACKEND" ] && [ ! -f "$RES/$name/results.json" ]; then
    # the study is about the cache format, not one backend: when the default (Triton) backend fails before any
    # case finished, say so and measure with the torch backend on the GPU (results.md names the backend)
    echo "[50-accuracy] $name: default backend failed (exit $rc, see above): rerunning with --backend torch"
    run_study "$name" "$args" "--backend torch"
    rc=$?
  fi
  [ "$rc" -ne 0 ] && status=$rc
  if [ -f "$RES/$name/results.md" ]; then
    { echo "# study $name"; cat "$RES/$name/results.md"; echo; } >> "$OUT_ROOT/accuracy_h200.md"
  elif [ -f "$RES/$name/results.json" ]; then
    echo "[50-accuracy] $name cut short: results.json holds the finished cases"
  fi
done
tar -czf "$OUT_ROOT/accuracy_h200.tar.gz" -C "$RES" . && rm -rf "$RES"
exit $status
