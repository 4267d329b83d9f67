#!/usr/bin/env bash
# The project's run on a lent NVIDIA GPU (H200 / H100). Bare machine in, tables + plots + logs out under $OUT.
#   usage (device tool, repo root):  OUT=... bash scripts/gpu_run.sh [quick|full]     carry: [".whl/serve"] (or [".whl"])
# 1. puts the repo root on PYTHONPATH (the package's folders are its import paths);
# 2. unpacks SGLang 0.5.23's MiniMax-M3 sparse kernels from the carried wheel (.whl/[serve/]sglang-0.5.23-*.whl);
# 3. pytest -m gpu (tests/gpu) and the CPU op tests compiled for the GPU (tests/test_triton_ops.py);
# 4. compute-sanitizer memcheck over one case of each Triton kernel;
# 5. the benchmarks (atom_mxfp4/evals/bench/run_bench.py): bench.md, bench.json, *.png; on sm_90 also atom_mxfp4/evals/bench/hopper_bench.py;
# 6. every scripts/gpu_run.d/*.sh in name order, each given $OUT (their own outputs go there).
# Results go to $OUT/triton/ (h200.log, bench.md, bench.json, *.png); only 8 files come back from $OUT, so when
# scripts/gpu_run.d/ holds steps, they are packed into $OUT/triton_h200.tar.gz (+ $OUT/triton_bench.md) at the end.
# Stage time limits (seconds) come from T_GPU_TESTS, T_CPU_TESTS, T_SANITIZER, T_BENCH, T_HOPPER_BENCH, H200_STEP_TIMEOUT;
# H200_SKIP_STEPS=1 leaves out step 6.
set -u -o pipefail
MODE=${1:-full}
ROOT=$(pwd)
: "${OUT:?OUT must name the results folder}"
RES="$OUT/triton"
rm -rf "$RES" && mkdir -p "$RES"
LOG="$RES/h200.log"
exec > >(tee -a "$LOG") 2>&1
export PYTHONUNBUFFERED=1
SOURCES=$(bash scripts/sources_hash.sh)  # what runs (the device copy's git metadata may be stale)
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo none)
echo "== gpu_run.sh $MODE $(date -u +%FT%TZ) commit $COMMIT sources $SOURCES"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv || true
python3 -c "import torch, triton, numpy; print('torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__, torch.cuda.get_device_name())"

# ---- 1. the package: the repo root holds it whole (the folders are the import paths)
export PYTHONPATH="$ROOT:${PYTHONPATH:-}"
python3 -c "import atom_mxfp4.kernels.triton as t; print('atom_mxfp4 triton backend from', t.__file__)" || exit 2

# ---- 2. SGLang peer kernels
SGL=/tmp/sgl
rm -rf "$SGL" && mkdir -p "$SGL"
WHEEL=$(ls "$ROOT"/.whl/sglang-0.5.23-*.whl "$ROOT"/.whl/serve/sglang-0.5.23-*.whl 2>/dev/null | head -1)
if [ -n "$WHEEL" ]; then cp "$WHEEL" "$SGL/wheel.whl"; PEER="--sglang-root $SGL"; else echo "no sglang wheel carried: peers skipped"; PEER=""; fi

# ---- 3. tests
STATUS=0
timeout ${T_GPU_TESTS:-150} python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider 2>&1 | tail -40 || STATUS=1
timeout ${T_CPU_TESTS:-70} python3 -m pytest -q tests/test_triton_ops.py -p no:cacheprovider 2>&1 | tail -15 || STATUS=1

# ---- 4. memcheck
if command -v compute-sanitizer >/dev/null; then
  timeout ${T_SANITIZER:-100} compute-sanitizer --tool memcheck --error-exitcode 3 python3 atom_mxfp4/evals/bench/sanitize_cases.py 2>&1 \
    | tail -25 || STATUS=1
else
  echo "compute-sanitizer not found: memcheck not run"
fi

# ---- 5. benchmarks
BENCH_ARGS="${H200_BENCH_ARGS:-}"  # e.g. --sweep
[ "$MODE" = quick ] && BENCH_ARGS="$BENCH_ARGS --quick"
timeout ${T_BENCH:-300} python3 atom_mxfp4/evals/bench/run_bench.py --out "$RES" $PEER $BENCH_ARGS 2>&1 | grep -v "^|" || STATUS=1
# the Hopper (Gluon) pa_decode against the Triton kernel (docs/hopper.md), when this GPU runs it
if python3 -c "import torch; from atom_mxfp4.kernels import hopper; raise SystemExit(hopper.usable(torch.device('cuda')) is not None)"; then
  timeout ${T_HOPPER_BENCH:-90} python3 atom_mxfp4/evals/bench/hopper_bench.py --out "$RES/hopper" 2>&1 | grep "^rows=" || STATUS=1
else
  echo "hopper backend not usable here: hopper_bench skipped"
fi

# ---- 6. other engineers' steps (H200_SKIP_STEPS=1: not in this call, e.g. to stay under the 10-minute call limit)
for step in "$ROOT"/scripts/gpu_run.d/*.sh; do
  [ "${H200_SKIP_STEPS:-0}" = 1 ] && { echo "== steps skipped (H200_SKIP_STEPS=1)"; break; }
  [ -e "$step" ] || continue
  echo "== $(basename "$step")"
  timeout "${H200_STEP_TIMEOUT:-600}" bash "$step" "$OUT" || echo "$(basename "$step") exited $?"
done

# few files may come back (8): when other steps ran, pack this script's results into one archive
if ls "$ROOT"/scripts/gpu_run.d/*.sh >/dev/null 2>&1; then
  tar -czf "$OUT/triton_h200.tar.gz" -C "$RES" . && cp "$RES/bench.md" "$OUT/triton_bench.md" && rm -rf "$RES"
fi
echo "== done, status $STATUS"
exit $STATUS
