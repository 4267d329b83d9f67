#!/usr/bin/env bash
# Download the wheels of wheels-serve.txt (and wheels-eval.txt) for the lent H200 (CPython 3.12, x86_64, manylinux)
# into the ignored folder .whl/ at the repo root, which the device call carries. Run here, where pip reaches PyPI:
#   bash scripts/serve_env/fetch_wheels.sh            # server wheels only (the first call)
#   bash scripts/serve_env/fetch_wheels.sh eval       # lm-eval wheels, and GSM8K packed into .whl/gsm8k
# The eval call carries .whl/serve too (a fresh machine has no SGLang): to fit one call's 64 MiB, lm-eval's wheel is
# repacked without its task folders other than gsm8k (our driver builds the GSM8K task itself; the rest is 60+ MB of
# YAML). Idempotent: a wheel already in .whl/ is not fetched again. Prints the total size.
set -euo pipefail
cd "$(dirname "$0")/../.."
LIST=scripts/serve_env/wheels-${1:-serve}.txt
DEST=.whl/${1:-serve}
mkdir -p "$DEST"
grep -q '^/.whl/' .gitignore || { echo ".whl/ must be ignored (.gitignore)"; exit 2; }
PLATFORMS=""
for n in 34 28 27 17; do PLATFORMS="$PLATFORMS --platform manylinux_2_${n}_x86_64"; done
PLATFORMS="$PLATFORMS --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any"
grep -v '^\s*#' "$LIST" | grep -v '^\s*$' | while read -r req; do
  name=${req%%==*}; norm=$(echo "$name" | tr '-' '_' | tr 'A-Z' 'a-z')
  if ls "$DEST" | tr 'A-Z' 'a-z' | grep -q "^${norm}-${req##*==}-"; then continue; fi
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    $PLATFORMS -d "$DEST" "$req"
done
if [ "${1:-serve}" = eval ]; then
  wheel=$(ls "$DEST"/lm_eval-*.whl)
  if unzip -l "$wheel" | grep -q "lm_eval/tasks/mmlu/"; then
    tmp=$(mktemp -d); unzip -q "$wheel" -d "$tmp"
    for d in "$tmp"/lm_eval/tasks/*/; do [ "$(basename "$d")" = gsm8k ] || rm -rf "$d"; done
    rm "$wheel"; (cd "$tmp" && zip -qr "$OLDPWD/$wheel" .); rm -rf "$tmp"
  fi
  mkdir -p .whl/gsm8k
  tar -cJf .whl/gsm8k/gsm8k.tar.xz -C ../shared/data gsm8k
fi
du -ch "$DEST"/*.whl | tail -1
