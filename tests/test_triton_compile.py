"""index_topk's score kernel compiles for sm_90 on a CPU machine, and the fp8 index-K's CUDA scorer stays as lean as
the MXFP4 one (one subprocess: ``atom_mxfp4/evals/bench/sass_counts.py --index-json``, ~15 s; a subprocess because
the compile must not run under the TRITON_INTERPRET=1 the CPU test session sets). Counts are whole-kernel SASS
instructions (one 128-token tile per block visited, 4 warps); times are the H200 benchmark's
(atom_mxfp4/evals/bench/run_bench.py, indexer).

Measured 2026-12-03 (triton 3.6.0): MXFP4 PTX decode 872, fp8 hardware e4m3 + per-block scale 936, fp8 bit decode
4200 (that path ran at 0.49 TB/s on the H200, the MXFP4 scorer at 1.3-1.5 TB/s: docs/triton.md). With the page loop
software-pipelined (SCORE_STAGES 5: two pages of cp.async copies in flight per program, docs/triton.md "Pages in
flight"): 1080, 1120, 3776 (the prologue's and the epilogue's copies and waits; the loop itself: 822 / 794).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import _helpers as H

from atom_mxfp4.layout import FP8_RECORD_BYTES, RECORD_BYTES

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


def test_fused_write_compiles_within_its_row_budget(write_counts):
    """fused_qknorm_rope_write for sm_90 under write_config's three shapes, MSE (the longest quantize).
    Static SASS per 128-value head row (sass_counts.branch_counts), measured (triton 3.6.0): one token per one-warp
    program, 32 lanes per row (before 2026-12-03 night): q 258, k 905, v ~750, idx_k 905; 8 tokens x 2 q heads on
    4 warps (16 lanes per row): q 120, k 442, v 317, idx_k 419 (fp8 250), idx_q 130; since 2026-12-03 (late), q and
    idx_q rows as RoPE halves (``_norm_rope_halves``: no partner recomputed, 8 lanes per row): q 79, idx_q 98; with
    ``early_loads`` (the small and medium shapes' default since 2026-12-03 / 04) q 76, idx_q 95 at 72 / 64
    registers. The budgets keep ~10% of room. No spills but under the large shape's 56-register cap (<= 4 STL / LDL
    allowed there). The only shared-memory round trip is the 4 scale bytes' layout change (3 BAR)."""
    budget = {"q": 90, "k": 490, "v": 350, "idx_k": 460, "idx_q": 110}
    for name, found in write_counts.items():
        spills = found["ops"].get("LDL", 0) + found["ops"].get("STL", 0)
        assert found["local"] == 0 and spills <= (4 if found["maxnreg"] is not None else 0), (name, spills)
        assert found["ops"].get("BAR", 0) <= 3, (name, found["ops"].get("BAR"))
    for name in ("medium (write_config(512))", "large (write_config(8192))", "large, fp8 index-K",
                 "medium, loads after the norm", "large shape at 64 registers, early loads"):
        per_row = write_counts[name]["per_row"]
        assert all(per_row[kind] <= budget[kind] for kind in budget), (name, per_row, budget)


def test_early_loads_issue_every_load_before_the_norm(write_counts):
    """Without early_loads the weights, cos / sin and RoPE partners of a row are loaded after its norm's sqrt /
    division (calls the compiler does not move loads across), so a program waits on two load round trips;
    WriteConfig(early_loads=True), the small and medium shapes' default, issues them before it: no global load after
    the first MUFU.RSQ of any branch at the medium shape (72 registers), none in the k / idx_k branches and fewer in q
    at the large shape capped at 64 registers."""
    default = write_counts["medium, loads after the norm"]["loads_after_norm"]
    early = write_counts["medium (write_config(512))"]["loads_after_norm"]
    capped = write_counts["large shape at 64 registers, early loads"]["loads_after_norm"]
    assert default["q"] > 0 and default["k"] > 0, default
    assert all(n == 0 for n in early.values()), early
    assert capped["k"] == capped["idx_k"] == 0 and capped["q"] < default["q"], capped


# ---- every series a user may run (H.TRITON_SERIES) ------------------------------------------------------------------
# The shipped kernels as each series compiles them for sm_90: the installed 3.6.0 (CI's), 3.8.0 (torch 2.14.1's pin,
# SGLang 0.5.23's) and 3.9.0 (torch 2.15's; the Triton kernels are what AMD devices and other NVIDIA ones run, and
# what an H100 / H200 ran under 3.9 before the Hopper backend took that series). Local loads + stores (LDL + STL, the
# whole kernel) measured 2026-12-04: none under 3.6.0; 3.8.0's pa_decode 2 + 2, outside its loop; 3.9.0's
# pa_decode 5 + 5 (one LDL in its 1543-instruction loop), the large write 3 + 3 and with the fp8 index-K 4 + 2 (both
# under the 56-register cap). A count that grows fails (docs/triton.md "Other triton series").
SHIPPED_SPILL_OPS = {"installed": {}, "3.8": {"pa_decode": 4},
                     "3.9": {"pa_decode": 10, "write, large": 6, "write, large, fp8 index-K": 6}}
SHIPPED_LOOP_SPILL_LOADS = {"installed": 0, "3.8": 0, "3.9": 1}  # pa_decode's main loop


@pytest.mark.parametrize("series", H.TRITON_SERIES)
def test_shipped_kernels_compile_under_each_triton_series(series):
    folder = H.triton_series_dir(series)
    decode = H.sm90_compile_report("sass_counts.py", "--decode-json", triton_dir=folder)
    index = H.sm90_compile_report("sass_counts.py", "--index-json", triton_dir=folder)
    write = H.sm90_compile_report("sass_counts.py", "--write-json", triton_dir=folder)
    shipped = {"pa_decode": decode["PTX decode (default)"], "pa_decode, split": decode["PTX decode (default), split"],
               "index_topk, mxfp4 index-K": index[MXFP4], "index_topk, fp8 index-K": index[FP8],
               "write, small": write["small (write_config(1))"], "write, medium": write["medium (write_config(512))"],
               "write, large": write["large (write_config(8192))"],
               "write, large, fp8 index-K": write["large, fp8 index-K"]}
    for name, found in shipped.items():
        ops = found["ops"]
        spills = ops.get("LDL", 0) + ops.get("STL", 0)
        assert spills <= SHIPPED_SPILL_OPS[series].get(name, 0), (series, name, spills)
        assert (ops.get("HMMA", 0) > 0) == (not name.startswith("write")), (series, name)  # dots on the tensor cores
    assert decode["PTX decode (default)"]["loop_spill_loads"] <= SHIPPED_LOOP_SPILL_LOADS[series], decode


QUERY_SCALE_COMPILE = """
import json, sys
sys.path.insert(0, sys.argv[1])  # atom_mxfp4/evals/bench
import sass_counts as S
compiled = {}
for kind in ("*fp64", "*fp32", "*fp16", "*bf16"):
    try:
        S.compile_sass(S.decode.DecodeConfig(), query_scale=kind)
        compiled[kind] = "ok"
    except Exception as error:
        compiled[kind] = type(error).__name__ + ": " + str(error)[-300:]
print(json.dumps(compiled))
"""


def test_pa_decode_compiles_for_every_query_scale_dtype(tmp_path):
    """A query_scale tensor of fp64 (or fp16 / bf16) passes ops.pa_decode(check=False) to the Triton kernel, which
    read it as the dtype given and carried the loop's softmax state in fp64: the compile failed on the H200 ("m_i has
    initial type fp32 but is re-assigned to fp64"; the CPU interpreter computes it). The scale is cast to fp32 on load;
    each dtype compiles for sm_90."""
    script = tmp_path / "query_scale_compile.py"
    script.write_text(QUERY_SCALE_COMPILE)
    compiled = H.sm90_compile_report(str(script),
                                     str(Path(__file__).resolve().parents[1] / "atom_mxfp4" / "evals" / "bench"))
    assert compiled == {kind: "ok" for kind in ("*fp64", "*fp32", "*fp16", "*bf16")}, compiled
