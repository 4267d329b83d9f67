#!/bin/bash
# call 3 (2026-12-04, late): a real SGLang 0.5.23 server (SERVE_TOPK=16: the tiny M3 with the real M3's top-k)
# through the serve scenarios on main with the merge reading only the splits that hold pages.
export PYTHONSAFEPATH=1
R=$OUT/r; mkdir -p $R; date -u > $R/date.txt; bash scripts/sources_hash.sh > $R/sources.txt 2>&1
SERVE_TOPK=16 SERVE_AGREEMENT=0 OUT=$R timeout 400 bash scripts/h200_serve.sh serve > /dev/null 2>&1
echo "serve rc $?"
grep -h -i "passed\|failed\|scenario\| ok" $R/serve/*.md 2>/dev/null | head -30
cd $OUT && tar czf results.tgz r && rm -rf r
