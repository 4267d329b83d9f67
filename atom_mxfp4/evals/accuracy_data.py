"""Synthetic request families for the accuracy study (what a 4-bit KV cache has to survive).

Every family returns an `atom_mxfp4.synthetic.SyntheticRequest` (qkv [N, W] bf16 before QK-norm, needle
positions, `seek_from` = first position whose queries seek the needles). All but `heavy_tail` are the lead's
generator (`atom_mxfp4.synthetic.make_request`) with family-specific knobs:

| family | what it stresses |
|---|---|
| gaussian | i.i.d. N(0, 1): the easy case, the codec's own error floor (no needles) |
| heavy_tail | Student-t (3 dof) entries + outlier channels x10 in K, V and index-K: a 32-block scale set by one
  outlier |
| sink | a strong attention sink at position 0 that every query leans on (no needles) |
| needles | the realistic mix (channel spread, V outliers, sink) + needles at `depths` of the prompt |
| long | `needles` at long contexts (the caller picks N) |
| near_dup | one shared index key on every token (+-2% jitter) and needles that differ from it in 3 non-rotary channels
  by +30% of the key's RMS: a difference finer than the e2m1 grid of the block, hard for a 4-bit scorer |
"""

from __future__ import annotations

import torch

from atom_mxfp4.layout import HEAD_DIM, qkv_rows
from atom_mxfp4.errors import fail
from atom_mxfp4.synthetic import SyntheticRequest, make_request

FAMILIES = ("gaussian", "heavy_tail", "sink", "needles", "long", "near_dup")


def needle_positions(num_tokens: int, num_queries: int, depths: list[float]) -> list[int]:
    """Needle positions at fractions `depths` of the prompt (the tokens before the query rows)."""
    prompt = num_tokens - num_queries
    return sorted({min(prompt - 1, max(0, int(d * prompt))) for d in depths})


def heavy_tail_request(config, num_tokens: int, seed: int, outlier_channels: int = 4,
                       outlier_gain: float = 10.0) -> SyntheticRequest:
    """Student-t(3) entries (unit-variance scaled) with `outlier_channels` channels x `outlier_gain` in K, V, idx-K."""
    g = torch.Generator().manual_seed(seed)
    rows = qkv_rows(config.num_q_heads, config.num_kv_heads, config.index_heads)
    heads = rows.heads
    # t(3) = N(0,1) / sqrt(chi2(3) / 3); variance 3, so divide by sqrt(3)
    normal = torch.randn(num_tokens, heads, HEAD_DIM, generator=g)
    chi2 = torch.randn(num_tokens, heads, HEAD_DIM, 3, generator=g).pow(2).sum(-1)
    x = normal / (chi2 / 3).sqrt() / 3**0.5
    channels = torch.randperm(HEAD_DIM, generator=g)[:outlier_channels]
    gain = torch.ones(HEAD_DIM)
    gain[channels] = outlier_gain
    x[:, rows.k] *= gain
    x[:, rows.v] *= gain
    x[:, rows.idx_k] *= gain  # index-K (none on dense layers)
    return SyntheticRequest(x.reshape(num_tokens, -1).bfloat16(), [], num_tokens)


def near_duplicate_request(config, num_tokens: int, needles: list[int], seek_from: int, seed: int,
                           needle_strength: float = 1.0, channels: int = 3, delta: float = 0.3,
                           jitter: float = 0.02) -> SyntheticRequest:
    """Every token's index key is one base key ``b`` (log-normal channel spread, non-rotary channels) plus
    ``jitter * rms(b)`` Gaussian noise; needle j adds ``delta * rms(b)`` on its own ``channels`` non-rotary channels,
    and the queries at positions >= ``seek_from`` seek those channels (``needle_strength`` x a unit-RMS random
    query). q, k, v: i.i.d. N(0, 1). The exact scorer ranks the needle's block first by ``delta`` against the jitter;
    a scorer whose rounding step near ``b`` is coarser than ``delta`` loses it."""
    g = torch.Generator().manual_seed(seed)
    nq, nkv, niq = config.num_q_heads, config.num_kv_heads, config.index_heads
    heads = nq + 2 * nkv + niq + (1 if niq else 0)
    x = torch.randn(num_tokens, heads, HEAD_DIM, generator=g)
    if not niq:
        return SyntheticRequest(x.reshape(num_tokens, -1).bfloat16(), list(needles), seek_from)
    iq, ik = slice(nq + 2 * nkv, nq + 2 * nkv + niq), heads - 1
    base = torch.randn(HEAD_DIM, generator=g) * torch.exp(0.5 * torch.randn(HEAD_DIM, generator=g))
    base[: config.rotary_dim] = 0.0  # RoPE would make the rotary half differ by position: jitter only there
    rms = base[config.rotary_dim :].pow(2).mean().sqrt()
    x[:, ik] = base + jitter * rms * torch.randn(num_tokens, HEAD_DIM, generator=g)
    free = config.rotary_dim + torch.randperm(HEAD_DIM - config.rotary_dim, generator=g)  # non-rotary channels
    seek = torch.zeros(HEAD_DIM)
    for j, p in enumerate(needles):
        own = free[(j * channels) % free.numel():][:channels]
        x[p, ik, own] += delta * rms
        seek[own] = 1.0
    if needles:
        seek = seek / seek.pow(2).mean().sqrt()
        x[seek_from:, iq] += needle_strength * seek
    return SyntheticRequest(x.reshape(num_tokens, -1).bfloat16(), list(needles), seek_from)


def make_family(name: str, config, num_tokens: int, num_queries: int, depths: list[float],
                seed: int, needle_strength: float = 1.0) -> SyntheticRequest:
    """One request of `num_tokens` tokens of family `name`; its last `num_queries` tokens are the query rows."""
    seek_from = num_tokens - num_queries
    if name == "gaussian":
        return make_request(config, num_tokens, [], seek_from, seed=seed, family="gaussian")
    if name == "heavy_tail":
        return heavy_tail_request(config, num_tokens, seed)
    if name == "sink":
        return make_request(config, num_tokens, [], seek_from, seed=seed, sink_strength=1.0)
    if name in ("needles", "long"):
        return make_request(config, num_tokens, needle_positions(num_tokens, num_queries, depths), seek_from,
                            seed=seed, needle_strength=needle_strength)
    if name == "near_dup":
        return near_duplicate_request(config, num_tokens, needle_positions(num_tokens, num_queries, depths),
                                      seek_from, seed, needle_strength)
    fail("family", f"one of {list(FAMILIES)}", repr(name))
