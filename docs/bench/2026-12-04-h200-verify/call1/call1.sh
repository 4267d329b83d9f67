#!/bin/bash
# call 1 (2026-12-04, late): the merge that reads only the splits holding pages (merge_used_splits.patch, carried as
# out/merge/pa_decode.py) against main (27969ca) in the same call: the short-row sweep and the dense rows; then the
# Triton GPU tests (the Triton split by context had run only under the interpreter).
ROOT=$PWD
pkg() {  # pkg DIR [KERNEL]: the package at DIR (kernels copied when KERNEL replaces pa_decode.py)
  mkdir -p $1/atom_mxfp4 && cp -r atom_mxfp4/. $1/atom_mxfp4/
  for s in model_patches evals; do ln -sfn $ROOT/$s $1/atom_mxfp4/$s; done
  if [ -n "$2" ]; then cp -r kernels $1/atom_mxfp4/kernels && cp $2 $1/atom_mxfp4/kernels/hopper/pa_decode.py
  else ln -sfn $ROOT/kernels $1/atom_mxfp4/kernels; fi
}
pkg /tmp/atom_pkg; pkg /tmp/atom_merge out/merge/pa_decode.py
export PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt; bash scripts/sources_hash.sh > $R/sources.txt 2>&1
for v in pkg merge pkg merge; do
  n=$((${n:-0}+1))
  PYTHONPATH=/tmp/atom_$v timeout 60 python3 -P evals/bench/hopper_bench.py --split-sweep \
    --sweep-shapes 1x1536x4096,2x1536x4096,8x1536x2048,1x128x1000 --out $R/sweep_${n}_$v > $R/sweep_${n}_$v.log 2>&1
  echo "sweep $n $v rc $?"; cut -c1-300 $R/sweep_${n}_$v.log | tail -4
done
for v in pkg merge; do
  PYTHONPATH=/tmp/atom_$v timeout 70 python3 -P evals/bench/hopper_bench.py --quick --out $R/hopper_$v \
    > $R/hopper_$v.log 2>&1
  echo "hopper_bench $v rc $?"; grep "^rows=" $R/hopper_$v.log | cut -c1-200
done
PYTHONPATH=/tmp/atom_pkg timeout 200 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_triton_gpu.py \
  -p no:cacheprovider > $R/gpu_tests_triton.txt 2>&1
echo "triton tests rc $?" >> $R/gpu_tests_triton.txt; tail -n 4 $R/gpu_tests_triton.txt
cd $OUT && tar czf results.tgz r && rm -rf r
