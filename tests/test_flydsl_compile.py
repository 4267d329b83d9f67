"""Every FlyDSL specialization we ship compiles for gfx950 on a CPU machine; the ISA has what the design needs.

Compilation runs once per session (module fixture, 2 subprocesses at a time, ~15 s each) through
``atom_mxfp4.kernels.flydsl.compile.compile_isa`` (FLYDSL_COMPILE_ONLY=1, ARCH=gfx950, ld.lld via ziglang).
The figures asserted here are the ones recorded in docs/flydsl.md (checked below, so the page cannot go stale).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

flydsl = pytest.importorskip("flydsl", reason="flydsl not installed (scripts/install.d/20-flydsl.sh)")
pytest.importorskip("ziglang", reason="ziglang not installed (scripts/install.d/20-flydsl.sh)")

from atom_mxfp4.kernels.flydsl import compile as C  # noqa: E402
from atom_mxfp4.kernels.flydsl import layout as L  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "flydsl.md"

SHIPPED = C.SHIPPED
DECODE = [name for name, _ in SHIPPED if name.startswith("decode")]
MERGE = [name for name, _ in SHIPPED if name.startswith("merge")]


@pytest.fixture(scope="module")
def reports():
    return C.compile_shipped(workers=2)


def _lines(report, mnemonic):
    return [line.strip() for line in report.isa.splitlines() if line.strip().startswith(mnemonic + " ")]


@pytest.mark.parametrize("name", DECODE)
def test_qk_is_the_scaled_mfma_with_fp4_a_and_fp8_b(reports, name):
    lines = _lines(reports[name], "v_mfma_scale_f32_16x16x128_f8f6f4")
    assert len(lines) == L.QK_SUBTILES, lines  # one per 16-token sub-tile of the loop body
    for line in lines:
        assert "cbsz:4" in line, line  # A format 4 = fp4 e2m1
        assert "blgp:" not in line, line  # B format 0 = fp8 e4m3 (the assembler omits the default)


@pytest.mark.parametrize("name", DECODE)
def test_v_is_widened_by_the_fp4_to_bf16_convert_for_a_bf16_pv_mfma(reports, name):
    report = reports[name]
    # 4 tokens x 16 bytes per lane and tile, one convert per byte (2 codes)
    assert report.count("v_cvt_scalef32_pk_bf16_fp4") == 4 * 16
    assert report.count("v_mfma_f32_16x16x32_bf16") == L.PV_STEPS * L.D_TILES
    assert report.count("ds_write") > 0 and report.count("ds_read") > 0  # V^T goes through LDS


@pytest.mark.parametrize("name", DECODE)
def test_query_quantization_only_for_bf16_queries(reports, name):
    fp8_converts = reports[name].count("v_cvt_pk_fp8_f32")
    assert fp8_converts == (0 if "e4m3" in name else 16)  # 128 dims / 64 lanes ... 32 per lane, 2 per convert


@pytest.mark.parametrize("name", DECODE)
def test_one_workgroup_barrier_after_the_loop(reports, name):
    # softmax / P / O stay wave-private inside the loop; the 4 waves meet once, for the merge
    assert reports[name].count("s_barrier") == 1


@pytest.mark.parametrize("name", DECODE + MERGE)
def test_no_scratch_no_spills_within_gfx950_limits(reports, name):
    report = reports[name]
    assert report.scratch_bytes == 0 and report.vgpr_spills == 0 and report.sgpr_spills == 0, report.summary()
    assert not [line for line in report.isa.splitlines() if re.match(r"\s+scratch_", line)]
    assert report.vgprs + report.agprs <= C.GFX950_MAX_VGPRS
    assert report.sgprs <= C.GFX950_MAX_SGPRS
    assert report.lds_bytes <= C.GFX950_LDS_BYTES
    if name in DECODE:
        assert report.lds_bytes == L.LDS_BYTES


@pytest.mark.parametrize("name", MERGE)
def test_merge_kernel_is_plain_fp32(reports, name):
    report = reports[name]
    assert report.count("v_mfma") == 0 and report.lds_bytes == 0 and report.count("s_barrier") == 0


def test_other_architectures_are_refused_before_compiling():
    for arch in ("gfx942", "gfx90a", "gfx1100", "sm_90"):
        with pytest.raises(ValueError, match=r"gfx950.*got '" + arch):
            C.compile_isa(16, False, arch=arch)


def test_figures_in_docs_match_the_compiler(reports):
    """docs/flydsl.md holds `| name | VGPR | AGPR | SGPR | LDS | scratch | spills | instructions |` rows."""
    text = DOC.read_text()
    for name, report in reports.items():
        row = C.table_row(name, report)
        assert row in text, f"docs/flydsl.md is stale for {name!r}; expected row:\n{row}\n" \
                            f"(regenerate: python -m atom_mxfp4.kernels.flydsl.compile --table)"
