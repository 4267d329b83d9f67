#!/usr/bin/env bash
# Download the wheels of wheels-serve.txt (and wheels-eval.txt) for the lent H200 (CPython 3.12, x86_64, manylinux)
# into the ignored folder .whl/ at the repo root, which the device call carries. Run here, where pip reaches PyPI:
#   bash scripts/serve_env/fetch_wheels.sh            # server wheels only (the first call)
#   bash scripts/serve_env/fetch_wheels.sh eval       # lm-eval wheels (a second call; 64 MiB travel per call)
# Idempotent: a wheel already in .whl/ is not fetched again. Prints the total size (the device limit is 64 MiB).
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
du -ch "$DEST"/*.whl | tail -1
