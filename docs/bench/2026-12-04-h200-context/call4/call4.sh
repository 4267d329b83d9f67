#!/bin/bash
# call 4 (2026-12-04, night): call 3 measured the sparse attend slower with the split by context (batch 1 7.4 us,
# batch 8 10.6, against 6.8 / 9.1 the session before): its top-k table's entries waited for the reduction of the ids.
# The SPARSE source divides by the width again (working tree); its attend GPU tests, then run_bench's sparse table on
# it and on 5abf4c9's module (carried: out/main_kernel/pa_decode.py) in the same call.
ROOT=$PWD
pkg() {  # pkg DIR [KERNEL]: the package at DIR (kernels copied when KERNEL replaces pa_decode.py)
  mkdir -p $1/atom_mxfp4 && cp -r atom_mxfp4/. $1/atom_mxfp4/
  for s in model_patches evals; do ln -sfn $ROOT/$s $1/atom_mxfp4/$s; done
  if [ -n "$2" ]; then cp -r kernels $1/atom_mxfp4/kernels && cp $2 $1/atom_mxfp4/kernels/hopper/pa_decode.py
  else ln -sfn $ROOT/kernels $1/atom_mxfp4/kernels; fi
}
pkg /tmp/atom_pkg; pkg /tmp/atom_main out/main_kernel/pa_decode.py
export PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt
PYTHONPATH=/tmp/atom_pkg timeout 120 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py \
  -k "attend or short_row or graph" -p no:cacheprovider > $R/gpu_tests.txt 2>&1
echo "tests rc $?" >> $R/gpu_tests.txt; tail -3 $R/gpu_tests.txt
for run in 1_pkg 2_main 3_pkg; do  # the working tree, 5abf4c9's module, the working tree again
  PYTHONPATH=/tmp/atom_${run#*_} timeout 100 python3 -P evals/bench/run_bench.py --sglang-root out/sgl --only sparse \
    --out $R/sparse_$run > $R/sparse_$run.log 2>&1; echo "sparse $run rc $?"
  grep -A10 "^## " $R/sparse_$run/bench.md | cut -d'|' -f2,10-17 | head -12
done
cd $OUT && tar czf results.tgz r && rm -rf r
