"""index_topk's score kernel compiles for sm_90 on a CPU machine, and the fp8 index-K's CUDA scorer stays as lean as
the MXFP4 one (one subprocess: ``evals/bench/sass_counts.py --index-json``, ~15 s; a subprocess because the compile
must not run under the TRITON_INTERPRET=1 the CPU test session sets). Counts are whole-kernel SASS instructions (one
128-token tile per block visited, 4 warps); times are the H200 benchmark's (evals/bench/run_bench.py, indexer).

Measured 2026-12-03 (triton 3.6.0): MXFP4 PTX decode 872, fp8 hardware e4m3 + per-block scale 936, fp8 bit decode
4200 (that path ran at 0.49 TB/s on the H200, the MXFP4 scorer at 1.3-1.5 TB/s: docs/triton.md). With the page loop
software-pipelined (SCORE_STAGES 5: two pages of cp.async copies in flight per program, docs/triton.md "Pages in
flight"): 1080, 1120, 3776 (the prologue's and the epilogue's copies and waits; the loop itself: 822 / 794).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import _helpers as H  # noqa: E402

from atom_mxfp4.layout import FP8_RECORD_BYTES, RECORD_BYTES  # noqa: E402

FP8_OVER_MXFP4_BUDGET = 1.2  # fp8 scorer instructions <= 1.2x the MXFP4 one (measured 1.07; pipelined 1.04)
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


def test_default_scorers_keep_two_pages_in_flight(counts):
    """The page loop is pipelined: its loads are async copies (LDGSTS) into shared memory holding >= 2 records."""
    for name, record in ((MXFP4, RECORD_BYTES), (FP8, FP8_RECORD_BYTES)):
        found = counts[name]
        assert found["ops"].get("LDGSTS", 0) > 0, f"{name}: no async copies (the page loads are not pipelined)"
        assert found["shared"] >= 2 * record, (name, found["shared"], record)


@pytest.fixture(scope="module")
def write_counts():
    return H.sm90_compile_report("sass_counts.py", "--write-json")


def test_fused_write_compiles_without_spills_one_warp_per_token(write_counts):
    """fused_qknorm_rope_write for sm_90 (tpp = tokens per program, one warp each). Measured (triton 3.6.0, MSE):
    before multi-token programs (strided pair loads, one token) 3176 SASS / 56 registers / 100 LDG; now tpp=1 3128 /
    54 / 36, tpp=4 3168 / 50 / 36: each warp runs the one-token path on its own token. The only shared-memory round
    trip is the 4 scale bytes' layout change, one per cache-writing branch (3 BAR); a layout that split a token's row
    over warps would add barriers to every row reduction."""
    for name, found in write_counts.items():
        assert found["local"] == 0 and found["ops"].get("LDL", 0) + found["ops"].get("STL", 0) == 0, name
        assert found["ops"].get("BAR", 0) <= 3, (name, found["ops"].get("BAR"))
    one = write_counts["tpp=1"]["instructions"]
    assert all(found["instructions"] <= 1.1 * one for found in write_counts.values()), write_counts
