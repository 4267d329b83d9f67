"""RoPE of the layer and the torch backend (DESIGN §2): NeoX, partial (the first ``rotary_dim`` dims rotate).

``cos_sin_cache[pos] = [cos(rotary_dim / 2) | sin(rotary_dim / 2)]`` fp32, angles ``pos * theta**(-2i / rotary_dim)``
computed in fp64 and rounded once. The oracle (``atom_mxfp4.reference``) derives its angles on its own, so a bug
here shows up as a layer-vs-oracle mismatch instead of moving both.
"""

from __future__ import annotations

import torch


def rope_cos_sin(max_position: int, rotary_dim: int, theta: float, dtype=torch.float32) -> torch.Tensor:
    """NeoX RoPE table [max_position, rotary_dim] = [cos(rotary_dim/2) | sin(rotary_dim/2)], computed in fp64."""
    inv_freq = 1.0 / theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    angles = torch.arange(max_position).double()[:, None] * inv_freq[None, :]  # [max_position, rotary_dim / 2]
    return torch.cat((angles.cos(), angles.sin()), dim=-1).to(dtype)


def apply_rope_neox(x: torch.Tensor, cos_sin: torch.Tensor, rotary_dim: int) -> torch.Tensor:
    """Partial NeoX RoPE on the first ``rotary_dim`` dims. x [T, H, D] fp32, cos_sin [T, rotary_dim] fp32 (the rows
    of the table at each token's position); dims past ``rotary_dim`` pass through."""
    half = rotary_dim // 2
    cos, sin = cos_sin[:, None, :half], cos_sin[:, None, half:rotary_dim]
    x1, x2 = x[..., :half], x[..., half:rotary_dim]
    out1 = x1 * cos - x2 * sin
    out2 = x2 * cos + x1 * sin
    return torch.cat((out1, out2, x[..., rotary_dim:]), dim=-1)
