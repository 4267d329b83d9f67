#!/usr/bin/env bash
# Test suite (issue 2): pytest and hypothesis (property tests in tests/test_properties.py), numpy (the test oracles
# in tests/_helpers.py). None of them depends on torch; the constraint pins the installed torch anyway so that pip
# can never swap it. Idempotent: does nothing when all are importable.
set -euo pipefail
PY=${PYTHON:-python}

if ! $PY -c 'import pytest, hypothesis, numpy' 2>/dev/null; then
  constraints=$(mktemp)
  $PY -c 'import torch; print(f"torch=={torch.__version__}")' > "$constraints" 2>/dev/null || : > "$constraints"
  $PY -m pip install --quiet -c "$constraints" "pytest>=8" "hypothesis>=6" numpy
  rm -f "$constraints"
fi
$PY -c 'import pytest, hypothesis, numpy; print("[35-tests] pytest", pytest.__version__, "hypothesis", hypothesis.__version__)'
