#!/usr/bin/env bash
# call 3: the final tree: write A/B at small T in the reversed order; every issue-14 row in one call
set -u
ROOT=$(pwd); R=$OUT
export PYTHONUNBUFFERED=1 PYTHONSAFEPATH=1
cp out/s8/old/_old_*.py kernels/triton/
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
export PYTHONPATH=/tmp/atom_pkg
timeout 60 python3 -P out/s8/write_ab_rev.py $R 1,64 2>&1 | tee $R/write_ab_reversed.txt
timeout 150 python3 -P evals/bench/hopper_bench.py --quick --out $R/hopper 2>&1 | tail -15
mkdir -p /tmp/sgl && cp .whl/serve/sglang-0.5.23-*.whl /tmp/sgl/wheel.whl
timeout 320 python3 -P evals/bench/run_bench.py --out $R/bench --sglang-root /tmp/sgl --only sparse,indexer 2>&1 | grep -vE "^\s*$" | tail -40
