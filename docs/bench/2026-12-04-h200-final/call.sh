#!/bin/bash
# 2026-12-04 (final session of issue 14), from the repo root on the device:
#   bash docs/bench/2026-12-04-h200-final/call.sh bench   carry ["out/sgl"] (out/sgl/wheel.whl = SGLang 0.5.23's wheel)
#       every issue-14 row in one call on HEAD: hopper_bench --quick (dense rows, same-run copy), then run_bench whole
#       (sparse attend, indexer, dense, fused write against SGLang 0.5.23's kernels and the copy bandwidth)
#   bash docs/bench/2026-12-04-h200-final/call.sh agree   carry [".whl/serve"]
#       the agreement servers alone (SERVE_DEFAULT=0): mxfp4 (both index-K dtypes), fp8_e4m3 and bf16 KV on the same
#       weights; the baselines compile SGLang's Triton kernels at their first requests (~200 s)
#   bash docs/bench/2026-12-04-h200-final/call.sh tests   the contract, op, Triton, layer and Hopper-index tests on the
#       GPU (420 s: call 5 ran them with 170 s, after test_hopper_gpu.py's 98 passed, and was cut at 144 tests; the
#       Hopper tests are left out since) and compute-sanitizer memcheck
. scripts/device_pkg.sh
atom_pkg /tmp/atom_new || exit 2
export PYTHONSAFEPATH=1 PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt; bash scripts/sources_hash.sh > $R/sources.txt 2>&1
if [ "$1" = bench ]; then
  [ -f out/sgl/wheel.whl ] || { echo "carry out/sgl"; exit 2; }
  PYTHONPATH=/tmp/atom_new timeout 80 python3 -P evals/bench/hopper_bench.py --quick --out $R/hopper > $R/hopper.log 2>&1
  echo "hopper_bench rc $?"; grep "^| [0-9]" $R/hopper/hopper_bench.md | cut -d'|' -f2,3,8,9
  PYTHONPATH=/tmp/atom_new timeout 420 python3 -P evals/bench/run_bench.py --sglang-root out/sgl --out $R/bench \
    > $R/bench.log 2>&1
  echo "run_bench rc $?"; tail -n 3 $R/bench.log
elif [ "$1" = agree ]; then
  SERVE_DEFAULT=0 OUT=$R timeout 480 bash scripts/h200_serve.sh serve > $R/serve_stdout.txt 2>&1
  echo "serve rc $?"; grep "serve_check\]\|agreement\|STATUS\|rc" $R/serve_stdout.txt | cut -c1-220 | tail -n 20
  ls $R/serve* 2>/dev/null
elif [ "$1" = tests ]; then
  PYTHONPATH=/tmp/atom_new timeout 420 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_triton_gpu.py \
    tests/gpu/test_layer_gpu.py tests/gpu/test_hopper_index_gpu.py tests/test_contracts_decode.py \
    tests/test_contracts_index.py tests/test_contracts_write.py tests/test_triton_ops.py -p no:cacheprovider \
    > $R/gpu_tests_other.txt 2>&1
  echo "tests rc $?" >> $R/gpu_tests_other.txt; tail -n 2 $R/gpu_tests_other.txt
  PYTHONPATH=/tmp/atom_new timeout 130 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -P \
    evals/bench/sanitize_cases.py > $R/memcheck.txt 2>&1
  echo "memcheck rc $?"; tail -n 2 $R/memcheck.txt
else
  echo "usage: call.sh bench|agree|tests"; exit 2
fi
cd $OUT && tar czf results.tgz r && rm -rf r
