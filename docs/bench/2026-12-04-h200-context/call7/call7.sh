#!/bin/bash
# call 7 (2026-12-04, night): compute-sanitizer memcheck on the final kernel (SPARSE split by the width, TABLES / DENSE
# by the row's context), as one command line (copied here from the run call).
ROOT=$PWD; mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
export PYTHONPATH=/tmp/atom_pkg PYTHONSAFEPATH=1; mkdir -p $OUT/r; date -u > $OUT/r/date.txt
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -P evals/bench/sanitize_cases.py \
  > $OUT/r/memcheck.txt 2>&1; echo "memcheck rc $?"; tail -2 $OUT/r/memcheck.txt
