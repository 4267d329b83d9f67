"""fused_qknorm_rope_write, torch reference: Gemma QK-norm + partial NeoX RoPE + MXFP4 cache write.

The arithmetic is the exact one of docs/api.md (fp64 sum of squares, fp32 elsewhere, no FMA), so that
kernels can match the cache bytes bit for bit.
"""

import torch

from atom_mxfp4.format import quantize_mxfp4
from atom_mxfp4.layout import HEAD_DIM, NO_SLOT, PAGE_SIZE, data_view, qkv_rows, scale_view
from atom_mxfp4.rope import apply_rope_neox
from atom_mxfp4.index_k import IndexKDtype, fp8_data_view, fp8_scale_view, quantize_fp8


def qk_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Gemma RMSNorm per head row. x [..., D] fp32 -> [..., D] fp32: ``x * rsqrt(mean(x^2) + eps) * (1 + w)``."""
    mean_square = ((x.double() ** 2).sum(-1, keepdim=True) / x.shape[-1]).float()
    # correctly rounded fp32 sqrt: fp64 sqrt rounded once to fp32 (torch's vectorised fp32 sqrt on CPU is not)
    root = torch.sqrt((mean_square + eps).double()).float()
    inv_rms = 1.0 / root
    return (x * inv_rms) * (1.0 + weight.float())


def write_tokens(records: torch.Tensor, slots: torch.Tensor, values: torch.Tensor, scale_mode) -> None:
    """Quantize values [N, heads, D] and store them at token slots [N] (all >= 0) of records [pages, heads, 8704]."""
    data, scale = quantize_mxfp4(values, scale_mode)
    page, offset = slots // PAGE_SIZE, slots % PAGE_SIZE
    data_view(records)[page, :, offset] = data
    scale_view(records)[page, :, offset] = scale


def write_fp8_tokens(records: torch.Tensor, slots: torch.Tensor, values: torch.Tensor) -> None:
    """fp8 index-K: quantize values [N, 1, D] (e4m3 + per-32 e8m0) into token slots [N] (all >= 0) of records
    [pages, 1, 16896]."""
    data, scale = quantize_fp8(values)
    page, offset = slots // PAGE_SIZE, slots % PAGE_SIZE
    fp8_data_view(records)[page, :, offset] = data
    fp8_scale_view(records)[page, :, offset] = scale


def fused_qknorm_rope_write(qkv, positions, q_norm_weight, k_norm_weight, idx_q_norm_weight, idx_k_norm_weight,
                            cos_sin_cache, slot_mapping, k_cache, v_cache, index_k_cache, *, num_q_heads,
                            num_kv_heads, num_index_heads, rotary_dim, eps, scale_mode, q_dtype,
                            index_k_dtype=IndexKDtype.MXFP4):
    # qkv [T, W] bf16 = [q (nq*D) | k (nkv*D) | v (nkv*D) | idx_q (niq*D) | idx_k (D)]
    num_tokens = qkv.shape[0]
    nq, nkv, niq = num_q_heads, num_kv_heads, num_index_heads
    if num_tokens == 0:
        empty = qkv.new_empty((0, nq, HEAD_DIM), dtype=q_dtype)
        return empty, (qkv.new_empty((0, niq, HEAD_DIM), dtype=torch.bfloat16) if niq else None)
    heads = qkv.view(num_tokens, -1, HEAD_DIM).float()
    cos_sin = cos_sin_cache[positions].float()  # [T, rotary_dim]

    def norm_rope(x, weight):
        return apply_rope_neox(qk_norm(x, weight, eps), cos_sin, rotary_dim)

    rows = qkv_rows(nq, nkv, niq)
    q = norm_rope(heads[:, rows.q], q_norm_weight)
    k = norm_rope(heads[:, rows.k], k_norm_weight)
    v = heads[:, rows.v]

    keep = slot_mapping != NO_SLOT  # slot -1: do not write (ops validated slots >= -1)
    slots = slot_mapping[keep]
    write_tokens(k_cache, slots, k[keep], scale_mode)
    write_tokens(v_cache, slots, v[keep], scale_mode)

    idx_q = None
    if niq:
        idx_q = norm_rope(heads[:, rows.idx_q], idx_q_norm_weight).to(torch.bfloat16)
        idx_k = norm_rope(heads[:, rows.idx_k], idx_k_norm_weight)
        if IndexKDtype.parse(index_k_dtype) is IndexKDtype.FP8:
            write_fp8_tokens(index_k_cache, slots, idx_k[keep])
        else:
            write_tokens(index_k_cache, slots, idx_k[keep], scale_mode)
    return q.to(q_dtype), idx_q
