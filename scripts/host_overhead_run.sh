#!/usr/bin/env bash
# Issue 39 on the lent GPU: host time per call beside GPU time at this commit and at a baseline commit, in one call.
#   here:    mkdir -p .base && git archive BASE pyproject.toml atom_mxfp4 \
#              $(git ls-tree --name-only BASE kernels evals model_patches) | tar -x -C .base            (.base/ is ignored: .gitignore)
#   device:  OUT=... BASE_COMMIT=BASE bash scripts/host_overhead_run.sh          carry [".base"]
# 1. atom_mxfp4/evals/bench/host_overhead.py on the baseline, then on this tree (--compare: table, plot, ledger rows);
# 2. the GPU tests of the kernels whose launch path changed (tests/gpu), bits against the fp64 oracle / Triton;
# 3. atom_mxfp4/evals/bench/hopper_bench.py --quick on both trees (the kernels' GPU time unchanged), each its own.
# COMPARE=off: step 1 compares this tree against itself with op replay off (ATOM_MXFP4_OP_REPLAY=0, label
# new-op-replay-off; atom_mxfp4.op_replay) instead of the baseline, which is then neither installed nor run.
# ROUNDS=N: N rounds of both trees, alternating (a GPU-time A/B read across rounds). STEPS (default "host tests
# bench") picks the steps. Raw output stays in $OUT (host/, logs); ledger rows in
# $OUT/host.tar.gz (host/ledger_rows_<label>.csv).
set -u -o pipefail
ROOT=$(pwd)
: "${OUT:?OUT must name the results folder}"
mkdir -p "$OUT/host"
exec > >(tee -a "$OUT/host_overhead_run.log") 2>&1
export PYTHONUNBUFFERED=1
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo none)}  # the device copy's git metadata may be stale
echo "== host_overhead_run.sh $(date -u +%FT%TZ) commit $COMMIT base ${BASE_COMMIT:-?} sources $(bash scripts/sources_hash.sh)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
nproc; python3 -c "import platform; print(platform.processor() or platform.machine())"; lscpu | grep "Model name" || true

# this tree: the repo root holds the package; the baseline: installed from .base (whatever its layout)
NEW=$ROOT
COMPARE=${COMPARE:-base}
if [ "$COMPARE" = base ]; then
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --no-cache-dir \
    --target /tmp/pkg_base "$ROOT/.base" || exit 2
fi
BENCH=atom_mxfp4/evals/bench
STATUS=0
STEPS=" ${STEPS:-host tests bench} "
has() { [ "${STEPS/ $1 /}" != "$STEPS" ]; }

# ---- 1. host time per call, baseline then this tree
if has host; then
if [ "$COMPARE" = base ]; then
  PYTHONPATH=/tmp/pkg_base timeout ${T_HOST:-200} python3 $BENCH/host_overhead.py --out "$OUT/host" --label base \
    --commit "${BASE_COMMIT:-base}" || STATUS=1
  PEER=base
else  # the same tree, op replay off (the same call, the same host)
  ATOM_MXFP4_OP_REPLAY=0 PYTHONPATH=$NEW timeout ${T_HOST:-200} python3 $BENCH/host_overhead.py --out "$OUT/host" \
    --label new-op-replay-off --commit "$COMMIT" || STATUS=1
  PEER=new-op-replay-off
fi
PYTHONPATH=$NEW timeout ${T_HOST:-200} python3 $BENCH/host_overhead.py --out "$OUT/host" --label new \
  --commit "$COMMIT" --compare "$OUT/host/$PEER.json" ${HOST_PROFILE:+--profile "$OUT/host"} || STATUS=1
  [ -n "${HOST_PROFILE:-}" ] && tar -czf "$OUT/host_profiles.tar.gz" -C "$OUT/host" $(cd "$OUT/host" && ls profile_*.txt) \
    && rm -f "$OUT"/host/profile_*.txt
  # ROUNDS=N (COMPARE=base): N-1 more rounds of both trees, alternating (labels base-R / new-R, each new-R compared
  # with its base-R): single-launch graph replays of 10-20 us moved by up to 7 us between trees in one round (H100,
  # e20e751 against fbb7fbe), so a GPU-time difference is read across rounds
  if [ "$COMPARE" = base ]; then
    for r in $(seq 2 "${ROUNDS:-1}"); do
      PYTHONPATH=/tmp/pkg_base timeout ${T_HOST:-200} python3 $BENCH/host_overhead.py --out "$OUT/host" \
        --label base-$r --commit "${BASE_COMMIT:-base}" || STATUS=1
      PYTHONPATH=$NEW timeout ${T_HOST:-200} python3 $BENCH/host_overhead.py --out "$OUT/host" --label new-$r \
        --commit "$COMMIT" --compare "$OUT/host/base-$r.json" || STATUS=1
    done
  fi
  if [ -n "${PLAIN:-}" ]; then  # this tree through Triton's own launch path (atom_mxfp4.launch.PLAIN_ENV)
    ATOM_MXFP4_PLAIN_LAUNCH=1 PYTHONPATH=$NEW timeout ${T_HOST:-200} python3 $BENCH/host_overhead.py \
      --out "$OUT/host" --label new-plain --commit "$COMMIT" --compare "$OUT/host/$PEER.json" || STATUS=1
  fi
fi

# ---- 2. the GPU tests (bits and the oracle), this tree
if has tests; then
  (PYTHONPATH=$NEW timeout ${T_GPU_TESTS:-240} python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider \
    2>&1 | tail -25) || STATUS=1
fi

# ---- 3. the kernels' GPU time, both trees in the same call
if has bench; then
  for tree in base new; do
    path=$NEW script=$ROOT/$BENCH/hopper_bench.py
    [ $tree = base ] && path=/tmp/pkg_base script=$(ls "$ROOT"/.base/{atom_mxfp4/,}{atom_mxfp4/,}evals/bench/hopper_bench.py 2>/dev/null | head -1)
    (cd /tmp && PYTHONPATH=$path timeout ${T_BENCH:-150} python3 "$script" \
      --out "$OUT/bench_$tree" --quick 2>&1 | grep -v "^$" | tail -30) || STATUS=1
  done
  tar -czf "$OUT/bench.tar.gz" -C "$OUT" bench_base bench_new && rm -rf "$OUT/bench_base" "$OUT/bench_new"
fi
cp "$OUT"/host/*.md "$OUT/" 2>/dev/null; tar -czf "$OUT/host.tar.gz" -C "$OUT" host && rm -rf "$OUT/host"
echo "== done, status $STATUS"
exit $STATUS
