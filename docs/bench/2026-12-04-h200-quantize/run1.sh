#!/usr/bin/env bash
# call 1: quantizers without fp64 conversions: GPU bit-exactness tests, same-run A/B vs fd3043a, sweep, run_bench write, ncu
set -u
ROOT=$(pwd); R=$OUT
export PYTHONUNBUFFERED=1 PYTHONSAFEPATH=1
cp out/s8/old/_old_*.py kernels/triton/
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
export PYTHONPATH=/tmp/atom_pkg
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 120 python3 -P -m pytest -q tests/gpu/test_triton_gpu.py tests/test_triton_ops.py -k "write or quant or fp8" -p no:cacheprovider 2>&1 | tail -4 | tee $R/gpu_tests_write.txt
timeout 150 python3 -P out/s8/write_ab.py $R 2>&1 | tee $R/write_ab.txt
G="4,2,2,56;4,2,2,64,e;4,2,2;8,2,4,56;8,2,4;8,2,4,e"
timeout 90 python3 -P evals/bench/sweep_write.py --tokens 8192,32768 --configs "$G" --json $R/sweep.json 2>&1 | tee $R/sweep.txt | tail -30
mkdir -p $R/bench_write && timeout 60 python3 -P evals/bench/run_bench.py --only write --out $R/bench_write 2>&1 | grep -E "write T=|copy"
timeout 80 ncu --clock-control none --set full -k regex:_qknorm_rope_write_kernel python3 -P docs/bench/2026-12-03-h200-early/ncu_prof.py > $R/ncu.txt 2>&1; echo ncu rc $?
grep -E "Duration|DRAM Throughput|Issue Slots Busy|Registers Per|Executed Instructions  |Achieved Occupancy" $R/ncu.txt | head -40
