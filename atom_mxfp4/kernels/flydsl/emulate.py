"""Host emulation of the gfx950 decode kernel's dataflow, lane by lane (numpy, CPU).

It runs the index maps of ``layout.py`` (the functions the kernel traces) over numpy lane vectors: the record
bytes each lane loads, the e2m1 decode with the lane's e8m0 scale, the MFMA operand placement (the
conventions stated in ``layout.py``), the -inf / zero masking of tokens past the context, the online softmax,
the bf16 V^T bytes written to and read back from the wave's LDS region (with the kernel's v_perm packing),
the 4-wave merge and the split-KV merge. Comparing it with the torch backend checks, without a GPU, that the
index arithmetic reads exactly the DESIGN §4 bytes and puts every token where the products expect it. What it
cannot check is the hardware itself: the true MFMA lane layouts and instruction semantics (gfx950 tests).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from . import layout as L

LANES = np.arange(L.WAVE)
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def _e8m0(byte):
    """e8m0 -> fp32 as the kernel builds it for V (bits ``e << 23``; 255 is NaN, 0 reads as 0)."""
    e = np.asarray(byte, dtype=np.uint32)
    return np.where(e == 255, np.float32(np.nan), (e << 23).view(np.float32))


def _bf16_bits(x):
    """fp32 -> bf16 bit pattern, round to nearest even (NaN kept NaN)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    return np.where(np.isnan(x), 0x7FC0, r).astype(np.uint32)


def _bf16_value(bits):
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32)


def _round_bf16(x):
    return _bf16_value(_bf16_bits(x))


def _perm(hi, lo, selector):
    """v_perm_b32 for selectors using byte codes 0..7 only."""
    pool = [(lo >> (8 * b)) & 0xFF for b in range(4)] + [(hi >> (8 * b)) & 0xFF for b in range(4)]
    out = np.zeros_like(lo)
    for b in range(4):
        out |= pool[(selector >> (8 * b)) & 0xFF] << (8 * b)
    return out


def _decode_codes(code_bytes):
    """[..., n] bytes -> [..., 2n] e2m1 values, low nibble first."""
    return np.stack([E2M1[code_bytes & 15], E2M1[code_bytes >> 4]], axis=-1).reshape(*code_bytes.shape[:-1], -1)


def _gather(record, offsets, count):
    return record[np.asarray(offsets)[..., None] + np.arange(count)]


def _query_operand(q_row, group, q_bf16):
    """Per lane: the 32 e4m3 values (as fp32) of its B operand, and the per-lane head dequant scale."""
    head = L.q_head(LANES)
    safe = np.minimum(head, group - 1)
    x = q_row.float()[safe][:, :]  # [64, 128]
    dims = np.stack([L.q_chunk_dim0(LANES, e >> 4) + (e & 15) for e in range(32)], axis=1)  # operand byte order
    vals = torch.gather(x, 1, torch.from_numpy(dims))  # [64, 32]
    if q_bf16:
        amax = x.abs().amax(dim=1)  # the kernel reduces the 4 lane groups of the head: same value
        scale = torch.where(amax > 0, amax * torch.tensor(1.0 / L.E4M3_MAX), torch.ones_like(amax))
        inv = 1.0 / scale
        vals = (vals * inv[:, None]).to(torch.float8_e4m3fn).float()
    else:
        scale = torch.ones(L.WAVE)
    vals = torch.where(torch.from_numpy(head < group)[:, None], vals, torch.zeros(()))
    return vals.numpy().astype(np.float32), scale.numpy().astype(np.float32)


def _qk(record, page_off, q_vals, lanes=LANES):
    """Result registers of the 4 scaled MFMAs: [4 sub-tiles, 64 lanes, 4 registers] fp32 (unscaled)."""
    regs = np.zeros((L.QK_SUBTILES, L.WAVE, 4), dtype=np.float32)
    g, c = L.lane_g(lanes), L.lane_c(lanes)
    assert np.all(L.mfma_k_fp4(lanes, 0) // 32 == g)  # the lane's A scale (block g) covers its own 32 codes
    for j in range(L.QK_SUBTILES):
        token = page_off + L.k_token(j, lanes)
        codes = _decode_codes(_gather(record, L.k_data_offset(token, lanes), 16))  # [64, 32]
        scale = _e8m0(record[L.k_scale_offset(token, lanes)])
        a = np.zeros((16, 128), dtype=np.float64)
        b = np.zeros((128, 16), dtype=np.float64)
        e = np.arange(32)
        a[c[:, None], L.mfma_k_fp4(lanes[:, None], e)] = codes * scale[:, None]  # scale of block g = own codes
        b[L.mfma_k_fp8(lanes[:, None], e), c[:, None]] = q_vals
        d = (a @ b).astype(np.float32)
        for i in range(4):
            regs[j, :, i] = d[4 * g + i, c]
    return regs


def _widen_v(record, page_off, tile_tok, part_end, lds, lanes=LANES):
    """V of the tile -> bf16 V^T bytes in the wave's LDS region (uint8 array), as the kernel packs them."""
    block = L.v_block(lanes)
    pairs = []
    for u in range(4):
        token = L.v_token(lanes, u)
        valid = tile_tok + token < part_end
        data = _gather(record, L.v_data_offset(page_off + token, lanes), 16)
        data = np.where(valid[:, None], data, 0)
        scale = _e8m0(np.where(valid, record[L.v_scale_offset(page_off + token, lanes)], L.E8M0_ONE))
        vals = _decode_codes(data) * scale[:, None]  # [64, 32] dims 32cb + e
        lo, hi = _bf16_bits(vals[:, 0::2]), _bf16_bits(vals[:, 1::2])
        pairs.append(lo | (hi << 16))  # [64, 16] i32: bf16 of dims 2p, 2p + 1
    first = L.v_token(lanes, 0)
    words = lds.view(np.uint32)
    for p in range(16):
        dim = 32 * block + 2 * p
        for half, selector in ((0, 0x05040100), (1, 0x07060302)):
            w01 = _perm(pairs[1][:, p], pairs[0][:, p], selector)
            w23 = _perm(pairs[3][:, p], pairs[2][:, p], selector)
            offset = L.vt_offset(dim + half, first)
            assert np.all(offset % 8 == 0)
            words[offset // 4] = w01
            words[offset // 4 + 1] = w23


def _pv(probs, lds, o_acc, lanes=LANES):
    """O^T += V^T P^T over the tile; probs [16 regs, 64 lanes]; o_acc [8 d-tiles, 64 lanes, 4] fp32."""
    g, c = L.lane_g(lanes), L.lane_c(lanes)
    halves = lds.view(np.uint16)
    for step in range(L.PV_STEPS):
        p = np.stack([probs[4 * (2 * step + (e >> 2)) + (e & 3)] for e in range(8)], axis=1)  # [64, 8]
        b = np.zeros((32, 16))
        b[8 * g[:, None] + np.arange(8), c[:, None]] = _round_bf16(p)
        for dt in range(L.D_TILES):
            dim = L.pv_dim(dt, lanes)
            a_vals = np.stack([halves[L.vt_offset(dim, L.pv_token(step, lanes, e)) // 2] for e in range(8)], axis=1)
            a = np.zeros((16, 32))
            a[c[:, None], 8 * g[:, None] + np.arange(8)] = _bf16_value(a_vals)
            d = (a @ b).astype(np.float32)
            for i in range(4):
                o_acc[dt, :, i] += d[4 * g + i, c]


def _wave(row_ctx, wave, part_start, part_end, table_row, k_rec, v_rec, q_vals, col_scale):
    """One wave's loop: (m [64 lanes], l_sum [64], o_acc [8, 64, 4])."""
    n_tiles = (max(part_end - part_start, 0) + L.TILE - 1) // L.TILE
    m_run = np.full(L.WAVE, -np.inf, dtype=np.float32)
    l_run = np.zeros(L.WAVE, dtype=np.float32)
    o_acc = np.zeros((L.D_TILES, L.WAVE, 4), dtype=np.float32)
    lds = np.zeros(L.WAVE_LDS_BYTES, dtype=np.uint8)
    g = L.lane_g(LANES)
    for it in range(wave, n_tiles, L.WAVES):
        tile_tok = part_start + it * L.TILE
        page = int(table_row[tile_tok >> 7])
        page_off = tile_tok & (L.PAGE_SIZE - 1)
        regs = _qk(k_rec[page], page_off, q_vals)  # [4, 64, 4]
        logits = []
        for j in range(L.QK_SUBTILES):
            for i in range(4):
                t = tile_tok + L.s_token(j, LANES, i)
                logits.append(np.where(t < part_end, regs[j, :, i] * col_scale, -np.inf).astype(np.float32))
        m_tile = np.max(np.stack(logits), axis=0)
        m_tile = np.maximum.reduce([m_tile[(LANES ^ x)] for x in (0, 16, 32, 48)])
        m_new = np.maximum(m_run, m_tile)
        alpha = np.exp2(m_run - m_new)
        probs = [np.exp2(s - m_new).astype(np.float32) for s in logits]
        l_run = l_run * alpha + np.sum(probs, axis=0)
        o_acc *= alpha[None, :, None]
        _widen_v(v_rec[page], page_off, tile_tok, part_end, lds)
        _pv(probs, lds, o_acc)
        m_run = m_new
    l_sum = np.sum([l_run[LANES ^ x] for x in (0, 16, 32, 48)], axis=0)
    del g
    return m_run, l_sum, o_acc


def _combine(waves, group):
    """The 4-wave merge: per head (m, l, O[128]) with O unnormalized."""
    heads = np.arange(group)
    ms = np.stack([w[0][heads] for w in waves])  # lanes 0..15 (g == 0) store m of head c
    ls = np.stack([w[1][heads] for w in waves])
    m = ms.max(axis=0)
    weights = np.where(ms == -np.inf, 0.0, np.exp2(ms - m)).astype(np.float32)
    total = (ls * weights).sum(axis=0)
    o = np.zeros((group, L.HEAD_DIM), dtype=np.float32)
    for w, (_, _, o_acc) in enumerate(waves):
        part = np.zeros((L.MAX_GROUP, L.HEAD_DIM), dtype=np.float32)
        for dt in range(L.D_TILES):
            for i in range(4):
                part[L.q_head(LANES), L.o_dim(dt, LANES, i)] = o_acc[dt, :, i]
        o += part[:group] * weights[w][:, None]
    return m, total, o


def emulate_pa_decode(q, k_cache, v_cache, tables, context_lens, *, softmax_scale, query_scale, num_splits,
                      partition_tokens):
    """Emulated kernel output [R, G, 128] fp32 (before the final bf16 rounding of ``out``)."""
    with np.errstate(over="ignore", invalid="ignore"):  # garbage tokens overflow / NaN before they are masked
        return _emulate(q, k_cache, v_cache, tables, context_lens, softmax_scale, query_scale, num_splits,
                        partition_tokens)


def _emulate(q, k_cache, v_cache, tables, context_lens, softmax_scale, query_scale, num_splits, partition_tokens):
    rows, group, _ = q.shape
    k_rec = k_cache.reshape(-1, L.RECORD_BYTES).numpy()
    v_rec = v_cache.reshape(-1, L.RECORD_BYTES).numpy()
    out = np.zeros((rows, group, L.HEAD_DIM), dtype=np.float32)
    logit_scale = np.float32(softmax_scale * L.LOG2E)
    for r in range(rows):
        ctx = max(min(int(context_lens[r]), tables.shape[1] * L.PAGE_SIZE), 0)
        # as the kernel: a split launch divides the row's own tokens (layout.row_tokens), one split takes the width
        share = L.row_tokens(ctx, num_splits, partition_tokens) if num_splits > 1 else partition_tokens
        q_vals, head_scale = _query_operand(q[r], group, q.dtype == torch.bfloat16)
        row_scale = np.float32(query_scale[r] if isinstance(query_scale, torch.Tensor) else
                               (1.0 if query_scale is None else query_scale))
        col_scale = (head_scale * row_scale * logit_scale).astype(np.float32)
        splits = []
        for s in range(num_splits):
            start = s * share
            end = min(ctx, start + share)
            waves = [_wave(ctx, w, start, end, tables[r].numpy(), k_rec, v_rec, q_vals, col_scale)
                     for w in range(L.WAVES)]
            m, total, o = _combine(waves, group)
            inv = np.where(total > 0, 1 / np.where(total > 0, total, 1), 0).astype(np.float32)
            splits.append((m, total, o * inv[:, None]))
        if num_splits == 1:
            out[r] = splits[0][2]
            continue
        used = min(math.ceil(ctx / share), num_splits)
        m_run = np.full(group, -np.inf, dtype=np.float32)
        l_run = np.zeros(group, dtype=np.float32)
        acc = np.zeros((group, L.HEAD_DIM), dtype=np.float32)
        for m_s, l_s, o_s in splits[:used]:
            m_new = np.maximum(m_run, m_s)
            alpha = np.exp2(m_run - m_new)
            weight = l_s * np.exp2(m_s - m_new)
            acc = acc * alpha[:, None] + o_s * weight[:, None]
            l_run = l_run * alpha + weight
            m_run = m_new
        out[r] = acc * np.where(l_run > 0, 1 / np.where(l_run > 0, l_run, 1), 0)[:, None]
    return torch.from_numpy(out)
