#!/bin/bash
# call 5 (2026-12-04): the sparse one-launch loop without the skippable rescale: attend GPU tests, sparse A/B vs b7d4211
ROOT=$PWD
mk() {  # $1 = package dir, $2 = kernels dir
  mkdir -p $1/atom_mxfp4 && cp -r atom_mxfp4/. $1/atom_mxfp4/
  ln -sfn $2 $1/atom_mxfp4/kernels; for s in model_patches evals; do ln -sfn $ROOT/$s $1/atom_mxfp4/$s; done
}
mk /tmp/new_pkg $ROOT/kernels
mkdir -p /tmp/old_kernels && cp -r kernels/. /tmp/old_kernels/ && rm -rf /tmp/old_kernels/hopper
mkdir -p /tmp/old_src && tar xzf out/ab/old_hopper.tgz -C /tmp/old_src && cp -r /tmp/old_src/kernels/hopper /tmp/old_kernels/hopper
mk /tmp/old_pkg /tmp/old_kernels
export PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt
PYTHONPATH=/tmp/new_pkg timeout 90 python3 -P -m pytest -q -m gpu tests/gpu/test_hopper_gpu.py -k "attend or rescale or table_entries" -p no:cacheprovider > $R/gpu_tests.txt 2>&1; tail -2 $R/gpu_tests.txt
mkdir -p /tmp/sgl && cp .whl/serve/sglang-0.5.23-*.whl /tmp/sgl/wheel.whl
for v in new old new2; do
  PYTHONPATH=/tmp/${v%2}_pkg timeout 80 python3 -P evals/bench/run_bench.py --sglang-root /tmp/sgl --only sparse --out $R/sparse_$v > $R/sparse_$v.log 2>&1; echo "sparse $v rc $?"
  grep -A10 "^## " $R/sparse_$v/bench.md | tail -7 | cut -d'|' -f2,5,6,13-17
done
cd $OUT && tar czf results.tgz r && rm -rf r
