#!/bin/bash
# call 4 (2026-12-04, late): the cluster merge at 8 warps per program (forced), beside 4 warps and the L2 merge, on
# the latency rows' shapes: 1 x 64 pages (1 x 8192), 1 x 32, and 8 x 16 (sparse batch 8: 128 programs, where the
# 4-warp cluster lost; an 8-warp program takes a whole SM, so a cluster of 16 spreads over 16 SMs).
ROOT=$PWD
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
export PYTHONPATH=/tmp/atom_pkg PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt
timeout 200 python3 -P evals/bench/hopper_bench.py --split-sweep --one-page-splits --clusters --warps 4 8 \
  --sweep-shapes 1x64x8192,8x16x1998,1x32x4096 --out $R/sweep > $R/sweep.log 2>&1
echo "sweep rc $?"; cut -c1-900 $R/sweep.log
cd $OUT && tar czf results.tgz r && rm -rf r
