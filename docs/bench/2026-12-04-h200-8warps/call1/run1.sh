#!/bin/bash
# session 2026-12-04 (later): the 8-warp program on the H200: GPU tests, A/B vs 4 warps, sparse vs SGLang
ROOT=$PWD
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
export PYTHONPATH=/tmp/atom_pkg PYTHONSAFEPATH=1
R=$OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/gpu.txt 2>&1
date -u > $R/date.txt
timeout 170 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py -p no:cacheprovider > $R/gpu_tests_hopper.txt 2>&1
echo "tests rc $?" >> $R/gpu_tests_hopper.txt; tail -3 $R/gpu_tests_hopper.txt
timeout 120 python3 -P evals/bench/hopper_bench.py --quick --warps 4 8 --out $R/hopper > $R/hopper.log 2>&1; echo "hopper_bench rc $?"
tail -12 $R/hopper.log
timeout 170 python3 -P evals/bench/hopper_bench.py --split-sweep --one-page-splits --warps 4 8 \
  --sweep-shapes 1x16x1998,8x16x1998,16x16x1998,32x16x1998,64x16x1998,128x16x1998,1x64x8192,16x64x8192,4x256x32768,1x1024x131072 \
  --out $R/sweep > $R/sweep.log 2>&1; echo "sweep rc $?"
mkdir -p /tmp/sgl && cp .whl/serve/sglang-0.5.23-*.whl /tmp/sgl/wheel.whl
timeout 120 python3 -P evals/bench/run_bench.py --sglang-root /tmp/sgl --only sparse --out $R/bench > $R/bench.log 2>&1; echo "run_bench rc $?"
tail -25 $R/bench.log
