#!/bin/bash
# 2026-12-04 (clamp session): lengths past the table under check=False read as the whole table (Triton pa_decode and
# its merge, Hopper _row_source / _used_splits). From the repo root, main's Hopper kernels carried in out/main_kernel
# for the A/B (git show HEAD:kernels/hopper/{pa_decode,index_topk}.py, HEAD = the commit before the clamp):
#   bash docs/bench/2026-12-04-h200-clamp/call.sh tests   # every Hopper GPU test, Triton / contract / layer / index
#                                                          # GPU tests, compute-sanitizer memcheck
#   bash docs/bench/2026-12-04-h200-clamp/call.sh bench   # test_contracts_decode.py again (its strided query_scale
#       made on the device), hopper_bench --quick main / new / main / new, then a real SGLang server (h200_serve.sh
#       serve, SERVE_AGREEMENT=0; carry .whl/serve too)
. scripts/device_pkg.sh
atom_pkg /tmp/atom_new || exit 2
export PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt; bash scripts/sources_hash.sh > $R/sources.txt 2>&1
if [ "$1" = tests ]; then
  PYTHONPATH=/tmp/atom_new timeout 280 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py \
    -p no:cacheprovider > $R/gpu_tests_hopper.txt 2>&1
  echo "tests rc $?" >> $R/gpu_tests_hopper.txt; tail -n 3 $R/gpu_tests_hopper.txt
  PYTHONPATH=/tmp/atom_new timeout 120 python3 -P -m pytest -q -m "gpu or not gpu" tests/test_contracts_decode.py \
    tests/gpu/test_triton_gpu.py tests/gpu/test_layer_gpu.py tests/gpu/test_hopper_index_gpu.py -p no:cacheprovider \
    > $R/gpu_tests_other.txt 2>&1
  echo "tests rc $?" >> $R/gpu_tests_other.txt; tail -n 3 $R/gpu_tests_other.txt
  PYTHONPATH=/tmp/atom_new timeout 140 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -P \
    evals/bench/sanitize_cases.py > $R/memcheck.txt 2>&1
  echo "memcheck rc $?"; tail -n 2 $R/memcheck.txt
elif [ "$1" = bench ]; then
  [ -f out/main_kernel/pa_decode.py ] || { echo "carry out/main_kernel"; exit 2; }
  atom_pkg /tmp/atom_main out/main_kernel || exit 2
  PYTHONPATH=/tmp/atom_new timeout 60 python3 -P -m pytest -q -m "gpu or not gpu" tests/test_contracts_decode.py \
    -p no:cacheprovider > $R/gpu_tests_contracts.txt 2>&1
  echo "tests rc $?" >> $R/gpu_tests_contracts.txt; tail -n 2 $R/gpu_tests_contracts.txt
  for v in main new main new; do
    n=$((${n:-0}+1))
    PYTHONPATH=/tmp/atom_$v timeout 75 python3 -P evals/bench/hopper_bench.py --quick --out $R/hopper_${n}_$v \
      > $R/hopper_${n}_$v.log 2>&1
    echo "hopper $n $v rc $?"; grep "^| [0-9]" $R/hopper_${n}_$v/hopper_bench.md | cut -d'|' -f2,3,8,9
  done
  SERVE_AGREEMENT=0 OUT=$R timeout 380 bash scripts/h200_serve.sh serve > $R/serve_stdout.txt 2>&1
  echo "serve rc $?"; grep -i "passed\|failed\|ready\|error" $R/serve_stdout.txt | tail -n 12
else
  echo "usage: call.sh tests|bench"; exit 2
fi
cd $OUT && tar czf results.tgz r && rm -rf r
