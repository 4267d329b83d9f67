#!/bin/bash
# call 7 (2026-12-04, verify session): the split merge's `used` computed beside has_context, before the combine (the
# working tree on 378dfca) against 378dfca's kernel (carried as out/main_kernel/pa_decode.py), alternating twice over
# the short-row sweep; the Hopper GPU tests that split, and memcheck, on the new one.
ROOT=$PWD
pkg() {  # pkg DIR [KERNEL]: the package at DIR (kernels copied when KERNEL replaces pa_decode.py)
  mkdir -p $1/atom_mxfp4 && cp -r atom_mxfp4/. $1/atom_mxfp4/
  for s in model_patches evals; do ln -sfn $ROOT/$s $1/atom_mxfp4/$s; done
  if [ -n "$2" ]; then cp -r kernels $1/atom_mxfp4/kernels && cp $2 $1/atom_mxfp4/kernels/hopper/pa_decode.py
  else ln -sfn $ROOT/kernels $1/atom_mxfp4/kernels; fi
}
pkg /tmp/atom_new; pkg /tmp/atom_main out/main_kernel/pa_decode.py
export PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt; bash scripts/sources_hash.sh > $R/sources.txt 2>&1
for v in main new main new; do
  n=$((${n:-0}+1))
  PYTHONPATH=/tmp/atom_$v timeout 50 python3 -P evals/bench/hopper_bench.py --split-sweep \
    --sweep-shapes 1x1536x4096,8x1536x2048,64x64x8192 --out $R/sweep_${n}_$v > $R/sweep_${n}_$v.log 2>&1
  echo "sweep $n $v rc $?"; cut -c1-220 $R/sweep_${n}_$v.log | tail -3
done
PYTHONPATH=/tmp/atom_new timeout 110 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py \
  -k "short_row or vs_fp64_and_torch or graph_replay or cluster_merge or attend_fused or outside_the_window" \
  -p no:cacheprovider > $R/gpu_tests.txt 2>&1
echo "tests rc $?" >> $R/gpu_tests.txt; tail -n 3 $R/gpu_tests.txt
PYTHONPATH=/tmp/atom_new timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -P \
  evals/bench/sanitize_cases.py > $R/memcheck.txt 2>&1
echo "memcheck rc $?"; tail -n 1 $R/memcheck.txt
cd $OUT && tar czf results.tgz r && rm -rf r
