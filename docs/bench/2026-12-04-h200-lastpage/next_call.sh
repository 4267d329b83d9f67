#!/bin/bash
# Prepared 2026-12-04 (last-page session), NOT RUN: the session began with 203 s of device time, below what a cold
# start needs. For the next session with a device, from the repo root:
#   run: bash docs/bench/2026-12-04-h200-lastpage/next_call.sh   (timeout_s 600)
# 1. last_page_mask.patch (the logits' context mask only on the page that holds the context's end, dense loops only)
#    against the tree's kernel, alternating twice through hopper_bench --quick (the dense rows);
# 2. the clamp test of d4d0248 / d9b66a4 (never run on a GPU) on the tree's kernel;
# 3. the whole Hopper GPU test file on the patched kernel (keep the patch only if it passes and is faster).
ROOT=$PWD
PATCH=$ROOT/docs/bench/2026-12-04-h200-lastpage/last_page_mask.patch
pkg() {  # pkg DIR [PATCH]: the package at DIR (kernels copied and patched when PATCH is given)
  mkdir -p $1/atom_mxfp4 && cp -r atom_mxfp4/. $1/atom_mxfp4/
  for s in model_patches evals; do ln -sfn $ROOT/$s $1/atom_mxfp4/$s; done
  if [ -n "$2" ]; then cp -r kernels $1/atom_mxfp4/kernels
    (cd $1/atom_mxfp4 && { git apply -p1 $2 || patch -p1 -s < $2; }) || { echo "patch failed"; exit 2; }
  else ln -sfn $ROOT/kernels $1/atom_mxfp4/kernels; fi
}
pkg /tmp/atom_main; pkg /tmp/atom_new $PATCH || exit 2
export PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt; bash scripts/sources_hash.sh > $R/sources.txt 2>&1
for v in main new main new; do
  n=$((${n:-0}+1))
  PYTHONPATH=/tmp/atom_$v timeout 75 python3 -P evals/bench/hopper_bench.py --quick --out $R/hopper_${n}_$v \
    > $R/hopper_${n}_$v.log 2>&1
  echo "hopper $n $v rc $?"; grep "^| [0-9]" $R/hopper_${n}_$v/hopper_bench.md | cut -d'|' -f2,3,8,9
done
PYTHONPATH=/tmp/atom_main timeout 60 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py \
  -k "unchecked_context_past_the_table" -p no:cacheprovider > $R/gpu_test_clamp_main.txt 2>&1
echo "clamp test on main rc $?"; tail -n 1 $R/gpu_test_clamp_main.txt
PYTHONPATH=/tmp/atom_new timeout 270 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py \
  -p no:cacheprovider > $R/gpu_tests_new.txt 2>&1
echo "tests rc $?" >> $R/gpu_tests_new.txt; tail -n 3 $R/gpu_tests_new.txt
cd $OUT && tar czf results.tgz r && rm -rf r
