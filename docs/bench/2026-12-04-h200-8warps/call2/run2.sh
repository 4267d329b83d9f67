#!/bin/bash
# call 2: the final policy (8 warps only for >= 8-page programs one per SM): every GPU test, dense table, sweep, peers
ROOT=$PWD
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
export PYTHONPATH=/tmp/atom_pkg PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R
date -u > $R/date.txt
timeout 280 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu tests/test_triton_ops.py -p no:cacheprovider > $R/gpu_tests.txt 2>&1
echo "tests rc $?" >> $R/gpu_tests.txt; tail -4 $R/gpu_tests.txt
timeout 100 python3 -P evals/bench/hopper_bench.py --quick --warps 4 8 --out $R/hopper > $R/hopper.log 2>&1; echo "hopper_bench rc $?"
tail -9 $R/hopper.log
timeout 90 python3 -P evals/bench/hopper_bench.py --split-sweep --warps 4 8 \
  --sweep-shapes 64x16x1998,16x64x8192,4x256x32768,2x512x65536,1x1024x131072 --out $R/sweep > $R/sweep.log 2>&1; echo "sweep rc $?"
mkdir -p /tmp/sgl && cp .whl/serve/sglang-0.5.23-*.whl /tmp/sgl/wheel.whl
timeout 150 python3 -P evals/bench/run_bench.py --sglang-root /tmp/sgl --only sparse,indexer --out $R/bench > $R/bench.log 2>&1; echo "run_bench rc $?"
grep -A12 "^## " $R/bench/bench.md | head -60
cd $OUT && tar czf results.tgz r && rm -rf r/hopper r/sweep r/bench/*.png
