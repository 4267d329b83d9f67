#!/usr/bin/env bash
# Issue 39 on the lent GPU: host time per call beside GPU time at this commit and at a baseline commit, in one call.
#   here:    mkdir -p .base && git archive BASE atom_mxfp4 kernels model_patches evals scripts tests pyproject.toml \
#              | tar -x -C .base            (.base/ is ignored: .git/info/exclude)
#   device:  OUT=... BASE_COMMIT=BASE bash scripts/host_overhead_run.sh          carry [".base"]
# 1. evals/bench/host_overhead.py on the baseline, then on this tree (--compare: the table, plot and ledger rows);
# 2. the GPU tests of the kernels whose launch path changed (tests/gpu), bits against the fp64 oracle / Triton;
# 3. evals/bench/hopper_bench.py --quick on both trees (the kernels' GPU time unchanged), each tree's own script.
# STEPS (default "host tests bench") picks the steps. Raw output stays in $OUT (host/, logs); ledger rows in
# $OUT/host.tar.gz (host/ledger_rows_<label>.csv).
set -u -o pipefail
ROOT=$(pwd)
: "${OUT:?OUT must name the results folder}"
mkdir -p "$OUT/host"
exec > >(tee -a "$OUT/host_overhead_run.log") 2>&1
export PYTHONUNBUFFERED=1 PYTHONSAFEPATH=1
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo none)
echo "== host_overhead_run.sh $(date -u +%FT%TZ) commit $COMMIT base ${BASE_COMMIT:-?} sources $(bash scripts/sources_hash.sh)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
nproc; python3 -c "import platform; print(platform.processor() or platform.machine())"; lscpu | grep "Model name" || true

. scripts/device_pkg.sh
atom_pkg /tmp/pkg_new || exit 2
(cd .base && atom_pkg /tmp/pkg_base) || exit 2
STATUS=0
STEPS=" ${STEPS:-host tests bench} "
has() { [ "${STEPS/ $1 /}" != "$STEPS" ]; }

# ---- 1. host time per call, baseline then this tree
if has host; then
PYTHONPATH=/tmp/pkg_base timeout ${T_HOST:-200} python3 evals/bench/host_overhead.py --out "$OUT/host" --label base \
  --commit "${BASE_COMMIT:-base}" || STATUS=1
PYTHONPATH=/tmp/pkg_new timeout ${T_HOST:-200} python3 evals/bench/host_overhead.py --out "$OUT/host" --label new \
  --commit "$COMMIT" --compare "$OUT/host/base.json" ${HOST_PROFILE:+--profile "$OUT/host"} || STATUS=1
  [ -n "${HOST_PROFILE:-}" ] && tar -czf "$OUT/host_profiles.tar.gz" -C "$OUT/host" $(cd "$OUT/host" && ls profile_*.txt) \
    && rm -f "$OUT"/host/profile_*.txt
  if [ -n "${PLAIN:-}" ]; then  # this tree with Triton's own launch path (atom_mxfp4.launch.PLAIN_ENV): the launcher's share
    ATOM_MXFP4_PLAIN_LAUNCH=1 PYTHONPATH=/tmp/pkg_new timeout ${T_HOST:-200} python3 evals/bench/host_overhead.py \
      --out "$OUT/host" --label new-plain --commit "$COMMIT" --compare "$OUT/host/base.json" || STATUS=1
  fi
fi

# ---- 2. the GPU tests (bits and the oracle), this tree
if has tests; then
  (PYTHONPATH=/tmp/pkg_new timeout ${T_GPU_TESTS:-240} python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider \
    2>&1 | tail -25) || STATUS=1
fi

# ---- 3. the kernels' GPU time, both trees in the same call
if has bench; then
  for tree in base new; do
    dir=$ROOT; [ $tree = base ] && dir=$ROOT/.base
    (cd "$dir" && PYTHONPATH=/tmp/pkg_$tree timeout ${T_BENCH:-150} python3 evals/bench/hopper_bench.py \
      --out "$OUT/bench_$tree" --quick 2>&1 | grep -v "^$" | tail -30) || STATUS=1
  done
  tar -czf "$OUT/bench.tar.gz" -C "$OUT" bench_base bench_new && rm -rf "$OUT/bench_base" "$OUT/bench_new"
fi
cp "$OUT"/host/*.md "$OUT/" 2>/dev/null; tar -czf "$OUT/host.tar.gz" -C "$OUT" host && rm -rf "$OUT/host"
echo "== done, status $STATUS"
exit $STATUS
