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
