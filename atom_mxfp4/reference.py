"""The oracle: MiniMax-M3 attention of one layer at full precision, for whole requests.

fp64 throughout, K / V / index-K unquantized (optionally rounded through another cache dtype by ``kv_round``),
exact top-k block selection with the same rules as ``index_topk`` (forced init/local blocks, ties to the smaller
block id), causal attention over the selected blocks. It shares no code with the kernels: it is the yardstick.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from .layout import HEAD_DIM, PAGE_SIZE, qkv_rows


def _angles(positions: torch.Tensor, rotary_dim: int, theta: float) -> torch.Tensor:
    """NeoX RoPE angles [T, rotary_dim / 2] in fp64, derived here on purpose (not from ``atom_mxfp4.rope``): the
    frequency of pair ``i`` is ``exp(-(2i / rotary_dim) * ln(theta))``, one Python float each."""
    inv_freq = torch.tensor([math.exp(-(2 * i / rotary_dim) * math.log(theta)) for i in range(rotary_dim // 2)],
                            dtype=torch.float64)
    return positions.double().cpu()[:, None] * inv_freq[None, :]


@dataclass
class OracleResult:
    out: torch.Tensor  # [Tq, nq * D] fp64: attention output before o_proj
    selected: torch.Tensor | None  # [nkv, Tq, topk] i64 ascending, -1 padded (sparse layers)


def _norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * (1 + weight.double())


def _rope(x: torch.Tensor, positions: torch.Tensor, rotary_dim: int, theta: float) -> torch.Tensor:
    half = rotary_dim // 2
    angle = _angles(positions, rotary_dim, theta)
    cos, sin = angle.cos()[:, None, :], angle.sin()[:, None, :]
    x1, x2 = x[..., :half], x[..., half:rotary_dim]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin, x[..., rotary_dim:]), dim=-1)


def _select(scores: list[float], own: int, topk: int, init_blocks: int, local_blocks: int) -> list[int]:
    """Blocks 0..own with their scores -> the kept ids, ascending. Forced blocks rank above every score (init above
    local, each kind tied); a NaN score ranks as -inf; ties go to the smaller id."""
    ranked = []
    for b, s in enumerate(scores[: own + 1]):
        level = 2 if b < init_blocks else 1 if b > own - local_blocks else 0
        ranked.append((-level, 0.0 if level else -s if s == s else float("inf"), b))  # best first
    return sorted(b for *_, b in sorted(ranked)[: min(topk, own + 1)])


def attention_oracle(qkv: torch.Tensor, weights: dict, config, query_positions: torch.Tensor | None = None,
                     kv_round: Callable[[torch.Tensor], torch.Tensor] | None = None,
                     index_k_round: Callable[[torch.Tensor], torch.Tensor] | None = None) -> OracleResult:
    """One request, all its tokens ``qkv [N, W]`` (position = row index), queried at ``query_positions``.

    ``config`` is a ``layer.LayerConfig``; ``weights`` holds ``q_norm``, ``k_norm``, ``idx_q_norm``, ``idx_k_norm``
    ([D] tensors). ``kv_round`` (e.g. a round trip through fp8) is applied to k, v and idx_k after norm/RoPE;
    ``index_k_round``, when given, replaces it for idx_k (an index-K cache of another dtype than K / V).
    """
    nq, nkv, niq, d = config.num_q_heads, config.num_kv_heads, config.num_index_heads, HEAD_DIM
    n = qkv.shape[0]
    query_positions = torch.arange(n) if query_positions is None else query_positions.cpu().long()
    x = qkv.double().cpu().view(n, -1, d)
    positions = torch.arange(n)
    w = {key: value.double().cpu() for key, value in weights.items()}

    def prep(heads, weight, at=positions):
        """QK-norm + RoPE of head rows [len(at), H, D] at positions ``at``."""
        return _rope(_norm(heads, w[weight], config.eps), at, config.rotary_dim, config.rope_theta)

    keep = kv_round or (lambda t: t)
    rows = qkv_rows(nq, nkv, config.index_heads)
    q = prep(x[query_positions, rows.q], "q_norm", query_positions)  # [Tq, nq, D]: only the queried rows
    k = keep(prep(x[:, rows.k], "k_norm"))  # [N, nkv, D]
    v = keep(x[:, rows.v])
    scale = config.softmax_scale
    group = nq // nkv
    tq = query_positions.numel()
    allowed = torch.arange(n)[None, :] <= query_positions[:, None]  # [Tq, N] causal
    selected = None
    if config.sparse:
        idx_q = prep(x[query_positions, rows.idx_q], "idx_q_norm", query_positions)  # [Tq, niq, D]
        keep_index = keep if index_k_round is None else index_k_round
        idx_k = keep_index(prep(x[:, rows.idx_k], "idx_k_norm"))[:, 0]  # [N, D]
        block_scores = torch.einsum("rhd,td->hrt", idx_q, idx_k).masked_fill(~allowed[None], float("-inf"))
        nblocks = -(-n // PAGE_SIZE)
        padded = torch.full((niq, tq, nblocks * PAGE_SIZE), float("-inf"), dtype=torch.float64)
        padded[..., :n] = block_scores
        block_scores = padded.view(niq, tq, nblocks, PAGE_SIZE).amax(-1)
        selected = torch.full((niq, tq, config.topk), -1, dtype=torch.int64)
        token_block = torch.arange(n) // PAGE_SIZE
        masks = torch.zeros(niq, tq, n, dtype=torch.bool)
        for h in range(niq):
            for r in range(tq):
                own = int(query_positions[r]) // PAGE_SIZE
                ids = _select(block_scores[h, r].tolist(), own, config.topk, config.init_blocks,
                              config.local_blocks)
                selected[h, r, : len(ids)] = torch.tensor(ids)
                masks[h, r] = torch.isin(token_block, torch.tensor(ids)) & allowed[r]
    out = torch.empty(tq, nkv, group, d, dtype=torch.float64)
    for h in range(nkv):
        mask = masks[h] if config.sparse else allowed  # [Tq, N]
        logits = torch.einsum("rgd,td->rgt", q[:, h * group : (h + 1) * group], k[:, h]) * scale
        logits = logits.masked_fill(~mask[:, None, :], float("-inf"))
        out[:, h] = torch.einsum("rgt,td->rgd", torch.softmax(logits, dim=-1), v[:, h])
    return OracleResult(out.reshape(tq, nq * d), selected)
