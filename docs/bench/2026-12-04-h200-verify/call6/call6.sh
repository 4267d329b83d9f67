#!/bin/bash
# call 6 (2026-12-04, late): pa_decode alone, 3 programs per SM (four_per_sm=False) and the build of 4
# (four_per_sm=True: 2 stages, 128 registers) alternating three rounds at 512 and 450 rows x 16 pages, one split
# (call 4's ordered A/B had timed the default first at every shape).
ROOT=$PWD
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
export PYTHONPATH=/tmp/atom_pkg PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt; bash scripts/sources_hash.sh > $R/sources.txt 2>&1
timeout 150 python3 -P docs/bench/2026-12-04-h200-verify/call6/regs_ab_alternating.py $R > $R/regs_ab.log 2>&1
echo "regs_ab rc $?"; tail -n 4 $R/regs_ab.log
cd $OUT && tar czf results.tgz r && rm -rf r
