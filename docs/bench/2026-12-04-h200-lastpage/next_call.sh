#!/bin/bash
# Prepared 2026-12-04 (last-page session), NOT RUN (the session began with 203 s of device time). Two calls for the
# next session with a device, from the repo root with lastpage.patch applied to the working tree and main's kernels
# carried in out/main_kernel/ (README.md here says how):
#   bash docs/bench/2026-12-04-h200-lastpage/next_call.sh bench   # ~480 s: the A/B, the clamp test on main's kernel
#   bash docs/bench/2026-12-04-h200-lastpage/next_call.sh tests   # ~500 s: the Hopper GPU tests, memcheck (patched)
# bench: main / new / main / new through hopper_bench --quick (the dense rows and 1 x 8192), run_bench --only sparse
# new / main (SGLang 0.5.23's kernels in the same run: out/sgl), then d9b66a4's clamp test on main's kernel.
. scripts/device_pkg.sh
[ -f out/main_kernel/pa_decode.py ] && [ -f out/main_kernel/index_topk.py ] || { echo "carry out/main_kernel"; exit 2; }
grep -q "def _weights" kernels/hopper/pa_decode.py || { echo "apply lastpage.patch to the tree first"; exit 2; }
atom_pkg /tmp/atom_new && atom_pkg /tmp/atom_main out/main_kernel || exit 2
export PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt; bash scripts/sources_hash.sh > $R/sources.txt 2>&1
if [ "$1" = bench ]; then
  for v in main new main new; do
    n=$((${n:-0}+1))
    PYTHONPATH=/tmp/atom_$v timeout 75 python3 -P evals/bench/hopper_bench.py --quick --out $R/hopper_${n}_$v \
      > $R/hopper_${n}_$v.log 2>&1
    echo "hopper $n $v rc $?"; grep "^| [0-9]" $R/hopper_${n}_$v/hopper_bench.md | cut -d'|' -f2,3,8,9
  done
  for v in new main; do
    n=$((${n:-0}+1))
    PYTHONPATH=/tmp/atom_$v timeout 100 python3 -P evals/bench/run_bench.py --sglang-root out/sgl --only sparse \
      --out $R/sparse_${n}_$v > $R/sparse_${n}_$v.log 2>&1
    echo "sparse $n $v rc $?"; grep "^| 1 \|^| 8 \|^| 64 \|^| 512 " $R/sparse_${n}_$v/bench.md | cut -d'|' -f2,4,5,6
  done
  PYTHONPATH=/tmp/atom_main timeout 60 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py \
    -k "unchecked_context_past_the_table" -p no:cacheprovider > $R/gpu_test_clamp_main.txt 2>&1
  echo "clamp test on main rc $?"; tail -n 1 $R/gpu_test_clamp_main.txt
elif [ "$1" = tests ]; then
  PYTHONPATH=/tmp/atom_new timeout 280 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py \
    tests/gpu/test_hopper_index_gpu.py -p no:cacheprovider > $R/gpu_tests_new.txt 2>&1
  echo "tests rc $?" >> $R/gpu_tests_new.txt; tail -n 3 $R/gpu_tests_new.txt
  PYTHONPATH=/tmp/atom_new timeout 180 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -P \
    evals/bench/sanitize_cases.py > $R/memcheck.txt 2>&1
  echo "memcheck rc $?"; tail -n 2 $R/memcheck.txt
else
  echo "usage: next_call.sh bench|tests"; exit 2
fi
cd $OUT && tar czf results.tgz r && rm -rf r
