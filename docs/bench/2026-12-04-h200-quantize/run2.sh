#!/usr/bin/env bash
# call 2: the final write (q-norm fma too): same-run A/B vs fd3043a, write GPU tests, run_bench write, a real SGLang server
set -u
ROOT=$(pwd); R=$OUT
export PYTHONUNBUFFERED=1
SERVE_AGREEMENT=0 OUT=$R timeout 330 bash scripts/h200_serve.sh serve > $R/serve_call.log 2>&1; echo serve rc $?
grep -E "serve_check|== " $R/serve_call.log | cut -c1-300 | tail -14
export PYTHONSAFEPATH=1
cp out/s8/old/_old_*.py kernels/triton/
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
export PYTHONPATH=/tmp/atom_pkg
timeout 100 python3 -P -m pytest -q tests/gpu/test_triton_gpu.py tests/test_triton_ops.py -k "write or quant or fp8" -p no:cacheprovider 2>&1 | tail -3 | tee $R/gpu_tests_write.txt
timeout 120 python3 -P out/s8/write_ab.py $R 2>&1 | tee $R/write_ab.txt
mkdir -p $R/bench_write && timeout 60 python3 -P evals/bench/run_bench.py --only write --out $R/bench_write 2>&1 | grep -E "write T=|copy"
