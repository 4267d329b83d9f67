#!/bin/bash
# call 1 (2026-12-04, late): the split merge over a thread-block cluster. GPU tests first (the new cluster tests and
# every Hopper / layer test, the cluster path being the policy's at small batches), then the same-run A/B of the
# cluster merge against the L2 merge (forced, every split count a cluster takes), then the sparse attend against
# SGLang's kernels (the policy = the cluster merge; the L2 merge beside it in the same run).
ROOT=$PWD
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
export PYTHONPATH=/tmp/atom_pkg PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt; nvidia-smi -L >> $R/date.txt
timeout 60 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py -k "cluster or non_finite" \
  -p no:cacheprovider > $R/gpu_cluster_tests.txt 2>&1
echo "cluster tests rc $?" >> $R/gpu_cluster_tests.txt; tail -5 $R/gpu_cluster_tests.txt
timeout 200 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py tests/gpu/test_layer_gpu.py \
  -p no:cacheprovider -k "not cluster and not non_finite" > $R/gpu_tests.txt 2>&1
echo "tests rc $?" >> $R/gpu_tests.txt; tail -4 $R/gpu_tests.txt
timeout 130 python3 -P evals/bench/hopper_bench.py --split-sweep --one-page-splits --clusters \
  --sweep-shapes 1x16x1998,8x16x1998,16x16x1998,1x64x8192,16x64x8192,4x256x32768 --out $R/sweep > $R/sweep.log 2>&1
echo "sweep rc $?"; cat $R/sweep.log | cut -c1-400
timeout 110 python3 -P evals/bench/run_bench.py --sglang-root out/sgl --only sparse --out $R/sparse > $R/sparse.log 2>&1
echo "sparse rc $?"; grep -A12 "^## " $R/sparse/bench.md | head -16
cd $OUT && tar czf results.tgz r && rm -rf r
