#!/usr/bin/env bash
# The whole test suite on a fresh CPU machine: installs what it needs, then runs pytest.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k codec`).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHON=${PYTHON:-python3}
# torch 2.13.0 is the CPU build on local disk; triton runs its kernels on the CPU under TRITON_INTERPRET=1
$PYTHON -m pip install --quiet torch==2.13.0 triton==3.6.0 -e ".[dev]"
for step in scripts/install.d/*.sh; do
  bash "$step"
done
exec $PYTHON -m pytest -q --durations=15 "$@"
