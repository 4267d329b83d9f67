"""serve_check's speed scenario arithmetic (atom_mxfp4.evals.serve_check.decode_rate): decode tokens/s counts only the
tokens that arrived after the last request's first token, so requests that started decoding early do not inflate it
(the first H100 run's graph server read 1.4x high that way)."""

from __future__ import annotations

import pytest

from atom_mxfp4.evals.serve_check import decode_rate


def _run(ttft: float, tokens: int, chunks: int, gap: float) -> dict:
    times = [round(ttft + i * gap, 6) for i in range(chunks)]
    return {"ttft": ttft, "seconds": times[-1], "tokens": tokens, "chunk_seconds": times, "finished": True}


def test_staggered_first_tokens_count_only_the_window():
    # A decodes from 0.1 s, B from 0.6 s; both 11 tokens 0.1 s apart: the window is 0.6 .. 1.6 s
    early, late = _run(0.1, 11, 11, 0.1), _run(0.6, 11, 11, 0.1)
    rate = decode_rate([early, late], [0.0, 0.0])
    assert rate["output_tokens_per_s"] == pytest.approx(15.0)  # A's 5 tokens after 0.6 s + B's 10; all 20 read 20.0
    assert rate["ms_per_output_token"] == pytest.approx(100.0)
    assert rate["first_token_spread_ms"] == pytest.approx(500.0)


def test_offsets_and_chunks_of_several_tokens():
    # the same requests, B started 0.5 s later with its first token 0.1 s after its start; chunks of 2 tokens
    early, late = _run(0.1, 21, 11, 0.1), _run(0.1, 21, 11, 0.1)
    rate = decode_rate([early, late], [0.0, 0.5])
    assert rate["output_tokens_per_s"] == pytest.approx(30.0)  # (5 + 10) chunks x 2 tokens over 1.0 s
    assert rate["ms_per_output_token"] == pytest.approx(50.0)


def test_requests_at_once_read_their_sum():
    runs = [_run(0.2, 11, 11, 0.1) for _ in range(8)]
    assert decode_rate(runs, [0.0] * 8)["output_tokens_per_s"] == pytest.approx(80.0)


def test_our_host_time_per_decode_batch_is_read_from_the_meter_lines():
    """The speed run's servers log ATOM_MXFP4_HOST_METER lines; a decode run's share is their decode batches' mean,
    weighted by batches (lines with no decode batch left out, and the window's first line: it may hold batches from
    before the window); none without lines."""
    from atom_mxfp4.evals.serve_check import host_time

    line = ("[t] atom_mxfp4 host time, last {n} batches: decode {d} (metadata {m} us + attention {a} us over 4.0 "
            "layers = {t} us a batch); extend 0\n")
    log = (line.format(n=50, d=50, m=9000.0, a=1.0, t=9001.0)  # the first: a warm-up's compile in it
           + line.format(n=50, d=50, m=40.0, a=160.0, t=200.0) + "[t] Decode batch\n"
           + line.format(n=25, d=25, m=70.0, a=230.0, t=300.0)
           + "[t] atom_mxfp4 host time, last 3 batches: decode 0; extend 3 (metadata 1.0 us + attention 2.0 us over "
             "2.0 layers = 3.0 us a batch)\n")
    assert host_time(log) == {"batches": 75, "metadata_us": 50.0, "attention_us": 183.3, "total_us": 233.3,
                              "layers": 4.0}
    assert host_time("[t] Decode batch\n") is None
    assert host_time(line.format(n=50, d=50, m=40.0, a=160.0, t=200.0)) is None  # a first line alone
