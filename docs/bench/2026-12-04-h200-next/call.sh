#!/bin/bash
# Prepared 2026-12-04 (a session without a device: none was lent); not run yet. From the repo root on the device:
#   bash docs/bench/2026-12-04-h200-next/call.sh tests   (~8 min, no carry)
#       the group the final session's call 5 could not finish (Triton / layer / Hopper-index GPU tests, the decode,
#       index and write contract tests with their strided inputs moved by H.to_device, the op tests; 420 s), then
#       compute-sanitizer memcheck (130 s)
#   bash docs/bench/2026-12-04-h200-next/call.sh tail    (~6 min, no carry)
#       the split tail (HopperConfig.tail_splits, off by default): its GPU tests, then hopper_bench on issue 14's rows
#       and the rows around one wave (396 programs), the default against tail_splits 2 / 3 / 4 in the same run
#   bash docs/bench/2026-12-04-h200-next/call.sh sweep   (<= 9 min, no carry)
#       tests/test_layout_sweep.py on the GPU, its layout half then its dtype half, one process (150 s) per op group
#       in each (a CUDA error is sticky): every op and the layer's step x tensor argument x layout / dtype on the
#       torch, Triton and Hopper backends (each alignment or dtype of an input is a new compile)
#   bash docs/bench/2026-12-04-h200-next/call.sh triton39a   (seconds; carry .whl/t39a)
#   bash docs/bench/2026-12-04-h200-next/call.sh triton39b   (~8 min; carry .whl/t39b; the machine still warm)
#       triton 3.9.0 (torch 2.15's pin), built by pack_triton39.sh in two parts: the first call leaves part a in /tmp,
#       the second joins them and runs the Hopper GPU tests (+ the Hopper index and layer ones) under 3.9, then the
#       Triton ones, then hopper_bench --quick: the evidence TRITON_SERIES needs before it takes 3.9
. scripts/device_pkg.sh
atom_pkg /tmp/atom_new || exit 2
export PYTHONSAFEPATH=1 PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt; bash scripts/sources_hash.sh > $R/sources.txt 2>&1
if [ "$1" = triton39a ]; then  # part a stays in /tmp for the next call (the machine stays warm between calls)
  mkdir -p /tmp/t39 && cp .whl/t39a/part_aa /tmp/t39/ && ls -la /tmp/t39
  # the two fixes of 2026-12-05 (the sweep's findings) on the GPU, under the installed triton
  PYTHONPATH=/tmp/atom_new timeout 120 python3 -P -m pytest -q tests/test_triton_ops.py tests/test_triton_compile.py \
    -k "4_byte or query_scale" -p no:cacheprovider > $R/fixes.txt 2>&1
  echo "fixes rc $?" >> $R/fixes.txt; tail -n 2 $R/fixes.txt
elif [ "$1" = tests ]; then
  PYTHONPATH=/tmp/atom_new timeout 420 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_triton_gpu.py \
    tests/gpu/test_layer_gpu.py tests/gpu/test_hopper_index_gpu.py tests/test_contracts_decode.py \
    tests/test_contracts_index.py tests/test_contracts_write.py tests/test_triton_ops.py -p no:cacheprovider \
    --durations=10 > $R/gpu_tests_other.txt 2>&1
  echo "tests rc $?" >> $R/gpu_tests_other.txt; tail -n 2 $R/gpu_tests_other.txt
  PYTHONPATH=/tmp/atom_new timeout 130 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -P \
    evals/bench/sanitize_cases.py > $R/memcheck.txt 2>&1
  echo "memcheck rc $?"; tail -n 2 $R/memcheck.txt
elif [ "$1" = sweep ]; then  # two halves, each with its own limit: every new pointer alignment or dtype is a compile
  # one process per op group: a CUDA error is sticky (the first run's misaligned address failed every later case)
  for part in layout dtype; do
    for ops in "pa_decode or attend" "index_topk" "build_sparse_tables or fused_qknorm_rope_write" "layer"; do
      PYTHONPATH=/tmp/atom_new timeout 150 python3 -P -m pytest -q tests/test_layout_sweep.py \
        -k "${part}_is_refused and ($ops)" -p no:cacheprovider -rf --durations=3 >> $R/${part}_sweep.txt 2>&1
      echo "$part sweep [$ops] rc $?" >> $R/${part}_sweep.txt; tail -n 2 $R/${part}_sweep.txt
    done
  done
elif [ "$1" = tail ]; then
  PYTHONPATH=/tmp/atom_new timeout 240 python3 -P -m pytest -q tests/gpu/test_hopper_gpu.py -k "tail" \
    -p no:cacheprovider > $R/gpu_tests_tail.txt 2>&1
  echo "tail tests rc $?" >> $R/gpu_tests_tail.txt; tail -n 2 $R/gpu_tests_tail.txt
  PYTHONPATH=/tmp/atom_new timeout 300 python3 -P evals/bench/hopper_bench.py --quick --out $R/tail \
    --shapes 512x8192,4096x2048,450x8192,512x2048,600x2048,1024x2048 \
    --variant tail_splits=2 --variant tail_splits=3 --variant tail_splits=4 > $R/tail.log 2>&1
  echo "hopper_bench rc $?"; tail -n 12 $R/tail/hopper_bench.md
elif [ "$1" = triton39b ]; then
  if [ ! -f /tmp/t39/part_aa ]; then
    echo "part a is not in /tmp/t39: run call.sh triton39a first (same warm machine)"; exit 2
  fi
  cat /tmp/t39/part_aa .whl/t39b/part_ab > /tmp/t39/t39.tar.xz && md5sum /tmp/t39/t39.tar.xz | tee $R/t39_md5.txt
  rm -rf /tmp/t39/site && mkdir -p /tmp/t39/site
  python3 -c "import tarfile; tarfile.open('/tmp/t39/t39.tar.xz', 'r:xz').extractall('/tmp/t39/site')"
  chmod +x /tmp/t39/site/triton/backends/nvidia/bin/*
  export PYTHONPATH=/tmp/t39/site:/tmp/atom_new
  for series in "" 3.9; do  # without the variable (what a torch 2.15 user gets), then with it
    ATOM_MXFP4_HOPPER_TRITON_SERIES=$series python3 -P -c "
import torch, triton
from atom_mxfp4.kernels import hopper
from atom_mxfp4.backends import resolve_backend
print('triton', triton.__version__, triton.__file__, 'torch', torch.__version__, 'series variable', repr('$series'))
print('hopper usable:', hopper.usable(torch.device('cuda', 0)),
      '| backend=None ->', resolve_backend(None, 'cuda:0').name)
" 2>&1 | tee -a $R/triton39_env.txt
  done
  # written while TRITON_SERIES left 3.9 out (the variable let the tests import the kernels; a no-op since 3.9 joined)
  ATOM_MXFP4_HOPPER_TRITON_SERIES=3.9 timeout 220 python3 -P -m pytest -q -m "gpu or not gpu" \
    tests/gpu/test_hopper_gpu.py tests/gpu/test_hopper_index_gpu.py tests/gpu/test_layer_gpu.py -p no:cacheprovider \
    > $R/gpu_tests_hopper_triton39.txt 2>&1
  echo "hopper tests rc $?" >> $R/gpu_tests_hopper_triton39.txt; tail -n 3 $R/gpu_tests_hopper_triton39.txt
  timeout 100 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_triton_gpu.py -p no:cacheprovider \
    > $R/gpu_tests_triton_triton39.txt 2>&1
  echo "triton tests rc $?" >> $R/gpu_tests_triton_triton39.txt; tail -n 3 $R/gpu_tests_triton_triton39.txt
  ATOM_MXFP4_HOPPER_TRITON_SERIES=3.9 timeout 150 python3 -P evals/bench/hopper_bench.py --quick --out $R/bench39 \
    > $R/bench39.log 2>&1
  echo "hopper_bench rc $?"; tail -n 8 $R/bench39/hopper_bench.md
else
  echo "usage: call.sh tests|tail|sweep|triton39a|triton39b"; exit 2
fi
cd $OUT && tar czf results.tgz r && rm -rf r
