#!/bin/bash
# call 1 (2026-12-04, night): the split by the row's context (8cbb3ca). Every Hopper GPU test on it (the cluster
# guard and the final split policy had not run whole), the dense rows against the kernel before it in the same call
# (hopper_bench --quick; carried: out/main_kernel/pa_decode.py = 5abf4c9's module), then compute-sanitizer memcheck.
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
PYTHONPATH=/tmp/atom_pkg timeout 250 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py \
  -p no:cacheprovider > $R/gpu_tests.txt 2>&1
echo "tests rc $?" >> $R/gpu_tests.txt; tail -4 $R/gpu_tests.txt
for v in pkg main; do
  PYTHONPATH=/tmp/atom_$v timeout 70 python3 -P evals/bench/hopper_bench.py --quick --out $R/hopper_$v \
    > $R/hopper_$v.log 2>&1
  echo "hopper_bench $v rc $?"; grep "^rows=" $R/hopper_$v.log | cut -c1-200
done
PYTHONPATH=/tmp/atom_pkg timeout 140 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -P \
  evals/bench/sanitize_cases.py > $R/memcheck.txt 2>&1
echo "memcheck rc $?"; tail -2 $R/memcheck.txt
cd $OUT && tar czf results.tgz r && rm -rf r
