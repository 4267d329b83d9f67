#!/bin/bash
# call 5 (2026-12-04, night): call 4's sparse tables put the working tree's attend (SPARSE split by the width) level with
# 5abf4c9's, but broke the fused attend's equality with the composition (its pa_decode splits by the context). Same
# run, alternating: the working tree (SPARSE by width) and 8cbb3ca's module (every source by the context; carried:
# out/ctx_kernel/pa_decode.py), run_bench's sparse table twice each.
ROOT=$PWD
pkg() {  # pkg DIR [KERNEL]: the package at DIR (kernels copied when KERNEL replaces pa_decode.py)
  mkdir -p $1/atom_mxfp4 && cp -r atom_mxfp4/. $1/atom_mxfp4/
  for s in model_patches evals; do ln -sfn $ROOT/$s $1/atom_mxfp4/$s; done
  if [ -n "$2" ]; then cp -r kernels $1/atom_mxfp4/kernels && cp $2 $1/atom_mxfp4/kernels/hopper/pa_decode.py
  else ln -sfn $ROOT/kernels $1/atom_mxfp4/kernels; fi
}
pkg /tmp/atom_pkg; pkg /tmp/atom_ctx out/ctx_kernel/pa_decode.py
export PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt
for run in 1_pkg 2_ctx 3_pkg 4_ctx; do  # the working tree, 8cbb3ca's module, twice each
  PYTHONPATH=/tmp/atom_${run#*_} timeout 100 python3 -P evals/bench/run_bench.py --sglang-root out/sgl --only sparse \
    --out $R/sparse_$run > $R/sparse_$run.log 2>&1; echo "sparse $run rc $?"
  grep -A10 "^## " $R/sparse_$run/bench.md | cut -d'|' -f2,10-17 | head -12
done
cd $OUT && tar czf results.tgz r && rm -rf r
