#!/bin/bash
# call 2 (2026-12-04, night): short rows in wide tables (the case the split by context is for), a split sweep with and
# without it in one call, then a real SGLang 0.5.23 server (SERVE_TOPK=16, the tiny M3 with the real M3's top-k)
# through the serve scenarios.
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
for v in pkg main; do
  PYTHONPATH=/tmp/atom_$v timeout 60 python3 -P evals/bench/hopper_bench.py --split-sweep \
    --sweep-shapes 1x1536x4096,2x1536x4096,8x1536x2048,1x128x1000 --out $R/sweep_$v > $R/sweep_$v.log 2>&1
  echo "sweep $v rc $?"; cut -c1-400 $R/sweep_$v.log | tail -5
done
PYTHONPATH=/tmp/atom_pkg SERVE_TOPK=16 SERVE_AGREEMENT=0 OUT=$R timeout 380 bash scripts/h200_serve.sh serve \
  > /dev/null 2>&1; echo "serve rc $?"
grep -h -i "passed\|failed\|scenario\| ok" $R/serve/*.md 2>/dev/null | head -30
cd $OUT && tar czf results.tgz r && rm -rf r
