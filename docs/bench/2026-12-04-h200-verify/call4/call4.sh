#!/bin/bash
# call 4 (2026-12-04, late): every issue-14 row in one call on main (ba537d2: the merge reading only the splits that
# hold pages): run_bench (sparse, indexer, dense, write) against SGLang 0.5.23's kernels and the copy bandwidth, the
# dense rows through hopper_bench --quick; first a scratch A/B of 4 programs per SM (register cap 128).
ROOT=$PWD
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
export PYTHONPATH=/tmp/atom_pkg PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt; bash scripts/sources_hash.sh > $R/sources.txt 2>&1
timeout 100 python3 -P docs/bench/2026-12-04-h200-verify/call4/regs_ab.py $R/regs_ab > $R/regs_ab.log 2>&1
echo "regs_ab rc $?"; tail -n 6 $R/regs_ab.log
timeout 70 python3 -P evals/bench/hopper_bench.py --quick --out $R/hopper > $R/hopper.log 2>&1
echo "hopper_bench rc $?"; grep "^rows=" $R/hopper.log | cut -c1-200
timeout 330 python3 -P evals/bench/run_bench.py --sglang-root out/sgl --out $R/bench > $R/bench.log 2>&1
echo "run_bench rc $?"; tail -n 3 $R/bench.log
cd $OUT && tar czf results.tgz r && rm -rf r
