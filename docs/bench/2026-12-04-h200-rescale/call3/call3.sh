#!/bin/bash
# call 3 (2026-12-04): the shipped O rescale (V loads early except in the sparse one-launch loop): every GPU test,
# the issue-14 rows (hopper_bench --quick, run_bench sparse + indexer with SGLang's kernels)
ROOT=$PWD
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
export PYTHONPATH=/tmp/atom_pkg PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt
timeout 280 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu tests/test_triton_ops.py -p no:cacheprovider > $R/gpu_tests.txt 2>&1
echo "tests rc $?" >> $R/gpu_tests.txt; tail -4 $R/gpu_tests.txt
timeout 95 python3 -P evals/bench/hopper_bench.py --quick --out $R/hopper > $R/hopper.log 2>&1; echo "hopper_bench rc $?"
tail -8 $R/hopper.log
mkdir -p /tmp/sgl && cp .whl/serve/sglang-0.5.23-*.whl /tmp/sgl/wheel.whl
timeout 150 python3 -P evals/bench/run_bench.py --sglang-root /tmp/sgl --only sparse,indexer --out $R/bench > $R/bench.log 2>&1; echo "run_bench rc $?"
grep -A12 "^## " $R/bench/bench.md | head -50
cd $OUT && tar czf results.tgz r && rm -rf r
