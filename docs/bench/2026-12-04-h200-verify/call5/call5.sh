#!/bin/bash
# call 5 (2026-12-04, late): four programs per SM for the last wave (pa_decode.four_per_sm_for, working tree on
# ba537d2) against ba537d2's kernel (carried as out/main_kernel/pa_decode.py) in the same call: its GPU tests, the
# sparse decode against SGLang 0.5.23 (new, main, new), compute-sanitizer memcheck with the build forced.
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
PYTHONPATH=/tmp/atom_new timeout 120 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py \
  -k "four_per_sm or vs_fp64_and_torch or graph_replay or outside_the_window" -p no:cacheprovider \
  > $R/gpu_tests.txt 2>&1
echo "tests rc $?" >> $R/gpu_tests.txt; tail -n 4 $R/gpu_tests.txt
for v in new main new; do
  n=$((${n:-0}+1))
  PYTHONPATH=/tmp/atom_$v timeout 100 python3 -P evals/bench/run_bench.py --sglang-root out/sgl --only sparse \
    --out $R/sparse_${n}_$v > $R/sparse_${n}_$v.log 2>&1
  echo "sparse $n $v rc $?"; grep "^| 512 \|^| 256 \|^| 64 " $R/sparse_${n}_$v/bench.md | cut -d'|' -f2,4,5,6,14,15,16,17
done
PYTHONPATH=/tmp/atom_new timeout 170 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -P \
  evals/bench/sanitize_cases.py > $R/memcheck.txt 2>&1
echo "memcheck rc $?"; tail -n 2 $R/memcheck.txt
cd $OUT && tar czf results.tgz r && rm -rf r
