#!/bin/bash
# call 3 (2026-12-04, late): every Hopper GPU test on the final policy, then a real SGLang 0.5.23 server whose sparse
# layers take the real M3's 16 top-k blocks (SERVE_TOPK=16: a decode of 1-2 requests runs the split merge over a
# cluster of 16, inside SGLang's decode CUDA graphs) through the serve scenarios.
ROOT=$PWD
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt
(export PYTHONPATH=/tmp/atom_pkg PYTHONSAFEPATH=1
 timeout 200 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py -p no:cacheprovider \
   > $R/gpu_tests.txt 2>&1
 echo "tests rc $?" >> $R/gpu_tests.txt)
tail -4 $R/gpu_tests.txt
SERVE_TOPK=16 SERVE_AGREEMENT=0 OUT=$R timeout 360 bash scripts/h200_serve.sh serve > /dev/null 2>&1; echo "serve rc $?"
ls $R $R/serve | head -30
grep -h -i "passed\|failed\|scenario\| ok" $R/serve/*.md 2>/dev/null | head -30
cd $OUT && tar czf results.tgz r && rm -rf r
