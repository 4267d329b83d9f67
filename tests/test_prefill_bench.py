"""The prefill bench (atom_mxfp4/evals/bench/prefill_bench.py) end to end on the CPU at small sizes: every op and
peer of every chunk is timed (none failed), the table holds a row per chunk with the dense peer's ratio, and a chunk
that is not whole pages is refused by name."""

from __future__ import annotations

import json

import pytest

from atom_mxfp4.evals import ledger
from atom_mxfp4.evals.bench import prefill_bench


def test_every_op_of_every_chunk_is_timed(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # the tiled scorer: the next test (slow interpreted)
    assert prefill_bench.main(["--out", str(tmp_path), "--context", "384", "--chunk", "256", "--device", "cpu",
                               "--reps", "1", "--index-k", "fp8,mxfp4", "--commit", "abc1234"]) == 0
    report = json.loads((tmp_path / "prefill.json").read_text())
    assert report["backend"] == "torch" and [(r["index_k"], r["prefix"], r["chunk"]) for r in report["rows"]] == [
        ("fp8", 0, 256), ("fp8", 256, 128), ("mxfp4", 0, 256), ("mxfp4", 256, 128)]
    for row in report["rows"]:
        assert "errors" not in row, row
        for op in ("write", "index", "attend_sparse", "attend_dense", "layer_sparse", "layer_dense",
                   "layer_dense_flash"):
            assert row[op] > 0, (op, row)
        assert row["dense_flash_rel_l2"] < 2.0 ** -7  # tests/test_layer.py's ROUNDED_TOL
    assert report["rows"][1]["pairs"] == 128 * 256 + 128 * 129 // 2
    assert report["rows"][0]["peer_attend_dense"] > 0 and report["rows"][0]["peer_index"] > 0
    rows = ledger.read(tmp_path / "ledger_rows.csv")
    keys = {(r["op"], r["shape"], r["metric"]) for r in rows}  # one row per number
    assert len(keys) == len(rows) and all(r["commit"] == "abc1234" and r["value"] != "" for r in rows)
    assert ("prefill chunk: layer_dense_flash", "prefix 256 + chunk 128 of one 384-token prompt, 16 q heads, "
            "mxfp4 index-K", "rel_l2") in keys
    md = (tmp_path / "prefill.md").read_text()
    assert md.count("\n| fp8 |") == 2 and md.count("\n| mxfp4 |") == 2 and "x |" in md


def test_the_tiled_scorer_is_timed_and_its_ids_compared(tmp_path, capsys):
    # under the Triton interpreter (tests/conftest.py) as on a GPU: the scorer is handed the cache's records
    assert prefill_bench.main(["--out", str(tmp_path), "--context", "256", "--chunk", "256", "--device", "cpu",
                               "--reps", "1", "--index-k", "fp8", "--no-peers"]) == 0
    (row,) = json.loads((tmp_path / "prefill.json").read_text())["rows"]
    assert row["index_tiled16"] > 0 and row["index_tiled32"] > 0 and row["index_tiled_same_ids"] is True


def test_a_chunk_of_part_pages_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        prefill_bench.main(["--out", str(tmp_path), "--chunk", "200", "--device", "cpu"])
    assert "--chunk must be a positive multiple of 128, got 200" in capsys.readouterr().err
