#!/bin/bash
# call 5 (2026-12-04, late): grouped clusters (G x 16 splits of a row as G clusters of 16, their merged head slices
# met through L2). GPU tests of the cluster paths, the forced A/B on the shapes whose policy split count is 32-64,
# compute-sanitizer memcheck (a grouped case added).
ROOT=$PWD
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
export PYTHONPATH=/tmp/atom_pkg PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt
timeout 130 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py -p no:cacheprovider \
  -k "cluster or graph or non_finite or attend" > $R/gpu_tests.txt 2>&1
echo "tests rc $?" >> $R/gpu_tests.txt; tail -4 $R/gpu_tests.txt
timeout 110 python3 -P evals/bench/hopper_bench.py --split-sweep --one-page-splits --clusters \
  --sweep-shapes 1x64x8192,1x32x4096,1x128x16384,2x32x4096 --out $R/sweep > $R/sweep.log 2>&1
echo "sweep rc $?"; cut -c1-700 $R/sweep.log
timeout 170 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -P evals/bench/sanitize_cases.py \
  > $R/memcheck.txt 2>&1
echo "memcheck rc $?"; tail -3 $R/memcheck.txt
cd $OUT && tar czf results.tgz r && rm -rf r
