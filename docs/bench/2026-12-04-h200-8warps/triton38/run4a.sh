#!/bin/bash
# calls A1 / A2: stash what this call carries (part one of the triton 3.8.0 package; the SGLang wheel) for call B
mkdir -p /tmp/t38 && cp -v .whl/t38a/part_aa /tmp/t38/ 2>/dev/null; cp -v .whl/serve/sglang-0.5.23-*.whl /tmp/t38/ 2>/dev/null
ls -la /tmp/t38
