#!/bin/bash
# call B: triton 3.8.0 (torch 2.14.1's pin, SGLang 0.5.23's) on the H200 with the warp-count refactor: the Hopper GPU
# tests, the dense table at forced 4 / 8 warps, sparse + indexer against SGLang, all under 3.8
set -u
ROOT=$(pwd); R=$OUT
export PYTHONUNBUFFERED=1 PYTHONSAFEPATH=1
cat /tmp/t38/part_aa .whl/t38b/part_ab > /tmp/t38/t38.tar.xz && md5sum /tmp/t38/t38.tar.xz
mkdir -p /tmp/t38/site && python3 -c "import tarfile; tarfile.open('/tmp/t38/t38.tar.xz', 'r:xz').extractall('/tmp/t38/site')"
chmod +x /tmp/t38/site/triton/backends/nvidia/bin/*
mkdir -p /tmp/atom_pkg/atom_mxfp4 && cp -r atom_mxfp4/. /tmp/atom_pkg/atom_mxfp4/
for s in kernels model_patches evals; do ln -sfn $ROOT/$s /tmp/atom_pkg/atom_mxfp4/$s; done
export PYTHONPATH=/tmp/t38/site:/tmp/atom_pkg
python3 -P -c "
import torch, triton
from atom_mxfp4.kernels import hopper
from atom_mxfp4.backends import resolve_backend
print('triton', triton.__version__, triton.__file__, 'torch', torch.__version__)
print('hopper usable:', hopper.usable(torch.device('cuda', 0)), '| backend=None ->', resolve_backend(None, 'cuda:0').name)
" 2>&1 | tee $R/triton38_env.txt
timeout 170 python3 -P -m pytest -q -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py tests/gpu/test_hopper_index_gpu.py -p no:cacheprovider > $R/gpu_tests_hopper_triton38.txt 2>&1
echo "rc $?" >> $R/gpu_tests_hopper_triton38.txt; tail -4 $R/gpu_tests_hopper_triton38.txt
timeout 110 python3 -P evals/bench/hopper_bench.py --quick --warps 4 8 --out $R/hopper > $R/hopper.log 2>&1; echo "hopper_bench rc $?"
tail -8 $R/hopper.log
mkdir -p /tmp/sgl && cp /tmp/t38/sglang-0.5.23-*.whl /tmp/sgl/wheel.whl
timeout 150 python3 -P evals/bench/run_bench.py --sglang-root /tmp/sgl --only sparse,indexer --out $R/bench > $R/bench.log 2>&1; echo "run_bench rc $?"
grep -A11 "^## " $R/bench/bench.md | head -40
cd $OUT && tar czf results.tgz $(ls | grep -v results.tgz) && find . -mindepth 1 -not -name results.tgz -not -name '*.txt' -not -name '*.log' -delete 2>/dev/null; true
