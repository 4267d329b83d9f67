#!/usr/bin/env bash
# Triton backend (issue 3): the CPU tests run Triton's interpreter (TRITON_INTERPRET=1), so triton must import.
# Idempotent; never touches torch (--no-deps).
set -euo pipefail
if python -c "import triton, sys; sys.exit(0 if triton.__version__.startswith('3.') else 1)" 2>/dev/null; then
  echo "triton $(python -c 'import triton; print(triton.__version__)') present"
else
  python -m pip install -q --no-deps "triton==3.6.0"
fi
