#!/bin/bash
# call 6 (2026-12-04, late): the split policy fitted to call 5 (the most clustered splits, 16-64, within half the
# SMs). The GPU tests its choices touch (graph replay of the policy's grouped launches, the cluster tests), then the
# dense rows (hopper_bench --quick: 1 x 8192 now 64 one-page splits over 4 clusters of 16).
ROOT=$PWD
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
export PYTHONPATH=/tmp/atom_pkg PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt
timeout 90 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py -p no:cacheprovider \
  -k "graph or cluster_merge" > $R/gpu_tests.txt 2>&1
echo "tests rc $?" >> $R/gpu_tests.txt; tail -4 $R/gpu_tests.txt
timeout 100 python3 -P evals/bench/hopper_bench.py --quick --out $R/hopper > $R/hopper.log 2>&1
echo "hopper_bench rc $?"; tail -9 $R/hopper.log
cd $OUT && tar czf results.tgz r && rm -rf r
