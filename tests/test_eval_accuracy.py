"""`atom-mxfp4 eval accuracy` at CPU size: the study runs end to end and its numbers are consistent.

Small geometry: N = 1024 tokens (8 blocks), top-4 blocks, so the sparse selection really drops blocks.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from atom_mxfp4.evals import accuracy, accuracy_report
from atom_mxfp4.evals.accuracy_data import heavy_tail_request, make_family
from atom_mxfp4.evals.cli import main
from atom_mxfp4.layer import LayerConfig

MODES = ("ceil", "floor", "mse")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("accuracy")
    rc = main(["eval", "accuracy", "--tokens", "1024", "--long-tokens", "1536", "--queries", "8", "--topk", "4",
               "--needle-depths", "0.2,0.7", "--device", "cpu", "--backend", "torch", "--out-dir", str(out)])
    assert rc == 0
    return out, json.loads((out / "results.json").read_text())


def _by(results, family, cache, layer="sparse"):
    rows = [r for r in results["rows"] if r["family"] == family and r["cache"] == cache and r["layer"] == layer]
    assert len(rows) == 1, (family, cache, len(rows))
    return rows[0]


def test_study_writes_report_and_plots(study):
    out, results = study
    md = (out / "results.md").read_text()
    assert "--topk 4" in results["command"]
    for title in ("Output rel-L2", "Top-k block agreement", "Needle recall", "Summary over all cases"):
        assert title in md
    for name in ("rel_l2_by_family.png", "needle_recall_by_depth.png", "rel_l2_vs_context.png"):
        png = (out / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000, name
        assert f"]({name})" in md
    families = {r["family"] for r in results["rows"]}
    assert families == {"gaussian", "heavy_tail", "sink", "needles", "long", "near_dup"}


def test_codec_vs_layer_under_sparse_selection(study):
    _, results = study
    for family in ("gaussian", "heavy_tail", "sink", "needles", "long"):  # near_dup: its own test below
        exact = _by(results, family, "exact")
        assert exact["rel_l2"] == 0.0 and exact["topk_agreement"] == 1.0
        bf16 = _by(results, family, "bf16")
        assert 0 < bf16["rel_l2"] < 0.01 and bf16["topk_agreement"] >= 0.9, family
        for mode in MODES:
            layer = _by(results, family, f"mxfp4-{mode}")
            emulated = _by(results, family, f"mxfp4-{mode} (emulated)")
            # the layer's kernels (bf16 q and output, fp32 math) add little over the codec itself: same
            # selection and nearly the same output as the fp64 oracle over MXFP4-rounded K / V / index-K
            assert abs(layer["rel_l2"] - emulated["rel_l2"]) <= 0.1 * emulated["rel_l2"] + 0.01, (family, mode)
            assert abs(layer["topk_agreement"] - emulated["topk_agreement"]) <= 0.1, (family, mode)
            assert layer["rel_l2"] > 5 * bf16["rel_l2"], (family, mode)
            # top-4 of 8-12 blocks: the 4-bit index-K flips some blocks, never most of them
            assert 0.5 <= layer["topk_agreement"] <= 1.0
            # the fp8 index-K: the layer against the oracle whose index-K goes through the same fp8 codec
            layer8 = _by(results, family, f"mxfp4-{mode} idx-fp8")
            emulated8 = _by(results, family, f"mxfp4-{mode} idx-fp8 (emulated)")
            assert abs(layer8["rel_l2"] - emulated8["rel_l2"]) <= 0.1 * emulated8["rel_l2"] + 0.01, (family, mode)
            assert abs(layer8["topk_agreement"] - emulated8["topk_agreement"]) <= 0.1, (family, mode)
            _by(results, family, f"mxfp4-{mode} idx-fp8-token (emulated)")  # the layout that lost is measured


def test_near_dup_needles_are_found_by_the_exact_scorer(study):
    """near_dup: near-tied blocks (so no bf16 bound on agreement), but the exact oracle finds every needle pair it
    asks for, and the fp8 index-K keeps at least as many as the 4-bit one (a difference below the e2m1 grid)."""
    _, results = study
    exact = _by(results, "near_dup", "exact")
    assert exact["needle_asked"] > 0 and exact["needle_hits"] == exact["needle_asked"]
    for mode in MODES:
        assert (_by(results, "near_dup", f"mxfp4-{mode} idx-fp8")["needle_kept"]
                >= _by(results, "near_dup", f"mxfp4-{mode}")["needle_kept"]), mode


def test_precision_ordering_when_every_block_is_kept():
    """top-16 over 8 blocks keeps everything: no selection flips, errors order by cache precision, and the
    sparse layer computes what the dense layer computes."""
    results = accuracy.run_study(_args(["--families", "gaussian,heavy_tail", "--tokens", "1024", "--queries", "8",
                                        "--dense", "--no-emulate", "--no-plots"]))
    for family in ("gaussian", "heavy_tail"):
        bf16, fp8 = _by(results, family, "bf16")["rel_l2"], _by(results, family, "fp8")["rel_l2"]
        assert 0 < bf16 < fp8 < 0.1, (family, bf16, fp8)
        for mode in MODES:
            row = _by(results, family, f"mxfp4-{mode}")
            dense = _by(results, family, f"mxfp4-{mode}", "dense")
            assert row["topk_agreement"] == 1.0
            assert fp8 < row["rel_l2"] < 1.0, (family, mode, row["rel_l2"])
            assert row["rel_l2"] == pytest.approx(dense["rel_l2"], rel=0.02, abs=2e-3), (family, mode)
    # block scales set by x10 outlier channels zero most of a block: heavy tails hurt MXFP4 most
    for mode in MODES:
        assert (_by(results, "heavy_tail", f"mxfp4-{mode}")["rel_l2"]
                > _by(results, "gaussian", f"mxfp4-{mode}")["rel_l2"])
    summary = accuracy_report.mode_summary(results)
    for mode in MODES:
        dense = [r["rel_l2"] for r in results["rows"] if r["cache"] == f"mxfp4-{mode}" and r["layer"] == "dense"]
        assert summary[f"mxfp4-{mode}"]["dense_geomean_rel_l2"] == pytest.approx(math.sqrt(dense[0] * dense[1]))


def _args(argv):
    import argparse

    parser = argparse.ArgumentParser()
    accuracy.add_arguments(parser)
    return parser.parse_args(argv + ["--device", "cpu", "--backend", "torch"])


def test_mode_summary_matches_rows(study):
    _, results = study
    summary = accuracy_report.mode_summary(results)
    for mode in MODES:
        rows = [r["rel_l2"] for r in results["rows"] if r["cache"] == f"mxfp4-{mode}" and r["layer"] == "sparse"]
        assert summary[f"mxfp4-{mode}"]["worst_rel_l2"] == pytest.approx(max(rows))
        assert min(rows) <= summary[f"mxfp4-{mode}"]["geomean_rel_l2"] <= max(rows)


def test_pairwise_wins_count_cases(study):
    _, results = study
    modes, wins = accuracy_report.pairwise_wins(results, "sparse")
    assert modes == sorted([f"mxfp4-{m}" for m in MODES] + [f"mxfp4-{m} idx-fp8" for m in MODES])
    rel = {(r["family"], r["tokens"], r["cache"]): r["rel_l2"] for r in results["rows"] if r["layer"] == "sparse"}
    cases = {(f, n) for f, n, _ in rel}
    for a in modes:
        for b in modes:
            if a != b:
                assert wins[(a, b)] == (sum(rel[c + (a,)] < rel[c + (b,)] for c in cases), len(cases))
    assert "sign test" in (study[0] / "results.md").read_text()


def test_sign_test():
    from atom_mxfp4.evals.stats import sign_test

    assert sign_test(15, 18) == pytest.approx(2 * sum(math.comb(18, i) for i in range(4)) / 2**18)
    assert sign_test(9, 18) == 1.0 and sign_test(0, 0) == 1.0
    with pytest.raises(ValueError, match="wins must be in"):
        sign_test(5, 4)


def test_needle_recall_counts_rows_after_the_needle():
    # topk [niq=1, R=3, 2]: needle at 130 (block 1); rows at 100 (before it), 200, 300
    topk = torch.tensor([[[0, 1], [1, 2], [0, 2]]], dtype=torch.int32)
    got = accuracy.needle_recall(topk, [130], torch.tensor([100, 200, 300]))
    assert got == {130: (1, 2)}


def test_reference_roundings():
    x = torch.tensor([1000.0, -1000.0, 1.0 + 2**-5, 3.0], dtype=torch.float64)
    fp8 = accuracy._round_fp8(x)
    assert fp8.tolist() == [448.0, -448.0, 1.0, 3.0]  # saturates; 1 + 2^-5 is below half an e4m3 ulp
    assert accuracy._round_bf16(x)[2].item() == 1.0 + 2**-5  # representable in bf16
    mx = accuracy._round_mxfp4(accuracy.ScaleMode.CEIL)(torch.linspace(-6, 6, 32, dtype=torch.float64))
    assert mx.abs().max().item() == 6.0 and torch.isfinite(mx).all()


def test_heavy_tail_has_outlier_channels():
    config = LayerConfig(max_position=4096)
    req = heavy_tail_request(config, 512, seed=3)
    x = req.qkv.float().view(512, -1, 128)
    k_rms = x[:, config.num_q_heads].pow(2).mean(0).sqrt()  # per-channel rms of K
    assert (k_rms > 5 * k_rms.median()).sum().item() == 4
    with pytest.raises(ValueError, match="family must be one of"):
        make_family("uniform", config, 512, 8, [0.5], 0)
