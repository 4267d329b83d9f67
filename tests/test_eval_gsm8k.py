"""`atom-mxfp4 eval gsm8k` end to end through the real lm-eval harness against mock servers on loopback.

The mock servers (atom_mxfp4.evals.mock_server) answer the local GSM8K test questions right or wrong by a
fixed per-index pattern; every number the CLI reports is checked against what that pattern implies,
with the statistics recomputed independently (scipy) where possible.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from atom_mxfp4.evals import stats
from atom_mxfp4.evals.cli import main
from atom_mxfp4.evals.gsm8k import endpoint, local_task_config
from atom_mxfp4.evals.mock_server import MockServer, expected_outcomes

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("GSM8K_DATA_DIR", REPO.parent / "shared" / "data" / "gsm8k"))
needs_data = pytest.mark.skipif(not (DATA_DIR / "test.jsonl").is_file(),
                                reason=f"GSM8K data not found at {DATA_DIR} (set GSM8K_DATA_DIR)")
FILTERS = ("strict-match", "flexible-extract")


@pytest.fixture
def servers():
    started = []

    def start(pattern: str) -> MockServer:
        srv = MockServer(DATA_DIR, pattern).start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.shutdown()
        srv.server_close()


def _sample_se(xs: list[int]) -> float:
    n = len(xs)
    mu = sum(xs) / n
    return math.sqrt(sum((x - mu) ** 2 for x in xs) / (n - 1) / n)


@needs_data
def test_gsm8k_ab_matches_rule(servers, tmp_path, capsys):
    scipy_stats = pytest.importorskip("scipy.stats")
    limit, cand_pattern, base_pattern = 20, "SFW", "WSSF"
    cand, base = servers(cand_pattern), servers(base_pattern)
    out = tmp_path / "ab.json"
    rc = main(["eval", "gsm8k", "--url", cand.url, "--baseline-url", base.url + "/v1",
               "--data-dir", str(DATA_DIR), "--limit", str(limit), "--num-concurrent", "4",
               "--output", str(out)])
    assert rc == 0
    captured = capsys.readouterr()
    summary = json.loads(out.read_text())
    # every request of 5-shot prompts reached the servers, one per question
    assert cand.requests_served == limit and base.requests_served == limit
    want_c, want_b = expected_outcomes(limit, cand_pattern), expected_outcomes(limit, base_pattern)
    for f in FILTERS:
        row = summary["filters"][f]
        assert row["doc_ids"] == list(range(limit))
        assert row["candidate_outcomes"] == want_c[f]
        assert row["baseline_outcomes"] == want_b[f]
        for side, want in (("candidate", want_c[f]), ("baseline", want_b[f])):
            assert row[side]["correct"] == sum(want)
            assert summary[side]["lm_eval_scores"][f] == pytest.approx(sum(want) / limit)  # lm-eval's own score
            assert row[side]["mean"] == pytest.approx(sum(want) / limit)
            assert row[side]["stderr"] == pytest.approx(_sample_se(want))
        d = [x - y for x, y in zip(want_c[f], want_b[f])]
        assert row["diff"] == pytest.approx(sum(d) / limit)
        assert row["diff_stderr"] == pytest.approx(_sample_se(d))
        b = sum(1 for x, y in zip(want_c[f], want_b[f]) if x and not y)
        c = sum(1 for x, y in zip(want_c[f], want_b[f]) if y and not x)
        m = row["mcnemar"]
        assert (m["b"], m["c"]) == (b, c)
        assert m["p_exact"] == pytest.approx(scipy_stats.binomtest(b, b + c, 0.5).pvalue)
        chi2 = max(abs(b - c) - 1, 0) ** 2 / (b + c)
        assert m["p_chi2"] == pytest.approx(scipy_stats.chi2.sf(chi2, 1))
        # the markdown table shows the same numbers
        assert f"| {f} | {limit} | {row['candidate']['mean']:.4f} ± {row['candidate']['stderr']:.4f} |" \
               f" {row['baseline']['mean']:.4f}" in captured.out
        assert f"| {b} / {c} |" in captured.out
    # per-question records: the text each server generated, per doc id (the "The answer is" form is the F class)
    responses = summary["candidate"]["responses"]
    assert sorted(int(k) for k in responses) == list(range(limit))
    assert ("The answer is" in responses["1"]) and ("####" in responses["0"])
    # the rule makes the two filters differ, so a swapped filter would be caught
    assert summary["filters"]["strict-match"]["candidate"]["correct"] == 7
    assert summary["filters"]["flexible-extract"]["candidate"]["correct"] == 14
    # progress is visible while it runs
    assert "[gsm8k candidate]" in captured.err and "[gsm8k baseline]" in captured.err
    assert "Requesting API" in captured.err


@needs_data
def test_gsm8k_compare_two_saved_runs(servers, tmp_path, capsys):
    """One server at a time (one node): two single runs saved, then paired offline with --compare."""
    limit = 6
    paths = []
    for pattern in ("SSW", "WFS"):
        srv = servers(pattern)
        paths.append(tmp_path / f"{pattern}.json")
        assert main(["eval", "gsm8k", "--url", srv.url, "--data-dir", str(DATA_DIR), "--limit", str(limit),
                     "--output", str(paths[-1])]) == 0
    out = tmp_path / "pair.json"
    assert main(["eval", "gsm8k", "--compare", str(paths[0]), str(paths[1]), "--output", str(out)]) == 0
    summary = json.loads(out.read_text())
    want_c, want_b = expected_outcomes(limit, "SSW"), expected_outcomes(limit, "WFS")
    for f in FILTERS:
        row = summary["filters"][f]
        assert row["candidate_outcomes"] == want_c[f] and row["baseline_outcomes"] == want_b[f]
        b = sum(x and not y for x, y in zip(want_c[f], want_b[f]))
        c = sum(y and not x for x, y in zip(want_c[f], want_b[f]))
        assert (row["mcnemar"]["b"], row["mcnemar"]["c"]) == (b, c)
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "gsm8k", "--limit", "3"])
    assert exit_info.value.code == 2
    assert "error: --url must be given (or --compare" in capsys.readouterr().err


@needs_data
def test_gsm8k_single_chat_api(servers, tmp_path):
    limit, pattern = 9, "FSWS"
    srv = servers(pattern)
    out = tmp_path / "one.json"
    assert main(["eval", "gsm8k", "--url", srv.url, "--api", "chat", "--data-dir", str(DATA_DIR),
                 "--limit", str(limit), "--num-concurrent", "2", "--output", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert "baseline" not in summary
    want = expected_outcomes(limit, pattern)
    for f in FILTERS:
        assert summary["filters"][f]["candidate_outcomes"] == want[f]
        assert summary["filters"][f]["candidate"]["mean"] == pytest.approx(sum(want[f]) / limit)


def _free_port() -> int:
    """A loopback port nothing listens on (bound, read, closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("dead_flag", ["--url", "--baseline-url"])
def test_gsm8k_refuses_a_server_that_is_not_listening(dead_flag, tmp_path):
    """A dead --url ended in 4 lm-eval tracebacks after its retries; now one line and exit 1 before lm-eval starts.

    With a dead --baseline-url the candidate is a socket that listens but never answers: a run that reached it
    would hang until --timeout, so the baseline's check comes first."""
    for name in ("test.jsonl", "train.jsonl"):
        (tmp_path / name).write_text("")
    dead = f"http://127.0.0.1:{_free_port()}"
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        alive = f"http://127.0.0.1:{listening.getsockname()[1]}"
        urls = {"--url": dead} if dead_flag == "--url" else {"--url": alive, "--baseline-url": dead + "/v1"}
        argv = ["eval", "gsm8k", *(x for kv in urls.items() for x in kv), "--data-dir", str(tmp_path),
                "--limit", "2", "--timeout", "5"]
        proc = subprocess.run([sys.executable, "-m", "atom_mxfp4.cli", *argv], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)
    lines = (proc.stdout + proc.stderr).splitlines()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines == [f"atom-mxfp4 eval gsm8k: error: {dead_flag} must be a server accepting connections, "
                     f"got {urls[dead_flag]} (127.0.0.1:{dead.rsplit(':', 1)[1]}: connection refused)"]


def test_reachability_check_names_a_timeout(monkeypatch):
    from atom_mxfp4.evals import gsm8k

    def no_answer(address, timeout):
        raise TimeoutError("timed out")

    monkeypatch.setattr(gsm8k.socket, "create_connection", no_answer)
    with pytest.raises(ValueError) as ei:
        gsm8k.expect_reachable("https://h.example/v1", "--baseline-url", timeout=2.5)
    assert str(ei.value) == ("--baseline-url must be a server accepting connections, got https://h.example/v1 "
                             "(h.example:443: no answer in 2.5 s)")


def test_local_task_config_names_missing_files(tmp_path):
    (tmp_path / "test.jsonl").write_text("")
    with pytest.raises(ValueError, match="data_dir.*train.jsonl"):
        local_task_config(tmp_path)


def test_endpoint_normalization():
    assert endpoint("http://h:1", "completions") == "http://h:1/v1/completions"
    assert endpoint("http://h:1/v1/", "chat") == "http://h:1/v1/chat/completions"
    assert endpoint("http://h:1/v1/completions", "completions") == "http://h:1/v1/completions"


def test_mcnemar_against_scipy():
    scipy_stats = pytest.importorskip("scipy.stats")
    import random

    rng = random.Random(7)
    for _ in range(50):
        n = rng.randint(2, 60)
        a = [rng.randint(0, 1) for _ in range(n)]
        b = [rng.randint(0, 1) for _ in range(n)]
        m = stats.mcnemar(a, b)
        n01 = sum(x > y for x, y in zip(a, b))
        n10 = sum(y > x for x, y in zip(a, b))
        assert (m.b, m.c) == (n01, n10)
        want = scipy_stats.binomtest(n01, n01 + n10, 0.5).pvalue if n01 + n10 else 1.0
        assert m.p_exact == pytest.approx(want, rel=1e-9)


def test_stats_reject_bad_input():
    with pytest.raises(ValueError, match="a and b must have the same length"):
        stats.compare([1, 0], [1])
    with pytest.raises(ValueError, match="only 0/1"):
        stats.proportion([2, 0])
