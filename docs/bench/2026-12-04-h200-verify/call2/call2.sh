#!/bin/bash
# call 2 (2026-12-04, late): every Hopper GPU test, the layer and index GPU tests and compute-sanitizer memcheck on
# main + merge_used_splits.patch (carried as out/merge/pa_decode.py; 27969ca's review mends had not run on a GPU).
ROOT=$PWD
pkg() {  # pkg DIR [KERNEL]: the package at DIR (kernels copied when KERNEL replaces pa_decode.py)
  mkdir -p $1/atom_mxfp4 && cp -r atom_mxfp4/. $1/atom_mxfp4/
  for s in model_patches evals; do ln -sfn $ROOT/$s $1/atom_mxfp4/$s; done
  if [ -n "$2" ]; then cp -r kernels $1/atom_mxfp4/kernels && cp $2 $1/atom_mxfp4/kernels/hopper/pa_decode.py
  else ln -sfn $ROOT/kernels $1/atom_mxfp4/kernels; fi
}
pkg /tmp/atom_merge out/merge/pa_decode.py
export PYTHONSAFEPATH=1 PYTHONPATH=/tmp/atom_merge
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt; bash scripts/sources_hash.sh > $R/sources.txt 2>&1
timeout 260 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py -p no:cacheprovider \
  > $R/gpu_tests_hopper.txt 2>&1
echo "tests rc $?" >> $R/gpu_tests_hopper.txt; tail -n 4 $R/gpu_tests_hopper.txt
timeout 90 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_layer_gpu.py tests/gpu/test_hopper_index_gpu.py \
  -p no:cacheprovider > $R/gpu_tests_layer_index.txt 2>&1
echo "tests rc $?" >> $R/gpu_tests_layer_index.txt; tail -n 4 $R/gpu_tests_layer_index.txt
timeout 170 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -P evals/bench/sanitize_cases.py \
  > $R/memcheck.txt 2>&1
echo "memcheck rc $?"; tail -n 2 $R/memcheck.txt
cd $OUT && tar czf results.tgz r && rm -rf r
