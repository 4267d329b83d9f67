"""Synthetic but realistic MiniMax-M3 attention inputs: what a 4-bit cache has to survive.

A request is the fused projection ``qkv [N, W]`` (bf16, before QK-norm) of N tokens with:
- per-channel scale spread (log-normal) in q/k/idx and Gemma norm weights ``1 + w`` spread around 1;
- outlier channels in V (a few channels 8x larger);
- an attention sink at position 0 (a key direction every query leans towards);
- needles: tokens whose key / index-key point along a direction that the request's later queries seek
  (in the non-rotary dims, so the match does not depend on distance), with a distinctive value vector.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .layout import HEAD_DIM, qkv_rows


@dataclass
class SyntheticRequest:
    qkv: torch.Tensor  # [N, W] bf16
    needles: list[int]  # positions of needle tokens
    seek_from: int  # queries at positions >= seek_from look for the needles


def make_weights(config, seed: int = 0) -> dict[str, torch.Tensor]:
    """Gemma QK-norm weights ([D] fp32, multiplier ``1 + w``) with a realistic per-channel spread."""
    g = torch.Generator().manual_seed(seed)
    names = ["q_norm", "k_norm"] + (["idx_q_norm", "idx_k_norm"] if config.sparse else [])
    return {name: 0.3 * torch.randn(HEAD_DIM, generator=g) for name in names}


def _unit(g: torch.Generator, non_rotary_from: int) -> torch.Tensor:
    u = torch.zeros(HEAD_DIM)
    u[non_rotary_from:] = torch.randn(HEAD_DIM - non_rotary_from, generator=g)
    return u / u.norm()


def make_request(config, num_tokens: int, needles: list[int], seek_from: int, seed: int = 0,
                 needle_strength: float = 0.8, sink_strength: float = 0.3, outlier_fraction: float = 0.03,
                 family: str = "realistic") -> SyntheticRequest:
    """One request of ``num_tokens`` tokens; queries at positions >= ``seek_from`` seek ``needles``.

    ``family``: ``realistic`` (all the features above) or ``gaussian`` (i.i.d. N(0, 1), no structure).
    """
    g = torch.Generator().manual_seed(seed)
    rows = qkv_rows(config.num_q_heads, config.num_kv_heads, config.index_heads)
    x = torch.randn(num_tokens, rows.heads, HEAD_DIM, generator=g)
    if family == "gaussian":
        return SyntheticRequest(x.reshape(num_tokens, -1).bfloat16(), list(needles), seek_from)

    q, k, v, iq, ik = rows
    x *= torch.exp(0.5 * torch.randn(HEAD_DIM, generator=g))  # per-channel scale spread
    outliers = torch.rand(HEAD_DIM, generator=g) < outlier_fraction
    x[:, v] *= 1 + 7 * outliers.float()  # outlier channels in V
    rms = x.pow(2).mean(-1, keepdim=True).sqrt()  # queries mix in directions at the scale of the row

    sink = _unit(g, config.rotary_dim)
    x[0, k] = sink * HEAD_DIM**0.5 * 3  # the sink key
    x[0, ik] = sink * HEAD_DIM**0.5 * 3
    x[:, q] += sink_strength * sink * rms[:, q] * HEAD_DIM**0.5
    for p in needles:
        u = _unit(g, config.rotary_dim)
        x[p, k] = u * HEAD_DIM**0.5 * 3 + 0.1 * x[p, k]
        x[p, ik] = u * HEAD_DIM**0.5 * 3
        x[p, v] = 4 * torch.sign(torch.randn(HEAD_DIM, generator=g))
        later = slice(seek_from, num_tokens)
        x[later, q] += needle_strength * u * rms[later, q] * HEAD_DIM**0.5
        x[later, iq] += needle_strength * u * rms[later, iq] * HEAD_DIM**0.5
    return SyntheticRequest(x.reshape(num_tokens, -1).bfloat16(), list(needles), seek_from)
