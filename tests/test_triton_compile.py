"""index_topk's score kernel compiles for sm_90 on a CPU machine, and the fp8 index-K's CUDA scorer stays as lean as
the MXFP4 one (one subprocess: ``evals/bench/sass_counts.py --index-json``, ~15 s; a subprocess because the compile
must not run under the TRITON_INTERPRET=1 the CPU test session sets). Counts are whole-kernel SASS instructions (one
128-token tile per block visited, 4 warps); times are the H200 benchmark's (evals/bench/run_bench.py, indexer).

Measured 2026-12-03 (triton 3.6.0): MXFP4 PTX decode 872, fp8 hardware e4m3 + per-block scale 936, fp8 bit decode
4200 (that path ran at 0.49 TB/s on the H200, the MXFP4 scorer at 1.3-1.5 TB/s: docs/triton.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import _helpers as H  # noqa: E402

FP8_OVER_MXFP4_BUDGET = 1.2  # the fp8 scorer may cost at most 20% more instructions than the MXFP4 one (measured 1.07)
MXFP4 = "mxfp4 index-K, PTX decode (default)"
FP8 = "fp8 index-K, hardware e4m3 + per-block scale (default)"
FP8_BITS = "fp8 index-K, bit decode (the interpreter's path; the CUDA path before 2026-12-03)"


@pytest.fixture(scope="module")
def counts():
    return H.sm90_compile_report("sass_counts.py", "--index-json")


def test_every_scorer_compiles_without_spills(counts):
    for name, found in counts.items():
        assert found["ops"].get("LDL", 0) + found["ops"].get("STL", 0) == 0, f"{name} spills"
        assert found["ops"].get("HMMA", 0) > 0, f"{name}: the dot is not on the tensor cores"


def test_fp8_cuda_scorer_uses_the_hardware_conversion_and_stays_lean(counts):
    fp8, mx, bits = counts[FP8], counts[MXFP4], counts[FP8_BITS]
    assert fp8["ops"].get("F2F", 0) > 0 == bits["ops"].get("F2F", 0)  # hardware conversions; the bit decode has none
    assert fp8["instructions"] <= FP8_OVER_MXFP4_BUDGET * mx["instructions"], (fp8["instructions"],
                                                                              mx["instructions"])
    assert fp8["instructions"] * 3 < bits["instructions"]  # the per-element bit decode it replaced
