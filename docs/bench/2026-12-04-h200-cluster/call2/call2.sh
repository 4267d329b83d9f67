#!/bin/bash
# call 2 (2026-12-04, late): the cluster policy fitted to call 1 (4 / 8 / 16 splits while rows x splits <= SMs // 2;
# 16 clustered splits for rows of <= 64 pages). GPU tests of the paths it changed, the sweep around the new 16-split
# rule, compute-sanitizer memcheck (cluster and L2 merges), the dense rows (hopper_bench --quick) and the sparse
# attend against SGLang's kernels.
ROOT=$PWD
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
export PYTHONPATH=/tmp/atom_pkg PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt
timeout 110 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py tests/gpu/test_layer_gpu.py \
  -k "cluster or graph or attend or non_finite or layer" -p no:cacheprovider > $R/gpu_tests.txt 2>&1
echo "tests rc $?" >> $R/gpu_tests.txt; tail -4 $R/gpu_tests.txt
timeout 100 python3 -P evals/bench/hopper_bench.py --split-sweep --one-page-splits --clusters \
  --sweep-shapes 1x64x8192,2x64x8192,4x64x8192,1x32x4096,1x48x6144,2x16x1998 --out $R/sweep > $R/sweep.log 2>&1
echo "sweep rc $?"; cut -c1-330 $R/sweep.log
timeout 170 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -P evals/bench/sanitize_cases.py \
  > $R/memcheck.txt 2>&1
echo "memcheck rc $?"; tail -3 $R/memcheck.txt
timeout 100 python3 -P evals/bench/hopper_bench.py --quick --out $R/hopper > $R/hopper.log 2>&1
echo "hopper_bench rc $?"; tail -9 $R/hopper.log
timeout 90 python3 -P evals/bench/run_bench.py --sglang-root out/sgl --only sparse --out $R/sparse > $R/sparse.log 2>&1
echo "sparse rc $?"; grep -A12 "^## " $R/sparse/bench.md | head -16
cd $OUT && tar czf results.tgz r && rm -rf r
