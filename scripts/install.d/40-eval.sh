#!/usr/bin/env bash
# Evals (issue 6): lm-eval with its API-model extras (aiohttp, tenacity, tiktoken) for `eval gsm8k`,
# matplotlib for the `eval accuracy` plots. lm-eval 0.4.13 does not depend on torch; the constraint pins
# whatever torch is installed so that pip can never swap it. Idempotent: does nothing when present.
set -euo pipefail
PY=${PYTHON:-python}
LM_EVAL_VERSION=0.4.13

if $PY - "$LM_EVAL_VERSION" <<'PYEOF' 2>/dev/null; then
import sys, importlib.metadata as md
assert md.version("lm_eval") == sys.argv[1]
import tenacity, aiohttp, matplotlib  # noqa: F401  (lm-eval's API models and the plots)
PYEOF
  echo "[40-eval] lm-eval $LM_EVAL_VERSION, its API extras and matplotlib already installed"
  exit 0
fi

constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
if torch_version=$($PY -c 'import torch; print(torch.__version__)' 2>/dev/null); then
  echo "torch==$torch_version" > "$constraints"
fi
# SGLang (30-sglang.sh) pins transformers: lm-eval must not move it
if tf_version=$($PY -c 'import importlib.metadata as m; print(m.version("transformers"))' 2>/dev/null); then
  echo "transformers==$tf_version" >> "$constraints"
fi
$PY -m pip install --quiet -c "$constraints" "lm-eval[api]==$LM_EVAL_VERSION" matplotlib
$PY -c 'import lm_eval, tenacity, matplotlib, torch; print("[40-eval] lm-eval", lm_eval.__version__, "torch", torch.__version__)'
