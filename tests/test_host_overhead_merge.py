"""host_overhead.py --merge: several runs of one tree as one report (host times the fastest, GPU times the median);
runs of another commit or other rows are refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "atom_mxfp4" / "evals" / "bench"))
import host_overhead  # noqa: E402


def _run(commit: str, host: float, gpu: float | None, op: str = "pa_decode") -> dict:
    row = {"backend": "hopper", "batch": 64, "context": 8192, "op": op, "host_us_check_False": host,
           "host_us_check_True": 2 * host, "gpu_us": gpu}
    return {"label": "x", "commit": commit, "gpu": "cpu (launches recorded)", "date": "2026-12-07",
            "command": "python3 atom_mxfp4/evals/bench/host_overhead.py --recorded", "rows": [row]}


def test_runs_merge_into_the_fastest_host_times_and_the_median_gpu_time(tmp_path):
    paths = []
    for i, (host, gpu) in enumerate(((30.0, 5.0), (20.0, 9.0), (25.0, 6.0))):
        paths.append(tmp_path / f"run{i}.json")
        paths[-1].write_text(json.dumps(_run("abc1234", host, gpu)))
    assert host_overhead.main(["--out", str(tmp_path / "out"), "--label", "new", "--merge", *map(str, paths)]) == 0
    report = json.loads((tmp_path / "out" / "new.json").read_text())
    (row,) = report["rows"]
    assert (row["host_us_check_False"], row["host_us_check_True"], row["gpu_us"]) == (20.0, 40.0, 6.0)
    assert report["label"] == "new" and "x 3 runs merged, host times the fastest" in report["command"]
    ledger = (tmp_path / "out" / "ledger_rows_new.csv").read_text()
    assert "host_us_check_false,20.0" in ledger


def test_runs_of_another_commit_or_other_rows_are_refused(tmp_path):
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text(json.dumps(_run("abc1234", 1.0, None)))
    b.write_text(json.dumps(_run("def5678", 1.0, None)))
    c.write_text(json.dumps(_run("abc1234", 1.0, None, op="write")))
    for other in (b, c):
        with pytest.raises(SystemExit, match="one commit with the same rows"):
            host_overhead.main(["--out", str(tmp_path / "out"), "--merge", str(a), str(other)])
