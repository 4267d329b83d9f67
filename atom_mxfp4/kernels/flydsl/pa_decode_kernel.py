"""The gfx950 MXFP4 paged-attention decode kernel (FlyDSL) and its split-KV merge kernel.

Grid (rows, splits); workgroup = 4 waves. Per 64-token tile a wave runs (index maps: ``layout.py``):
  QK  4 x v_mfma_scale_f32_16x16x128_f8f6f4: A = 16 tokens of K (e2m1 codes straight from the record, e8m0
      block scale per lane), B = Q^T (e4m3; a bf16 query is quantized per head row on entry);
  softmax  online, base 2, per head column, wave-private (m, l, O in registers);
  V   e2m1 -> bf16 with v_cvt_scalef32_pk_bf16_fp4, written transposed into the wave's own LDS region;
  PV  16 x v_mfma_f32_16x16x32_bf16: A = V^T from LDS, B = P^T from the lane's own QK registers.
After the loop the 4 waves merge once through LDS; the direct path writes bf16 ``out``, the split path writes
a normalized fp32 partial plus (m, l) per (row, split, head) for ``merge_kernel``.

Tokens t >= context_len get logit -inf, and their V codes / scales are replaced by 0 / 1.0 before widening,
so NaN, Inf or scale 255 in unowned bytes cannot reach ``out`` (0 * NaN would). Table entries are read only
for tiles that hold a valid token.
"""

from __future__ import annotations

import functools

import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import const_expr, gpu, range_constexpr

from . import _ir
from . import layout as L

SUPPORTED_ARCHS = ("gfx950",)
NEG_INF = float("-inf")


def check_arch(arch: str) -> None:
    if arch not in SUPPORTED_ARCHS:
        raise ValueError(
            f"arch must be one of {list(SUPPORTED_ARCHS)} (the FlyDSL MXFP4 decode kernel needs the gfx950 "
            f"scaled MFMA and fp4 converts), got {arch!r}"
        )


# ---- pieces traced into the kernel (plain Python: loops here unroll at trace time) -------------------------------
def _load_query(q_addr, row, lane, *, group, q_bf16):
    """The lane's B operand (8 x i32: 32 e4m3 of head c, byte e = dim ``mfma_k_fp8(lane, e)``, i.e. two chunks of
    16 contiguous dims) and the head's dequant scale (1 for an e4m3 query)."""
    head = L.q_head(lane)
    head_safe = fx.min(head, fx.Int32(group - 1)) if group < L.MAX_GROUP else head
    row_elem = (fx.Int64(row) * group + fx.Int64(head_safe)) * L.HEAD_DIM
    q_ptr = _ir.global_ptr(q_addr)
    chunks = [row_elem + fx.Int64(L.q_chunk_dim0(lane, c)) for c in range(2)]  # element offsets of 16 dims each
    if q_bf16:
        # 2 x 16 bf16 -> fp32; amax over the head row (the 4 lane groups hold 32 dims each)
        words = [_ir.load(q_ptr, elem * 2 + 16 * k, _ir.vec(4, _ir.i32()), 16) for elem in chunks for k in range(2)]
        values = []  # in operand byte order e = 0 .. 31
        for w in words:
            halves = _ir.bitcast(_ir.vec(8, _ir.bf16()), w)
            for e in range(8):
                values.append(fx.Float32(fx.BFloat16(_ir.extract(halves, e))))
        amax = fx.Float32(0.0)
        for x in values:
            amax = fx.maxnumf(amax, fx.math.absf(x))
        amax = fx.maxnumf(amax, _ir.shuffle_xor(amax, 16))
        amax = fx.maxnumf(amax, _ir.shuffle_xor(amax, 32))
        scale = (amax > fx.Float32(0.0)).select(amax * fx.Float32(1.0 / L.E4M3_MAX), fx.Float32(1.0))
        inv = fx.Float32(1.0) / scale
        packed = []
        for k in range(8):
            x = [values[4 * k + e] * inv for e in range(4)]
            lo = _ir.cvt_f32_to_fp8x2(x[0], x[1], fx.Int32(0), False)
            packed.append(_ir.cvt_f32_to_fp8x2(x[2], x[3], lo, True))
        operand = _ir.from_elements(_ir.vec(8, _ir.i32()), packed)
    else:
        halves = [_ir.load(q_ptr, elem, _ir.vec(4, _ir.i32()), 16) for elem in chunks]
        operand = _ir.from_elements(_ir.vec(8, _ir.i32()), [_ir.extract(h, i) for h in halves for i in range(4)])
        scale = fx.Float32(1.0)
    if group < L.MAX_GROUP:
        zeros = _ir.from_elements(_ir.vec(8, _ir.i32()), [fx.Int32(0)] * 8)
        operand = _ir.select(head < fx.Int32(group), operand, zeros)
    return operand, scale


def _qk_tile(k_ptr, record, page_off, tile_tok, part_end, q_operand, col_scale, lane):
    """16 logits per lane (4 sub-tiles x 4 registers), base-2 scaled, -inf for tokens >= part_end."""
    zero_acc = _ir.from_elements(_ir.vec(4, _ir.f32()), [fx.Float32(0.0)] * 4)
    logits = []
    for j in range_constexpr(L.QK_SUBTILES):
        token = page_off + L.k_token(j, lane)
        data = _ir.load(k_ptr, record + fx.Int64(L.k_data_offset(token, lane)), _ir.vec(4, _ir.i32()), 16)
        scale_byte = _ir.load(k_ptr, record + fx.Int64(L.k_scale_offset(token, lane)), _ir.i8(), 1)
        scale = fx.Int32(fx.Uint8(scale_byte))
        acc = _ir.mfma_scale_fp4_fp8(data, q_operand, zero_acc, scale, fx.Int32(L.E8M0_ONE))
        for i in range_constexpr(4):
            t = tile_tok + L.s_token(j, lane, i)
            s = fx.Float32(_ir.extract(acc, i)) * col_scale
            logits.append((t < part_end).select(s, fx.Float32(NEG_INF)))
    return logits


def _widen_v_tile(v_ptr, record, page_off, tile_tok, part_end, lds, wave_base, lane):
    """Load 4 tokens x 32 dims of V (e2m1), widen to bf16, store V^T into the wave's LDS region."""
    block = L.v_block(lane)
    pairs = []  # pairs[u][p]: i32 holding bf16 of dims 32cb + 2p, 2p + 1 of token u
    for u in range_constexpr(4):
        token = L.v_token(lane, u)
        valid = (tile_tok + token) < part_end
        data = _ir.load(v_ptr, record + fx.Int64(L.v_data_offset(page_off + token, lane)), _ir.vec(4, _ir.i32()), 16)
        data = _ir.select(valid, data, _ir.from_elements(_ir.vec(4, _ir.i32()), [fx.Int32(0)] * 4))
        scale_byte = _ir.load(v_ptr, record + fx.Int64(L.v_scale_offset(page_off + token, lane)), _ir.i8(), 1)
        exponent = valid.select(fx.Int32(fx.Uint8(scale_byte)), fx.Int32(L.E8M0_ONE))
        scale = fx.Float32(_ir.bitcast(_ir.f32(), exponent << 23))  # 2**(e - 127) as fp32 bits
        row = []
        for w in range_constexpr(4):
            word = _ir.extract(data, w)
            for k in range_constexpr(4):
                row.append(_ir.bitcast(_ir.i32(), _ir.cvt_fp4_to_bf16x2(word, scale, k)))
        pairs.append(row)
    first_token = L.v_token(lane, 0)  # the lane's 4 tokens are adjacent in a V^T row: one 8-byte store per dim
    for p in range_constexpr(16):
        dim = 32 * block + 2 * p
        for half, selector in ((0, 0x05040100), (1, 0x07060302)):  # low / high bf16 of each pair
            w01 = _ir.perm(pairs[1][p], pairs[0][p], selector)  # [token 0, token 1] of dim + half
            w23 = _ir.perm(pairs[3][p], pairs[2][p], selector)
            offset = wave_base + L.vt_offset(dim + half, first_token)
            _ir.store(_ir.from_elements(_ir.vec(2, _ir.i32()), [w01, w23]), lds, offset, 8)


def _pv_tile(probs, lds, wave_base, lane, o_acc):
    """O^T[d][h] += V^T[d][t] P^T[t][h] over the tile's 64 tokens (2 steps x 8 dim tiles)."""
    out = list(o_acc)
    for step in range_constexpr(L.PV_STEPS):
        # k-slot e holds token pv_token(step, lane, e) = s_token(2 step + (e >> 2), lane, e & 3): own registers
        p = [probs[4 * (2 * step + (e >> 2)) + (e & 3)] for e in range(8)]
        b = _ir.truncf(_ir.vec(8, _ir.bf16()), _ir.from_elements(_ir.vec(8, _ir.f32()), p))  # P^T, bf16
        for dt in range_constexpr(L.D_TILES):
            dim = L.pv_dim(dt, lane)  # slots 0..3 / 4..7 are 4 adjacent tokens each: two 8-byte reads
            lo = _ir.load(lds, wave_base + L.vt_offset(dim, L.pv_token(step, lane, 0)), _ir.vec(2, _ir.i32()), 8)
            hi = _ir.load(lds, wave_base + L.vt_offset(dim, L.pv_token(step, lane, 4)), _ir.vec(2, _ir.i32()), 8)
            words = _ir.from_elements(_ir.vec(4, _ir.i32()), [_ir.extract(lo, 0), _ir.extract(lo, 1),
                                                              _ir.extract(hi, 0), _ir.extract(hi, 1)])
            a = _ir.bitcast(_ir.vec(8, _ir.bf16()), words)
            out[dt] = _ir.mfma_bf16(a, b, out[dt])
    return out


def _scale_vec4(v, factor):
    return _ir.from_elements(_ir.vec(4, _ir.f32()), [fx.Float32(_ir.extract(v, i)) * factor for i in range(4)])


def _tile_step(state, it, *, k_ptr, v_ptr, tables_ptr, table_row, part_start, part_end,
               q_operand, col_scale, lds, wave_base, lane):
    m_run, l_run, o_acc = state
    tile_tok = part_start + it * L.TILE
    page = fx.Int32(_ir.load(tables_ptr, table_row + fx.Int64(tile_tok >> 7) * 4, _ir.i32(), 4))
    record = fx.Int64(page) * L.RECORD_BYTES
    page_off = tile_tok & (L.PAGE_SIZE - 1)

    logits = _qk_tile(k_ptr, record, page_off, tile_tok, part_end, q_operand, col_scale, lane)
    m_tile = logits[0]
    for s in logits[1:]:
        m_tile = fx.maxnumf(m_tile, s)
    m_tile = fx.maxnumf(m_tile, _ir.shuffle_xor(m_tile, 16))
    m_tile = fx.maxnumf(m_tile, _ir.shuffle_xor(m_tile, 32))
    m_new = fx.maxnumf(m_run, m_tile)  # finite: every tile holds a valid token
    alpha = _ir.exp2(m_run - m_new)
    probs = [_ir.exp2(s - m_new) for s in logits]
    total = probs[0]
    for p in probs[1:]:
        total = total + p
    l_new = l_run * alpha + total  # lane-partial: summed over the 4 lane groups after the loop
    o_acc = [_scale_vec4(o, alpha) for o in o_acc]

    _widen_v_tile(v_ptr, record, page_off, tile_tok, part_end, lds, wave_base, lane)
    _ir.wave_fence()
    o_acc = _pv_tile(probs, lds, wave_base, lane, o_acc)
    _ir.wave_fence()  # the next tile overwrites V^T
    return m_new, l_new, o_acc


def _store_wave_partial(lds, wave_base, lane, m_run, l_run, o_acc):
    """The wave's O [16 h][128 d] fp32, m [16], l [16] into its own LDS region (V^T is dead by now)."""
    l_sum = l_run + _ir.shuffle_xor(l_run, 16)
    l_sum = l_sum + _ir.shuffle_xor(l_sum, 32)
    head = L.q_head(lane)
    for dt in range_constexpr(L.D_TILES):
        offset = wave_base + head * (L.HEAD_DIM * 4) + L.o_dim(dt, lane, 0) * 4
        _ir.store(o_acc[dt], lds, offset, 16)
    return head, l_sum


def _combine_waves(lds, thread):
    """(m, l, O[8 dims]) of one head merged over the 4 waves; O is unnormalized."""
    head = L.epilogue_head(thread)
    dim0 = L.epilogue_dim0(thread)
    ms = [fx.Float32(_ir.load(lds, fx.Int32(w * L.WAVE_LDS_BYTES + L.M_OFFSET) + head * 4, _ir.f32(), 4))
          for w in range(L.WAVES)]
    ls = [fx.Float32(_ir.load(lds, fx.Int32(w * L.WAVE_LDS_BYTES + L.L_OFFSET) + head * 4, _ir.f32(), 4))
          for w in range(L.WAVES)]
    m = ms[0]
    for x in ms[1:]:
        m = fx.maxnumf(m, x)
    total = fx.Float32(0.0)
    acc = [fx.Float32(0.0)] * 8
    for w in range(L.WAVES):
        # a wave with no tokens has m = -inf: weight 0 (and all-empty gives m = -inf, l = 0, O = 0)
        weight = (ms[w] == fx.Float32(NEG_INF)).select(fx.Float32(0.0), _ir.exp2(ms[w] - m))
        total = total + ls[w] * weight
        base = fx.Int32(w * L.WAVE_LDS_BYTES) + head * (L.HEAD_DIM * 4) + dim0 * 4
        for half in range(2):
            part = _ir.load(lds, base + 16 * half, _ir.vec(4, _ir.f32()), 16)
            for i in range(4):
                acc[4 * half + i] = acc[4 * half + i] + fx.Float32(_ir.extract(part, i)) * weight
    return head, dim0, m, total, acc


def _to_bf16x8_words(values):
    """8 fp32 -> 4 x i32 of bf16 pairs (one 16-byte store)."""
    v = _ir.from_elements(_ir.vec(8, _ir.f32()), values)
    return _ir.bitcast(_ir.vec(4, _ir.i32()), _ir.truncf(_ir.vec(8, _ir.bf16()), v))


@functools.cache
def build_pa_decode(group: int, q_bf16: bool, split: bool, qscale_tensor: bool, arch: str = "gfx950"):
    """The jitted launcher of one specialization (constexpr: group, query dtype, split, query_scale kind)."""
    check_arch(arch)
    if not 1 <= group <= L.MAX_GROUP:
        raise ValueError(f"group must be in [1, {L.MAX_GROUP}], got {group}")

    @flyc.kernel
    def pa_decode_mxfp4_kernel(
        out_addr: fx.Int64,  # bf16 [R, G, 128] (direct path)
        q_addr: fx.Int64,  # bf16 | e4m3 [R, G, 128]
        k_addr: fx.Int64,  # u8 records [folded pages, 8704]
        v_addr: fx.Int64,
        tables_addr: fx.Int64,  # i32 [R, W]
        lens_addr: fx.Int64,  # i32 [R]
        qscale_addr: fx.Int64,  # f32 [R] when qscale_tensor
        ws_o_addr: fx.Int64,  # f32 [R, S, G, 128] (split path)
        ws_ml_addr: fx.Int64,  # f32 [R, S, G, 2] (split path)
        table_width: fx.Int32,
        partition_tokens: fx.Int32,
        num_splits: fx.Int32,
        qscale_value: fx.Float32,
        logit_scale: fx.Float32,  # softmax_scale * log2(e)
    ):
        thread = fx.Int32(fx.thread_idx.x)
        row = fx.Int32(fx.block_idx.x)
        split_id = fx.Int32(fx.block_idx.y)
        wave = thread >> 6
        lane = thread & 63

        ctx = fx.Int32(_ir.load(_ir.global_ptr(lens_addr), fx.Int64(row) * 4, _ir.i32(), 4))
        ctx = _row_context(ctx, table_width)
        if const_expr(split):  # the row's own tokens divided over the splits (layout.row_tokens)
            share = L.row_tokens(ctx, num_splits, partition_tokens, fx.min, _max_int)
        else:  # one split: the table's width
            share = partition_tokens
        part_start = split_id * share
        part_end = fx.min(ctx, part_start + share)
        n_tiles = (fx.max(part_end - part_start, fx.Int32(0)) + (L.TILE - 1)) >> 6

        q_operand, q_head_scale = _load_query(q_addr, row, lane, group=group, q_bf16=q_bf16)
        if const_expr(qscale_tensor):
            row_scale = fx.Float32(_ir.load(_ir.global_ptr(qscale_addr), fx.Int64(row) * 4, _ir.f32(), 4))
        else:
            row_scale = qscale_value
        col_scale = q_head_scale * row_scale * logit_scale

        lds = _ir.lds_base(L.LDS_BYTES)
        wave_base = wave * L.WAVE_LDS_BYTES
        k_ptr = _ir.global_ptr(k_addr)
        v_ptr = _ir.global_ptr(v_addr)
        tables_ptr = _ir.global_ptr(tables_addr)
        table_row = fx.Int64(row) * fx.Int64(table_width) * 4

        m_run = fx.Float32(NEG_INF)
        l_run = fx.Float32(0.0)
        o_acc = [_ir.from_elements(_ir.vec(4, _ir.f32()), [fx.Float32(0.0)] * 4) for _ in range(L.D_TILES)]
        for it in range(wave, n_tiles, L.WAVES):
            m_run, l_run, o_acc = _tile_step(
                (m_run, l_run, o_acc), it, k_ptr=k_ptr, v_ptr=v_ptr, tables_ptr=tables_ptr, table_row=table_row,
                part_start=part_start, part_end=part_end, q_operand=q_operand,
                col_scale=col_scale, lds=lds, wave_base=wave_base, lane=lane)

        head, l_sum = _store_wave_partial(lds, wave_base, lane, m_run, l_run, o_acc)
        if L.lane_g(lane) == fx.Int32(0):
            _ir.store(m_run, lds, wave_base + L.M_OFFSET + head * 4, 4)
            _ir.store(l_sum, lds, wave_base + L.L_OFFSET + head * 4, 4)
        gpu.barrier()

        if L.epilogue_head(thread) < fx.Int32(group):
            e_head, dim0, m, total, acc = _combine_waves(lds, thread)
            inv = (total > fx.Float32(0.0)).select(fx.Float32(1.0) / total, fx.Float32(0.0))
            normalized = [a * inv for a in acc]
            if const_expr(split):
                slot = (fx.Int64(row) * fx.Int64(num_splits) + fx.Int64(split_id)) * group + fx.Int64(e_head)
                ws_o = _ir.global_ptr(ws_o_addr)
                for half in range_constexpr(2):
                    _ir.store(_ir.from_elements(_ir.vec(4, _ir.f32()), normalized[4 * half:4 * half + 4]), ws_o,
                              (slot * L.HEAD_DIM + fx.Int64(dim0)) * 4 + 16 * half, 16)
                if dim0 == fx.Int32(0):
                    _ir.store(_ir.from_elements(_ir.vec(2, _ir.f32()), [m, total]), _ir.global_ptr(ws_ml_addr),
                              slot * 8, 8)
            else:
                elem = (fx.Int64(row) * group + fx.Int64(e_head)) * L.HEAD_DIM + fx.Int64(dim0)
                _ir.store(_to_bf16x8_words(normalized), _ir.global_ptr(out_addr), elem * 2, 16)

    @flyc.jit
    def launch(out_addr: fx.Int64, q_addr: fx.Int64, k_addr: fx.Int64, v_addr: fx.Int64, tables_addr: fx.Int64,
               lens_addr: fx.Int64, qscale_addr: fx.Int64, ws_o_addr: fx.Int64, ws_ml_addr: fx.Int64,
               table_width: fx.Int32, partition_tokens: fx.Int32, num_splits: fx.Int32, qscale_value: fx.Float32,
               logit_scale: fx.Float32, num_rows: fx.Int32, stream: fx.Stream = fx.Stream(None)):
        pa_decode_mxfp4_kernel(out_addr, q_addr, k_addr, v_addr, tables_addr, lens_addr, qscale_addr, ws_o_addr,
                               ws_ml_addr, table_width, partition_tokens, num_splits, qscale_value,
                               logit_scale).launch(grid=(num_rows, num_splits, 1), block=[L.THREADS, 1, 1],
                                                   stream=stream)

    return launch


def _row_context(ctx, table_width):
    """The row's context as both kernels read it: clamped to its table (check=False inputs never read past it) and
    to >= 0 (a negative length under check=False: no token)."""
    return fx.max(fx.min(ctx, table_width * L.PAGE_SIZE), fx.Int32(0))


def _max_int(value, bound: int):
    return fx.max(value, fx.Int32(bound))


@functools.cache
def build_merge(group: int, arch: str = "gfx950"):
    """Merge kernel of the split path: out[r, h] = sum_s w_s O_s / sum_s w_s l_s over the used splits."""
    check_arch(arch)

    @flyc.kernel
    def pa_decode_merge_kernel(out_addr: fx.Int64, ws_o_addr: fx.Int64, ws_ml_addr: fx.Int64, lens_addr: fx.Int64,
                               table_width: fx.Int32, partition_tokens: fx.Int32, num_splits: fx.Int32):
        thread = fx.Int32(fx.thread_idx.x)
        row = fx.Int32(fx.block_idx.x)
        head = L.epilogue_head(thread)
        dim0 = L.epilogue_dim0(thread)
        ctx = _row_context(fx.Int32(_ir.load(_ir.global_ptr(lens_addr), fx.Int64(row) * 4, _ir.i32(), 4)),
                           table_width)  # as the decode kernel saw it
        share = L.row_tokens(ctx, num_splits, partition_tokens, fx.min, _max_int)
        used = fx.min((ctx + share - 1) // share, num_splits)  # the splits that hold the row's tokens
        if head < fx.Int32(group):
            ws_o = _ir.global_ptr(ws_o_addr)
            ws_ml = _ir.global_ptr(ws_ml_addr)
            m_run = fx.Float32(NEG_INF)
            l_run = fx.Float32(0.0)
            acc = [fx.Float32(0.0)] * 8
            for s in range(0, used, 1):
                slot = (fx.Int64(row) * fx.Int64(num_splits) + fx.Int64(s)) * group + fx.Int64(head)
                ml = _ir.load(ws_ml, slot * 8, _ir.vec(2, _ir.f32()), 8)
                m_s = fx.Float32(_ir.extract(ml, 0))
                l_s = fx.Float32(_ir.extract(ml, 1))
                m_new = fx.maxnumf(m_run, m_s)
                alpha = _ir.exp2(m_run - m_new)
                weight = l_s * _ir.exp2(m_s - m_new)
                parts = [_ir.load(ws_o, (slot * L.HEAD_DIM + fx.Int64(dim0)) * 4 + 16 * h, _ir.vec(4, _ir.f32()), 16)
                         for h in range(2)]
                acc = [acc[i] * alpha + fx.Float32(_ir.extract(parts[i >> 2], i & 3)) * weight for i in range(8)]
                l_run = l_run * alpha + weight
                m_run = m_new
            inv = (l_run > fx.Float32(0.0)).select(fx.Float32(1.0) / l_run, fx.Float32(0.0))
            elem = (fx.Int64(row) * group + fx.Int64(head)) * L.HEAD_DIM + fx.Int64(dim0)
            _ir.store(_to_bf16x8_words([a * inv for a in acc]), _ir.global_ptr(out_addr), elem * 2, 16)

    @flyc.jit
    def launch(out_addr: fx.Int64, ws_o_addr: fx.Int64, ws_ml_addr: fx.Int64, lens_addr: fx.Int64,
               table_width: fx.Int32, partition_tokens: fx.Int32, num_splits: fx.Int32, num_rows: fx.Int32,
               stream: fx.Stream = fx.Stream(None)):
        pa_decode_merge_kernel(out_addr, ws_o_addr, ws_ml_addr, lens_addr, table_width, partition_tokens,
                               num_splits).launch(grid=(num_rows, 1, 1), block=[L.THREADS, 1, 1], stream=stream)

    return launch
