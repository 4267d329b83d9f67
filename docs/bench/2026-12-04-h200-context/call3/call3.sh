#!/bin/bash
# call 3 (2026-12-04, night): on 8cbb3ca + docs (the split by the row's context), the layer and index GPU tests (the
# layer runs the Hopper attend the change touches), then the issue-14 rows in one call: dense (hopper_bench --quick)
# and sparse attend + indexer against SGLang 0.5.23's kernels (run_bench; carried: out/sgl/wheel.whl).
ROOT=$PWD
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
export PYTHONPATH=/tmp/atom_pkg PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt
timeout 170 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_layer_gpu.py tests/gpu/test_hopper_index_gpu.py \
  -p no:cacheprovider > $R/gpu_tests.txt 2>&1
echo "tests rc $?" >> $R/gpu_tests.txt; tail -3 $R/gpu_tests.txt
timeout 95 python3 -P evals/bench/hopper_bench.py --quick --out $R/hopper > $R/hopper.log 2>&1
echo "hopper_bench rc $?"; grep "^rows=" $R/hopper.log | cut -c1-200
timeout 180 python3 -P evals/bench/run_bench.py --sglang-root out/sgl --only sparse,indexer --out $R/bench \
  > $R/bench.log 2>&1; echo "run_bench rc $?"; grep -A14 "^## " $R/bench/bench.md | cut -c1-250 | head -40
cd $OUT && tar czf results.tgz r && rm -rf r
