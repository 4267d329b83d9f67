#!/bin/bash
# Prepared 2026-12-04 (clamp session, after its device time was spent), NOT RUN. For the next session with a device,
# from the repo root:
#   run(command="bash docs/bench/2026-12-04-h200-clamp/next_call.sh serve", carry=[".whl/serve"])   # ~500 s
#   run(command="bash docs/bench/2026-12-04-h200-clamp/next_call.sh ncu")                          # ~200 s
# serve: (1) the Hopper attend tests again: test_attend_e4m3_query_and_query_scale's finiteness assertion, restored
#        after call 1 ran it weakened, and the past-the-table tests; (2) the full serve call, whose bf16 / fp8
#        agreement baselines the old 200 s limit cut (now 320 s).
# ncu:   Nsight Compute's warp states and scheduler statistics of today's kernel at 512 x 8192 and 1 row x 64 pages
#        (one program per SM: the chain alone), to test the reading "latency-bound, ~1 eligible warp per scheduler"
#        on the current loop (the 2026-12-03 profile was of an older one); then, twice, the dense rows with the
#        8-warp program capped at 128 registers beside the default in the same run (hopper_bench --variant): 2
#        programs of 8 warps per SM = 16 warps against 12 (sm_90 compile: 659-661 loop instructions a trip = 5.16 a
#        element against 4.18, 5 local loads a trip, no stores; 73.7 KB shared at 4 stages, 66.6 KB at 3). Keep it
#        only if the dense rows move past the 2-3% spread.
. scripts/device_pkg.sh
atom_pkg /tmp/atom_new || exit 2
export PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt; bash scripts/sources_hash.sh > $R/sources.txt 2>&1
if [ "$1" = ncu ]; then
  PYTHONPATH=/tmp/atom_new timeout 200 ncu --clock-control none --section SchedulerStats --section WarpStateStats \
    --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    -k regex:_pa_decode_kernel -o $R/prof python3 -P evals/bench/hopper_bench.py --profile 512x8192,1x8192 \
    > $R/ncu.log 2>&1
  echo "ncu rc $?"; ncu -i $R/prof.ncu-rep --page details > $R/ncu_details.txt 2>&1; grep -i "issue\|eligible\|stall" \
    $R/ncu_details.txt | head -n 20
  for n in 1 2; do
    PYTHONPATH=/tmp/atom_new timeout 120 python3 -P evals/bench/hopper_bench.py --quick --out $R/variant_$n \
      --variant warps=8,maxnreg=128 --variant warps=8,maxnreg=128,stages=3 > $R/variant_$n.log 2>&1
    echo "variant $n rc $?"; grep "^| [0-9]" $R/variant_$n/hopper_bench.md | cut -d'|' -f2,3,9,16,18
  done
  cd $OUT && tar czf results.tgz r && rm -rf r
  exit 0
fi
[ "$1" = serve ] || { echo "usage: next_call.sh serve|ncu"; exit 2; }
PYTHONPATH=/tmp/atom_new timeout 90 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py \
  -k "attend_e4m3 or past_the_table" -p no:cacheprovider > $R/gpu_tests_attend.txt 2>&1
echo "tests rc $?" >> $R/gpu_tests_attend.txt; tail -n 2 $R/gpu_tests_attend.txt
T_GPU_TESTS=0 OUT=$R timeout 420 bash scripts/h200_serve.sh serve > $R/serve_stdout.txt 2>&1
echo "serve rc $?"; grep "serve_check\]" $R/serve_stdout.txt | cut -c1-200 | tail -n 24
cd $OUT && tar czf results.tgz r && rm -rf r
