#!/usr/bin/env bash
# call B: triton 3.8.0 (torch 2.14's pin, SGLang 0.5.23's) on the H200: the Hopper + layer GPU tests under it, then
# the Triton GPU tests as far as the time goes (the log streams to $OUT, so a cut keeps what ran)
set -u
ROOT=$(pwd); R=$OUT
export PYTHONUNBUFFERED=1 PYTHONSAFEPATH=1
cat /tmp/t38/part_aa .whl/t38b/part_ab > /tmp/t38/t38.tar.xz && md5sum /tmp/t38/t38.tar.xz
mkdir -p /tmp/t38/site && python3 -c "import tarfile; tarfile.open('/tmp/t38/t38.tar.xz', 'r:xz').extractall('/tmp/t38/site')"
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
timeout 175 python3 -P -m pytest -v -m "gpu or not gpu" tests/gpu/test_hopper_gpu.py tests/gpu/test_hopper_index_gpu.py tests/gpu/test_layer_gpu.py -p no:cacheprovider > $R/gpu_tests_hopper_triton38.txt 2>&1
tail -4 $R/gpu_tests_hopper_triton38.txt; grep -c PASSED $R/gpu_tests_hopper_triton38.txt; grep -E "FAILED|ERROR" $R/gpu_tests_hopper_triton38.txt | head -10
timeout 60 python3 -P -m pytest -v -m "gpu or not gpu" tests/gpu/test_triton_gpu.py -p no:cacheprovider > $R/gpu_tests_triton_triton38.txt 2>&1
tail -3 $R/gpu_tests_triton_triton38.txt
