#!/bin/bash
# call 4 (2026-12-04): compute-sanitizer memcheck of the O-rescale kernel, then a real SGLang server (serve scenarios)
ROOT=$PWD
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
R=$OUT/r; mkdir -p $R
(export PYTHONPATH=/tmp/atom_pkg PYTHONSAFEPATH=1
 timeout 170 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -P evals/bench/sanitize_cases.py > $R/memcheck.txt 2>&1
 echo "memcheck rc $?" >> $R/memcheck.txt)
tail -4 $R/memcheck.txt
SERVE_AGREEMENT=0 OUT=$R timeout 340 bash scripts/h200_serve.sh serve > /dev/null 2>&1; echo "serve rc $?"
ls $R $R/serve | head -30
grep -h -i "passed\|failed\|scenario" $R/serve/*.md 2>/dev/null | head -30
cd $OUT && tar czf results.tgz r && rm -rf r
