"""pa_decode (Gluon, Hopper sm_90): paged attention of one query token per row over MXFP4 K/V, GQA group <= 16.

Same signature and semantics as the Triton backend's pa_decode (DESIGN §5, docs/api.md): row r (one KV head, heads
folded into pages) attends over tokens t < context_lens[r]; token t is at folded page ``tables[r, t // 128]`` (record
``page * 8704`` bytes into the cache), offset ``t % 128``.
Sentinels / guarantees:
- tokens t >= context_lens[r] are never loaded: their 16-byte code chunks and 4-byte scale words are masked out of
  the global -> shared copies (cp.async zero-fills them), so NaN / Inf / scale 255 there cannot reach ``out``, and
  their logits are -inf before the softmax;
- table entries past ``ceil(context_lens[r] / 128)`` and their pages are never read; a row's pages are divided over
  the launch's splits by its own length (``_program_pages``), so a short row in a wide table spreads over them all;
- ``context_lens[r] == 0`` writes zeros;
- non-finite logits follow docs/api.md: a NaN or +inf logit of an attended token makes that head's row NaN, a -inf
  logit gives its token weight 0, a row whose logits are all -inf is NaN (0 / 0).
Decode (docs/hopper.md "One multiply per pair"): by default one multiply per bf16x2 pair, K and V decoded x 2**-63
and Q, P x 2**63 (the same products, the same bits) while every scale byte the program streams is 0 or in
[65, 191] and |q| < 2**64; a program that sees anything else redoes its pages with the exact two-multiply decode.
Structure: one program = w warps per (row, split) (4, or 8 for long programs at one program per SM: ``warps_for``;
the layouts come from ``gl.num_warps()``); the page records stream through a ring of
``HopperConfig.stages`` shared-memory stages with ``cp.async`` (commit / wait groups, one CTA barrier per page);
each warp decodes its 128 / w tokens of the page straight into the B-operand registers of ``mma.sync`` (``_decode``),
keeps its own online softmax (a head's maximum moves only when passed by more than RESCALE_SLACK = 8 in log2 units,
and a warp none of whose maxima moved skips the O rescale: ``_attend_page``), and feeds P to the P.V product from the QK
accumulator registers. The w warps merge
(m, l, O) at the end. Q is loaded once per program with 16-byte loads and relabelled to the operand's column order;
the page table entry of the next copy is loaded one loop trip ahead. Split-KV (grid rows x splits) when rows are few:
partial (out, lse) in the plan's workspace, and the row's last split to finish (an acq_rel arrival counter per row,
reset by that program) merges them in the same launch; or, where the launch fills at most half the SMs, the row's
splits run as 1-4 thread-block clusters that merge through distributed shared memory (``_cluster``, ``cluster_for``);
direct (one program per row, bf16 out) otherwise; with ``HopperConfig.tail_splits`` (off by default, not yet measured)
a direct launch's rows past its last full wave run as that many splits each (``tail_for``, docs/hopper.md "The split
tail"). The split count depends only on (rows, table width), so a plan made once is valid for every replay of a CUDA
graph.
Not checked at run time: page ids in range (``atom_mxfp4.ops`` checks with check=True). A length (TABLES) or position
(DENSE) past the table passes under check=False: the kernel reads it as the whole table and a negative length as 0
(``_in_table``), so that no entry past the row and no partial slot past the row's is read.
"""

from __future__ import annotations

import warnings

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy, mma_v2

from atom_mxfp4.errors import expect, expect_contiguous, fail
from atom_mxfp4.layout import MAX_PAGES_PER_BLOCK, MAX_TOPK
from atom_mxfp4.launch import launcher, pow2_at_least
from atom_mxfp4.plan import check_plan

from . import NAME
from . import _cluster
from . import layout as L
from ._decode import (BYTE_TOPS, decode_k_operand, decode_v_operand, scale_bf16x2, warp_map, window_misses,
                      window_probabilities, window_query, window_scale_bf16x2)
from ._gluon import FUSED, async_load, cta_barrier
# the split policy and the plan (policy.py), re-exported: this module is the Hopper pa_decode's whole interface
from .policy import (  # noqa: F401
    CLUSTER_PAGES_PER_SPLIT, CLUSTER_SIZES, CLUSTERED_SPLITS, DEFAULT_CONFIG, EIGHT_WARP_MIN_PAGES,
    FILL_PAGES_PER_SPLIT, H200_SMS, MAX_SPLITS, MAX_TAIL_SPLITS, MIN_PAGES_PER_SPLIT, ONE_PAGE_SPLIT_WIDTH,
    POLICY_CLUSTER_SIZES, SOURCE_DENSE, SOURCE_SPARSE, SOURCE_TABLES, HopperConfig, HopperDecodePlan, LaunchShape, _sms,
    cluster_for, launch_shape, make_plan, num_splits_for, partial_slots, tail_for, warps_for, with_config)

LOG2E = 1.4426950408889634

PAGE = gl.constexpr(L.PAGE_SIZE)
HEAD_DIM = gl.constexpr(L.HEAD_DIM)
BLOCK_H = gl.constexpr(L.BLOCK_H)
RECORD_WORDS = gl.constexpr(L.RECORD_WORDS)
CODE_WORDS = gl.constexpr(L.CODE_WORDS)
SCALE_WORD = gl.constexpr(L.SCALE_WORD)
V_PARITY_LAST = gl.constexpr(L.V_PARITY_LAST)
OUT_COLUMNS_ORDER = gl.constexpr(L.OUT_COLUMNS_ORDER)

RING_CODES = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))  # [stages, 128, 16]: unswizzled [128, 16] stages
RING_SCALES = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [0]))  # [stages, 128]
Q_BITS_SHAPE = gl.constexpr(L.Q_BITS_SHAPE)
Q_BITS_ORDER = gl.constexpr(L.Q_BITS_ORDER)
RESCALE_SLACK = gl.constexpr(float(L.RESCALE_SLACK))  # log2 units: a running maximum moves when passed by more
MERGE_TRIP = gl.constexpr(8)  # partials per trip of the in-launch split merge (_merge_row)
COMBINE_SMEM = gl.constexpr(gl.SwizzledSharedLayout(4, 1, 8, [2, 1, 0]))
STATE_SMEM = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))  # [2, w warps, 16]: m and l ([w, 16] stages)
Q_SMEM = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))  # [16, 128] bf16 Q, once per program
WINDOW_QUERY_MAX = gl.constexpr(L.WINDOW_QUERY_MAX)
# where a row's pages come from (the SOURCE constexpr): pa_decode's tables, or attend's block table (+ top-k ids)
TABLES = gl.constexpr(SOURCE_TABLES)
DENSE = gl.constexpr(SOURCE_DENSE)
SPARSE = gl.constexpr(SOURCE_SPARSE)


# ---- the program's layouts, by its warp count (gl.num_warps(): 4, or 8 for small batches; layout.PROGRAM_WARPS) ------
@gluon.constexpr_function
def _mma(warps):
    """The MMA layout: mma.sync m16n8k16 with the warp as a leading batch dimension ([w, 16 heads, n])."""
    return gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=warp_map("mma_warps", warps),
                                     instr_shape=L.MMA_INSTR_SHAPE)


@gluon.constexpr_function
def _a_operand(warps):  # Q [w, 16, 128] and P [w, 16, 128 / w]
    return gl.DotOperandLayout(0, _mma(warps), L.K_WIDTH)


@gluon.constexpr_function
def _b_operand(warps):  # K^T [w, 128, 128 / w] and V [w, 128 / w, 128]
    return gl.DotOperandLayout(1, _mma(warps), L.K_WIDTH)


@gluon.constexpr_function
def _rows_mma(warps):  # [w, 16] per-warp softmax state
    return gl.SliceLayout(2, _mma(warps))


@gluon.constexpr_function
def _k_words(warps):
    return gl.DistributedLinearLayout(**warp_map("k_words_bases", warps))


@gluon.constexpr_function
def _v_words(warps):
    return gl.DistributedLinearLayout(**warp_map("v_words_bases", warps))


@gluon.constexpr_function
def _copy_codes(warps):  # [128, 16] words: 16 B per cp.async
    return gl.BlockedLayout([1, L.COPY_CODE_VEC], [8, 4], [warps, 1], [1, 0])


@gluon.constexpr_function
def _copy_scales(warps):  # [128] words (8 warps: threads 128..255 repeat 0..127's words; the PTX predicates their
    # cp.async off with tid < 128, so each word is copied once: hopper_sass.py --dump, 8_warps_split.ptx)
    return gl.BlockedLayout([1], [32], [warps], [0])


@gluon.constexpr_function
def _q_load(warps):  # [16, 128] bf16, 16 B per load
    return gl.BlockedLayout([1, 8], [2, 16], [warps, 1], [1, 0])


@gluon.constexpr_function
def _partials(warps):  # [MERGE_TRIP, 16, 128] of the split merge: the split dimension in each thread's registers
    return gl.BlockedLayout([MERGE_TRIP.value, 1, 4], [1, 4, 8], [1, 4, warps // 4], [2, 1, 0])


@gluon.constexpr_function
def _combine(warps):
    """The warp combine: [w, 16, 128] fp32 with the warp dimension in each thread's registers, so the sum over warps
    is register-only after one trip through shared memory (COMBINE_SMEM: 16-byte units swizzled by row)."""
    return gl.BlockedLayout([warps, 1, 4], [1, 4, 8], [1, 4, warps // 4], [2, 1, 0])


@gluon.constexpr_function
def _combine_out(warps):  # [16, 128]: 4 consecutive head dims per thread
    return gl.SliceLayout(0, _combine(warps))


# ---- device code ---------------------------------------------------------------------------------------------------
@gluon.constexpr_function
def _ids_layout(n, warps):
    """A row's n (a power of two) top-k ids in one warp, repeated in every warp: the counts over them are shuffles
    within the warp, no shared memory or CTA barrier (spread over the warps they took 4 barriers)."""
    return gl.BlockedLayout([max(1, n // 32)], [32], [warps], [0])


@gluon.jit
def _in_table(context, table_width):
    """A row's context as the decode (``_row_source``) and the merge (``_used_splits``) read it: inside [0, 128 x
    table_width] (an unchecked length past the table is the whole table, a negative one no token: the reference's
    token mask reads them so)."""
    return gl.maximum(gl.minimum(context, table_width * PAGE), 0)


@gluon.jit
def _row_source(row, context_lens_ptr, request_ptr, position_ptr, topk_ptr, table_stride, table_width, num_kv_heads,
                num_tokens, topk, SOURCE: gl.constexpr, TOPK_POW2: gl.constexpr, PPB: gl.constexpr):
    """(context, table_base, head, ids_base) of row ``row`` (int64), by where its pages come from (SOURCE):
    TABLES: ``context_lens[row]``, table row ``row``; DENSE / SPARSE (``attend``): row = token t x num_kv_heads + head
    h of request ``request[t]`` at ``position[t]``, table row = that request's block-table row; DENSE: position + 1
    tokens; SPARSE: the top-k ids ``topk[h, t, :]`` (ascending, -1 padded, the own block last when selected) give
    n_full x block + (position - own x block + 1 if the own block is selected): build_sparse_tables' context."""
    if SOURCE == TABLES:
        context = _in_table(gl.load(context_lens_ptr + row), table_width)
        table_base = row * table_stride
        head = context * 0
        ids_base = context * 0
    else:
        token = row.to(gl.int32) // num_kv_heads  # rows < 2**31: a 32-bit division (a 64-bit one is a long call)
        head = row.to(gl.int32) - token * num_kv_heads  # int32: folded ids page * nkv + head fit (checked)
        position = gl.load(position_ptr + token)
        table_base = gl.load(request_ptr + token) * table_stride  # int32: the launcher checks numel < 2**31
        if SOURCE == DENSE:
            context = _in_table(position + 1, table_width)
            ids_base = token * 0
        else:
            BLOCK_TOKENS: gl.constexpr = PAGE * PPB
            ids_base = (head * num_tokens + token) * topk  # int32, as table_base
            j = gl.arange(0, TOPK_POW2, layout=_ids_layout(TOPK_POW2, gl.num_warps()))
            ids = gl.load(topk_ptr + ids_base + j, mask=j < topk, other=-1)
            own = position // BLOCK_TOKENS
            n_full = gl.sum(((ids >= 0) & (ids != own)).to(gl.int32), axis=0)
            own_selected = gl.max((ids == own).to(gl.int32), axis=0)
            context = n_full * BLOCK_TOKENS + own_selected * (position - own * BLOCK_TOKENS + 1)
    return context, table_base, head, ids_base


@gluon.jit
def _has_context(row, context_lens_ptr, topk_ptr, num_kv_heads, num_tokens, topk, SOURCE: gl.constexpr):
    """Whether row ``row`` attends any token (context > 0), for the epilogue: one load, not _row_source's reductions.
    SPARSE: its first top-k id is selected (ids are ascending, -1 padded; every selected block holds >= 1 token the
    row sees); DENSE: always (position + 1 tokens)."""
    if SOURCE == TABLES:
        has = gl.load(context_lens_ptr + row) > 0
    elif SOURCE == DENSE:
        has = row >= 0
    else:
        token = row.to(gl.int32) // num_kv_heads
        head = row.to(gl.int32) - token * num_kv_heads
        has = gl.load(topk_ptr + (head * num_tokens + token) * topk) >= 0
    return has


@gluon.jit
def _block_of(topk_ptr, ids_base, page_index, table_end, SOURCE: gl.constexpr, PPB: gl.constexpr):
    """SPARSE: the top-k id of the block holding page ``page_index`` of the row (0 past table_end); otherwise the page
    index itself (no load). Loaded in the trip that reads the block table at it: loading it a trip earlier measured
    slower on the H200 (batch 512: 88.5 -> 95.4 us; one more live register, addresses rematerialised in the loop)."""
    if SOURCE == SPARSE:
        block = gl.load(topk_ptr + ids_base + page_index // PPB, mask=page_index < table_end, other=0)
    else:
        block = page_index
    return block


@gluon.jit
def _page_id(tables_ptr, table_base, head, num_kv_heads, table_stride, block, page_index, table_end,
             SOURCE: gl.constexpr, PPB: gl.constexpr):
    """The folded page id of page ``page_index`` of the row (0 when page_index >= table_end: TABLES / DENSE, the split's
    own pages, so no entry past the context is loaded; SPARSE, the split's entries by the table's width, see
    ``_program_pages``). TABLES: the table entry; DENSE: block-table entry x num_kv_heads + head; SPARSE: the same for
    page ``page_index % PPB`` of top-k block ``block`` (``_block_of``; a -1 id reads entry 0 + the page; every entry
    read stays inside the row)."""
    inside = page_index < table_end
    if SOURCE == TABLES:
        page = gl.load(tables_ptr + table_base + page_index, mask=inside, other=0)
    else:
        logical = page_index
        if SOURCE == SPARSE:
            logical = gl.minimum(gl.maximum(block, 0) * PPB + page_index % PPB, table_stride - 1)
        page = gl.load(tables_ptr + table_base + logical, mask=inside, other=0) * num_kv_heads + head
    return page


@gluon.jit
def _issue_page(k_ptr, v_ptr, page_id, context, page_index, page_end, slot, k_codes, k_scales, v_codes, v_scales):
    """cp.async the records of page ``page_index`` of the row (folded page ``page_id``) into ring slot ``slot``; tokens
    past the context (and the whole page when page_index >= page_end) are masked: never read from global memory,
    zero-filled in the ring."""
    WARPS: gl.constexpr = gl.num_warps()
    COPY_CODES: gl.constexpr = _copy_codes(WARPS)
    COPY_SCALES: gl.constexpr = _copy_scales(WARPS)
    has_page = page_index < page_end
    page = page_id.to(gl.int64)
    valid = gl.where(has_page, gl.minimum(context - page_index * PAGE, PAGE), 0)
    record = page * RECORD_WORDS
    token = gl.arange(0, PAGE, layout=gl.SliceLayout(1, COPY_CODES))
    word = gl.arange(0, CODE_WORDS, layout=gl.SliceLayout(0, COPY_CODES))
    code_offset = record + token[:, None] * CODE_WORDS + word[None, :]
    code_mask = (token < valid)[:, None] & (word < CODE_WORDS)[None, :]
    scale_token = gl.arange(0, PAGE, layout=COPY_SCALES)
    scale_offset = record + SCALE_WORD + scale_token
    scale_mask = scale_token < valid
    async_load(k_codes.index(slot), k_ptr + code_offset, mask=code_mask)
    async_load(k_scales.index(slot), k_ptr + scale_offset, mask=scale_mask)
    async_load(v_codes.index(slot), v_ptr + code_offset, mask=code_mask)
    async_load(v_scales.index(slot), v_ptr + scale_offset, mask=scale_mask)


@gluon.jit
def _load_query(q_ptr, row, group):
    """Q [16 heads, 128] in the operand's column order (column k holds head dim layout.qk_dim(k); bf16, e4m3 widened
    exactly; heads >= group are 0): one coalesced 16-byte load per 8 dims, relabelled in registers (layout.Q_BITS_*)."""
    WARPS: gl.constexpr = gl.num_warps()
    Q_LOAD: gl.constexpr = _q_load(WARPS)
    head = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(1, Q_LOAD))
    dim = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, Q_LOAD))
    q = gl.load(q_ptr + (row * group + head[:, None]) * HEAD_DIM + dim[None, :], mask=(head < group)[:, None],
                other=0.0)
    q = q.to(gl.float32).to(gl.bfloat16)
    return gl.reshape(gl.permute(gl.reshape(q, Q_BITS_SHAPE.value), Q_BITS_ORDER.value), [BLOCK_H, HEAD_DIM])


@gluon.jit
def _q_operand(q):
    """Q [16, 128] in operand column order -> the A operand [w warps, 16, 128] (every warp holds all of it): one trip
    through shared memory (a convert_layout took 8 rounds through the compiler's scratch, 16 CTA barriers)."""
    WARPS: gl.constexpr = gl.num_warps()
    A_OPERAND: gl.constexpr = _a_operand(WARPS)
    one = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_H, HEAD_DIM], Q_SMEM, q).load(gl.SliceLayout(0, A_OPERAND))
    return gl.broadcast(gl.expand_dims(one, 0), gl.zeros([WARPS, BLOCK_H, HEAD_DIM], gl.bfloat16, A_OPERAND))[0]


@gluon.jit
def _k_operand(k_codes, k_scales, slot, FAST: gl.constexpr):
    """K^T of ring slot ``slot`` as the B operand of Q.K^T [w warps, 128 (head dim layout.qk_dim(k)), 128 / w tokens]:
    words [w, n, c, j] + the scale byte of chunk c of each token, decoded in the registers that loaded them (FAST:
    the one-multiply decode, values x 2**-WINDOW_SHIFT)."""
    WARPS: gl.constexpr = gl.num_warps()
    K_WORDS: gl.constexpr = _k_words(WARPS)
    B_OPERAND: gl.constexpr = _b_operand(WARPS)
    TOKENS_PER_WARP: gl.constexpr = warp_map("tokens_per_warp", WARPS)
    k_words = k_codes.index(slot).reshape(warp_map("k_words_shape", WARPS)).load(K_WORDS)
    k_scale_layout: gl.constexpr = gl.SliceLayout(2, gl.SliceLayout(3, K_WORDS))
    k_scale_words = k_scales.index(slot).reshape([WARPS, TOKENS_PER_WARP]).load(k_scale_layout)
    chunk = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(3, K_WORDS))))
    k_scale = (k_scale_words[:, :, None] >> (8 * chunk[None, None, :])) & 0xFF
    k_pair = window_scale_bf16x2(k_scale, k_scale) if FAST else scale_bf16x2(k_scale, k_scale)
    return decode_k_operand(k_words, gl.broadcast(k_pair[:, :, :, None], k_words)[0], B_OPERAND, FAST)


@gluon.jit
def _v_load(v_codes, v_scales, slot):
    """V of ring slot ``slot`` as loaded from shared memory: words [w, p, par, g, word] with the token parity split
    into (even, odd) words, and the (even, odd) scale bytes of each (p, g) (``_v_operand`` decodes them)."""
    WARPS: gl.constexpr = gl.num_warps()
    V_WORDS: gl.constexpr = _v_words(WARPS)
    TOKENS_PER_WARP: gl.constexpr = warp_map("tokens_per_warp", WARPS)
    v_words = gl.permute(v_codes.index(slot).reshape(warp_map("v_words_shape", WARPS)).load(V_WORDS),
                         V_PARITY_LAST.value)
    v_scale_words = v_scales.index(slot).reshape([WARPS, TOKENS_PER_WARP // 2, 2]).load(
        gl.SliceLayout(3, gl.SliceLayout(4, V_WORDS)))
    group8 = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(4, V_WORDS)))))
    v_scale = (v_scale_words[:, :, :, None] >> (8 * (group8[None, None, None, :] >> 1))) & 0xFF  # [w, p, par, g]
    v_scale_even, v_scale_odd = gl.split(gl.permute(v_scale, [0, 1, 3, 2]))
    even_words, odd_words = gl.split(v_words)
    return even_words, odd_words, v_scale_even, v_scale_odd


@gluon.jit
def _v_operand(even_words, odd_words, v_scale_even, v_scale_odd, FAST: gl.constexpr):
    """V as the B operand of P.V [w warps, 128 / w tokens, 128 (head dim layout.pv_dim(n))] from ``_v_load``'s words
    and scale bytes, decoded in the registers that loaded them (FAST: the one-multiply decode, values x
    2**-WINDOW_SHIFT)."""
    WARPS: gl.constexpr = gl.num_warps()
    B_OPERAND: gl.constexpr = _b_operand(WARPS)
    v_pair = (window_scale_bf16x2(v_scale_even, v_scale_odd) if FAST
              else scale_bf16x2(v_scale_even, v_scale_odd))  # [w, p, g]
    v_pair = gl.convert_layout(v_pair, gl.SliceLayout(3, even_words.type.layout), assert_trivial=True)
    v_pair = gl.broadcast(v_pair[:, :, :, None], even_words)[0]
    return decode_v_operand(even_words, odd_words, v_pair, B_OPERAND, FAST)


@gluon.jit
def _logits(q, slot, first_token, context, scale, k_codes, k_scales, FAST: gl.constexpr):
    """Q.K^T of ring slot ``slot`` (tokens first_token + (128 / w) x warp + n) in log2 units; tokens past the context:
    -inf."""
    WARPS: gl.constexpr = gl.num_warps()
    MMA: gl.constexpr = _mma(WARPS)
    TOKENS_PER_WARP: gl.constexpr = warp_map("tokens_per_warp", WARPS)
    logits = mma_v2(q, _k_operand(k_codes, k_scales, slot, FAST),
                    gl.zeros([WARPS, BLOCK_H, TOKENS_PER_WARP], gl.float32, MMA)) * scale
    warp = gl.arange(0, WARPS, layout=gl.SliceLayout(1, gl.SliceLayout(2, MMA)))
    token = gl.arange(0, TOKENS_PER_WARP, layout=gl.SliceLayout(0, gl.SliceLayout(1, MMA)))
    position = first_token + warp[:, None, None] * TOKENS_PER_WARP + token[None, None, :]
    return gl.where(position < context, logits, float("-inf"))


@gluon.jit
def _p_operand(p, FAST: gl.constexpr):
    """P (fp32, the QK accumulator layout) as the A operand of P.V: rounded to bf16 in the registers as they are
    (FAST: then x 2**WINDOW_SHIFT, exactly, for the one-multiply V)."""
    WARPS: gl.constexpr = gl.num_warps()
    A_OPERAND: gl.constexpr = _a_operand(WARPS)
    p = p.to(gl.bfloat16)
    if FAST:
        p = window_probabilities(p)
    return gl.convert_layout(p, A_OPERAND, assert_trivial=True)


@gluon.constexpr_function
def rescale_vote_registers(reg_bases, head_dim=1):
    """The registers of one thread whose factors ``_rescale``'s vote tests, for an accumulator whose linear layout has
    these register bases ([w, 16 heads, n]: the head is dimension ``head_dim``): one register per distinct head the
    thread holds, those made of the head-moving register bits only (mma.sync's C fragment: registers 0 and 2, heads
    g and g + 8). Every other register repeats the head, hence the factor, of one of them (tests/test_hopper_layout.py
    checks it against the compiler's layout)."""
    head_bits = [i for i, basis in enumerate(reg_bases) if basis[head_dim] != 0]
    return sorted({sum(1 << bit for j, bit in enumerate(head_bits) if combo >> j & 1)
                   for combo in range(2 ** len(head_bits))})


@gluon.constexpr_function
def _rescale_asm(layout):
    """The PTX of ``_rescale`` for an accumulator in the linear layout ``layout`` ([w, 16 heads, n]; all of a thread's
    R registers in one call): ``$0 .. $(R-1)`` the accumulator (tied to the inputs ``$R .. $(2R-1)``), ``$2R ..`` the
    factor of each register's head. The vote tests one register per distinct head (``rescale_vote_registers``)."""
    regs = 2 ** len(layout.reg_bases)
    tested = rescale_vote_registers(layout.reg_bases)
    lines = ["{", ".reg .pred p;", f"setp.neu.f32 p, ${2 * regs + tested[0]}, 0f3F800000;"]
    lines += [f"setp.neu.or.f32 p, ${2 * regs + i}, 0f3F800000, p;" for i in tested[1:]]
    lines += ["vote.sync.any.pred p, p, 0xffffffff;", "@!p bra.uni SKIP;"]
    lines += [f"mul.f32 ${i}, ${regs + i}, ${2 * regs + i};" for i in range(regs)]
    return "\n".join(lines + ["SKIP:", "}"])


@gluon.constexpr_function
def _rescale_constraints(regs):  # regs outputs, each tied to its input, then regs factors
    return ",".join(["=f"] * regs + [str(i) for i in range(regs)] + ["f"] * regs)


@gluon.jit
def _rescale(acc, alpha):
    """acc x alpha[:, :, None], where a warp none of whose rows' factors differs from 1 skips the multiplies (one
    vote and a uniform branch): with the running maximum moved only by more than RESCALE_SLACK (``_attend_page``),
    most pages of a long row keep every factor at 1. x * 1 is x bit for bit (NaN, Inf, -0 included), so skipping
    changes nothing."""
    linear: gl.constexpr = gl.to_linear_layout(acc.type.layout, acc.shape)
    pack: gl.constexpr = 2 ** len(linear.reg_bases)  # all of a thread's registers in one call
    return gl.inline_asm_elementwise(_rescale_asm(linear), _rescale_constraints(pack),
                                     [acc, gl.broadcast(alpha[:, :, None], acc)[0]],
                                     dtype=gl.float32, is_pure=True, pack=pack)


@gluon.jit
def _attend_page(q, slot, page_index, context, scale, m_i, l_i, acc, k_codes, k_scales, v_codes, v_scales,
                 FAST: gl.constexpr, SKIP: gl.constexpr):
    """One page (ring slot ``slot``): per warp, logits of its 128 / w tokens, online softmax update, P.V accumulate.

    The running maximum m moves only when a page's maximum passes it by more than RESCALE_SLACK (log2 units), so the
    weights ``2**(logit - m)`` stay <= 2**RESCALE_SLACK and most pages rescale nothing (``_rescale``); l and O are
    relative to the same m, which the warp combine and the split merge read as they did the exact maximum.
    SKIP: the rescale as a skippable block. V's shared-memory loads are issued before it, so that their latency
    overlaps its branch; V is decoded after it (64 decoded registers live across the branch spilled at the
    168-register cap). The sparse one-launch loop (1-2 pages per program, where a skip is rare) multiplies always, as
    before: with the branch it was 2-6% slower at batches 1-64 (and spilled a register with V loaded early). x * 1 is
    x, so both give the same bits."""
    logits = _logits(q, slot, page_index * PAGE, context, scale, k_codes, k_scales, FAST)
    page_max = gl.max(logits, axis=2)
    grow = page_max > m_i + RESCALE_SLACK  # -inf + slack = -inf; a NaN maximum never moves m
    m_new = gl.where(grow, page_max, m_i)
    m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)  # all -inf so far: weights 0, not NaN
    # m -inf so far: O holds only +-0 (or NaN), which x 0 leaves as they are: factor 1, no multiply
    alpha = gl.where(grow & (m_i > float("-inf")), gl.exp2(m_i - m_safe), 1.0)
    p = gl.exp2(logits - m_safe[:, :, None])
    l_i = l_i * alpha + gl.sum(p, axis=2)
    even_words, odd_words, v_scale_even, v_scale_odd = _v_load(v_codes, v_scales, slot)  # before the rescale
    acc = _rescale(acc, alpha) if SKIP else acc * alpha[:, :, None]
    acc = mma_v2(_p_operand(p, FAST), _v_operand(even_words, odd_words, v_scale_even, v_scale_odd, FAST), acc)
    return m_new, l_i, acc


@gluon.jit
def _stream(q_ptr, k_ptr, v_ptr, tables_ptr, topk_ptr, row, group, table_base, ids_base, head, num_kv_heads,
            table_stride, table_end, context, page_begin, page_end, scale, k_codes, k_scales, v_codes, v_scales,
            STAGES: gl.constexpr, FAST: gl.constexpr, SOURCE: gl.constexpr, PPB: gl.constexpr):
    """Pages [page_begin, page_end) of the row through the ring -> per warp (m, l, O) and whether the pass was exact:
    always with FAST False; with FAST (the one-multiply decode) only if every scale byte streamed and every query
    element is inside the window (layout.WINDOW_*), else the caller redoes the pass with FAST False."""
    WARPS: gl.constexpr = gl.num_warps()
    MMA: gl.constexpr = _mma(WARPS)
    ROWS_MMA: gl.constexpr = _rows_mma(WARPS)
    COPY_SCALES: gl.constexpr = _copy_scales(WARPS)
    q = _load_query(q_ptr, row, group)  # first: its latency overlaps the table loads and copies below
    for s in gl.static_range(STAGES - 1):  # prologue: the first STAGES - 1 pages in flight
        block = _block_of(topk_ptr, ids_base, page_begin + s, table_end, SOURCE, PPB)
        _issue_page(k_ptr, v_ptr, _page_id(tables_ptr, table_base, head, num_kv_heads, table_stride, block,
                                           page_begin + s, table_end, SOURCE, PPB), context,
                    page_begin + s, page_end, s, k_codes, k_scales, v_codes, v_scales)
        async_copy.commit_group()
    # the table entry of the next page to copy, loaded one loop trip before its copy is issued (a copy's addresses
    # need its page id: loaded just before, the load's latency stalled every trip)
    next_id = _page_id(tables_ptr, table_base, head, num_kv_heads, table_stride,
                       _block_of(topk_ptr, ids_base, page_begin + STAGES - 1, table_end, SOURCE, PPB),
                       page_begin + STAGES - 1, table_end, SOURCE, PPB)

    misses = gl.zeros([PAGE], gl.int32, COPY_SCALES)  # the window check: bit 7 of a byte = a scale byte outside
    if FAST:  # a query element outside the window counts as a miss (one register live over the loop, not two)
        magnitude = gl.abs(q.to(gl.float32))
        q_outside = gl.max(gl.max(((magnitude >= WINDOW_QUERY_MAX) & (magnitude < float("inf"))).to(gl.int32),
                                  axis=1), axis=0)
        misses = misses + gl.where(q_outside > 0, BYTE_TOPS, 0)
        q = window_query(q)
    q = _q_operand(q)  # once per program: the loop reads the operand registers as they are
    m_i = gl.full([WARPS, BLOCK_H], float("-inf"), gl.float32, ROWS_MMA)
    l_i = gl.zeros([WARPS, BLOCK_H], gl.float32, ROWS_MMA)
    acc = gl.zeros([WARPS, BLOCK_H, HEAD_DIM], gl.float32, MMA)
    for page_index in range(page_begin, page_end):
        i = page_index - page_begin
        async_copy.wait_group(STAGES - 2)  # this thread's copies of page i landed
        cta_barrier()  # everyone's did, and every warp is done with page i - 1's slot
        _issue_page(k_ptr, v_ptr, next_id, context, page_index + STAGES - 1, page_end, (i + STAGES - 1) % STAGES,
                    k_codes, k_scales, v_codes, v_scales)
        async_copy.commit_group()
        next_id = _page_id(tables_ptr, table_base, head, num_kv_heads, table_stride,
                           _block_of(topk_ptr, ids_base, page_index + STAGES, table_end, SOURCE, PPB),
                           page_index + STAGES, table_end, SOURCE, PPB)
        if FAST:  # each thread checks the K and V scale words of one token of the page
            misses = misses | window_misses(k_scales.index(i % STAGES).load(COPY_SCALES)) \
                | window_misses(v_scales.index(i % STAGES).load(COPY_SCALES))
        m_i, l_i, acc = _attend_page(q, i % STAGES, page_index, context, scale, m_i, l_i, acc,
                                     k_codes, k_scales, v_codes, v_scales, FAST, SOURCE != SPARSE)
    async_copy.wait_group(0)  # no copy may still write the ring when the program's shared memory is reused
    exact = True
    if FAST:
        exact = gl.max(((misses & BYTE_TOPS) != 0).to(gl.int32), axis=0) == 0
    return m_i, l_i, acc, exact


@gluon.jit
def _combine_warps(m_i, l_i, acc):
    """The w warps' (m, l, O) of each head -> the program's (m [16], l [16], O [16, 128 head dims]) in COMBINE_OUT:
    every warp stores its state to shared memory once (O with its columns n relabelled to head dims pv_dim(n) in
    registers first), and after one barrier each thread reads every warp's values of its outputs and combines them in
    registers (the compiler's cross-warp reductions and layout conversions took ~1000 instructions and 19 barriers).
    A warp without tokens (m -inf) gets weight 0."""
    WARPS: gl.constexpr = gl.num_warps()
    COMBINE: gl.constexpr = _combine(WARPS)
    COMBINE_OUT: gl.constexpr = _combine_out(WARPS)
    acc = gl.reshape(gl.permute(gl.reshape(acc, warp_map("out_columns_shape", WARPS)), OUT_COLUMNS_ORDER.value),
                     [WARPS, BLOCK_H, HEAD_DIM])
    state = gl.allocate_shared_memory(gl.float32, [2, WARPS, BLOCK_H], STATE_SMEM)  # m, l: live beside O (one
    state.index(0).store(m_i)  # barrier for all three; buffers allocated one after the other were aliased, each
    state.index(1).store(l_i)  # behind its own pair of barriers)
    o_smem = gl.allocate_shared_memory(gl.float32, [WARPS, BLOCK_H, HEAD_DIM], COMBINE_SMEM, acc)
    state_layout: gl.constexpr = gl.SliceLayout(2, COMBINE)
    m_w = state.index(0).load(state_layout)
    l_w = state.index(1).load(state_layout)
    o_w = o_smem.load(COMBINE)
    m_all = gl.max(m_w, axis=0)  # [16]
    m_safe = gl.where(m_all == float("-inf"), 0.0, m_all)
    weight = gl.exp2(m_w - m_safe[None, :])  # [w, 16]; 0 for a warp without tokens
    l_sum = gl.sum(l_w * weight, axis=0)
    o = gl.sum(o_w * weight[:, :, None], axis=0)  # [16, 128 head dims]
    head_layout: gl.constexpr = gl.SliceLayout(1, COMBINE_OUT)
    return (gl.convert_layout(m_all, head_layout, assert_trivial=True),
            gl.convert_layout(l_sum, head_layout, assert_trivial=True), o)


@gluon.jit
def _coords(num_splits, tail_begin, CLUSTER: gl.constexpr, TAIL: gl.constexpr, AGAIN: gl.constexpr = False):
    """(row, split) of this program: the grid is (rows, splits), or with CLUSTER > 1 (the split merge over a
    cluster) rows x num_splits programs along x, the row's splits consecutive: one cluster of CLUSTER CTAs (or
    num_splits / CLUSTER of them, grouped) per row; or with TAIL > 0 (the split tail, ``tail_for``) one program
    along x for each row below ``tail_begin``, then TAIL consecutive ones (the row's splits) for each row from it.
    AGAIN: the program id read through an opaque register move (``_program_pages``)."""
    pid = gl.program_id(0)
    if AGAIN:
        pid = gl.inline_asm_elementwise("mov.u32 $0, %ctaid.x;", "=r,r", [pid], dtype=gl.int32, is_pure=False,
                                        pack=1)
    if CLUSTER > 1:
        row = pid // num_splits
        split = pid - row * num_splits
    elif TAIL > 0:
        in_tail = gl.maximum(pid - tail_begin, 0)  # 0 for the rows before the tail: split 0
        row = gl.where(pid < tail_begin, pid, tail_begin + in_tail // TAIL)
        split = in_tail - (in_tail // TAIL) * TAIL
    else:
        row = pid
        split = gl.program_id(1)
    return row, split


@gluon.jit
def _pages_a_split(pages, num_splits, pages_per_split):
    """TABLES / DENSE: the pages each split of a row of ``pages`` pages attends (the last may take fewer)."""
    return gl.minimum(gl.cdiv(pages, num_splits), pages_per_split)


@gluon.jit
def _used_splits(row, context_lens_ptr, position_ptr, table_width, num_kv_heads, num_splits, pages_per_split,
                 SOURCE: gl.constexpr):
    """How many of the row's first splits hold pages (the rest stored lse -inf, weight 0): TABLES / DENSE from the
    row's context (one load), SPARSE all of them (its context would need the ids' reduction). At most num_splits: a
    context past the table (unchecked input, check=False) must not send the merge into the next row's slots or past
    the workspace. ``_in_table`` already keeps it there (pages <= width and splits = ceil(width / pages_per_split):
    ``atom_mxfp4.plan.split_pages``); the minimum is the first guard of d4d0248, kept as a second one."""
    if SOURCE == SPARSE:
        used = num_splits
    else:
        if SOURCE == TABLES:
            context = gl.load(context_lens_ptr + row)
        else:
            context = gl.load(position_ptr + row.to(gl.int32) // num_kv_heads) + 1
        pages = gl.cdiv(_in_table(context, table_width), PAGE)  # as _row_source read it
        used = gl.minimum(gl.cdiv(pages, gl.maximum(_pages_a_split(pages, num_splits, pages_per_split), 1)), num_splits)
    return used


@gluon.jit
def _program_pages(context_lens_ptr, request_ptr, position_ptr, topk_ptr, query_scale_ptr, table_stride, table_width,
                   num_kv_heads, num_tokens, topk, pages_per_split, num_splits, logit_scale, tail_begin,
                   HAS_QUERY_SCALE: gl.constexpr, SOURCE: gl.constexpr, TOPK_POW2: gl.constexpr, PPB: gl.constexpr,
                   CLUSTER: gl.constexpr, TAIL: gl.constexpr, AGAIN: gl.constexpr = False):
    """(row, context, page_begin, page_end, table_base, ids_base, head, table_end, logit scale) of this program (row,
    split): TABLES / DENSE: the row's ceil(context / 128) pages divided over the launch's splits (ceil(pages / splits)
    each, at most ``pages_per_split``); SPARSE: pages_per_split pages of the top-k table each. Pages [page_begin,
    page_end) are attended; table entries [page_begin, table_end) are loaded (inside the table's width). AGAIN: for the
    exact fallback pass, the row read through an opaque register move, so that the compiler derives every address of
    that pass again instead of keeping the first pass's values live (spilled) across the hot loop. TAIL: a row before
    ``tail_begin`` is one program over the whole table (one split of table_width pages)."""
    row, split = _coords(num_splits, tail_begin, CLUSTER, TAIL, AGAIN)
    row = row.to(gl.int64)
    if TAIL > 0:
        before_tail = row < tail_begin
        num_splits = gl.where(before_tail, 1, num_splits)
        pages_per_split = gl.where(before_tail, table_width, pages_per_split)
    context, table_base, head, ids_base = _row_source(row, context_lens_ptr, request_ptr, position_ptr, topk_ptr,
                                                      table_stride, table_width, num_kv_heads, num_tokens, topk,
                                                      SOURCE, TOPK_POW2, PPB)
    pages = gl.cdiv(context, PAGE)
    if SOURCE == SPARSE:
        # the table is the row's top-k blocks (full past topk blocks of context) and its context is known only after
        # reducing the ids: the split's entries are loaded by the width, beside that reduction (entries past the
        # context are loaded, their pages never read)
        page_begin = split * pages_per_split
        page_end = gl.minimum(page_begin + pages_per_split, pages)
        table_end = gl.minimum(page_begin + pages_per_split, table_width)
    else:
        # the row's own pages divided over the splits (a short row in a wide table spreads over them all): at most
        # the plan's pages_per_split, which a row of a full table takes; its entries wait for the context (one load)
        per_split = _pages_a_split(pages, num_splits, pages_per_split)
        page_begin = split * per_split
        page_end = gl.minimum(page_begin + per_split, pages)
        table_end = gl.minimum(page_end, table_width)
    scale = logit_scale
    if HAS_QUERY_SCALE:
        scale = scale * gl.load(query_scale_ptr + row)
    return row, context, page_begin, page_end, table_base, ids_base, head, table_end, scale


@gluon.jit
def _pa_decode_kernel(
    out_ptr, q_ptr, k_ptr, v_ptr, tables_ptr, context_lens_ptr, request_ptr, position_ptr, topk_ptr, query_scale_ptr,
    part_out_ptr, part_lse_ptr, counters_ptr,
    table_stride, table_width, num_kv_heads, num_tokens, topk, group, pages_per_split, num_splits, logit_scale,
    tail_begin,
    HAS_QUERY_SCALE: gl.constexpr, SPLIT: gl.constexpr, STAGES: gl.constexpr, FAST_DECODE: gl.constexpr,
    SOURCE: gl.constexpr, TOPK_POW2: gl.constexpr, PPB: gl.constexpr, CLUSTER: gl.constexpr, TAIL: gl.constexpr,
):
    gl.static_assert(STAGES >= 2)
    k_codes = gl.allocate_shared_memory(gl.int32, [STAGES, PAGE, CODE_WORDS], RING_CODES)
    k_scales = gl.allocate_shared_memory(gl.int32, [STAGES, PAGE], RING_SCALES)
    v_codes = gl.allocate_shared_memory(gl.int32, [STAGES, PAGE, CODE_WORDS], RING_CODES)
    v_scales = gl.allocate_shared_memory(gl.int32, [STAGES, PAGE], RING_SCALES)
    row, context, page_begin, page_end, table_base, ids_base, head, table_end, scale = _program_pages(
        context_lens_ptr, request_ptr, position_ptr, topk_ptr, query_scale_ptr, table_stride, table_width,
        num_kv_heads, num_tokens, topk, pages_per_split, num_splits, logit_scale, tail_begin, HAS_QUERY_SCALE, SOURCE,
        TOPK_POW2, PPB, CLUSTER, TAIL)
    m_i, l_i, acc, exact = _stream(q_ptr, k_ptr, v_ptr, tables_ptr, topk_ptr, row, group, table_base, ids_base, head,
                                   num_kv_heads, table_stride, table_end, context, page_begin, page_end, scale,
                                   k_codes, k_scales, v_codes, v_scales, STAGES, FAST_DECODE, SOURCE, PPB)
    if FAST_DECODE:
        if not exact:  # a scale byte or a query element outside the window: the same pages with the exact decode
            cta_barrier()  # every warp is done with the ring
            # the program's values are derived again (AGAIN) rather than kept live over the hot loop (spilled registers)
            row, context, page_begin, page_end, table_base, ids_base, head, table_end, scale = _program_pages(
                context_lens_ptr, request_ptr, position_ptr, topk_ptr, query_scale_ptr, table_stride, table_width,
                num_kv_heads, num_tokens, topk, pages_per_split, num_splits, logit_scale, tail_begin, HAS_QUERY_SCALE,
                SOURCE, TOPK_POW2, PPB, CLUSTER, TAIL, True)
            m_i, l_i, acc, _ = _stream(q_ptr, k_ptr, v_ptr, tables_ptr, topk_ptr, row, group, table_base, ids_base,
                                       head, num_kv_heads, table_stride, table_end, context, page_begin, page_end,
                                       scale, k_codes, k_scales, v_codes, v_scales, STAGES, False, SOURCE, PPB)
    row, split = _coords(num_splits, tail_begin, CLUSTER, TAIL)
    row = row.to(gl.int64)
    has_context = _has_context(row, context_lens_ptr, topk_ptr, num_kv_heads, num_tokens, topk, SOURCE)

    m_all, l_sum, o = _combine_warps(m_i, l_i, acc)
    COMBINE_OUT: gl.constexpr = _combine_out(gl.num_warps())
    head = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(1, COMBINE_OUT))
    dim = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, COMBINE_OUT))
    # l > 0: a softmax; l == 0: no token, or every logit -inf; l NaN: a NaN or +inf logit (docs/api.md)
    has_tokens = l_sum > 0.0
    out = o / gl.where(has_tokens, l_sum, 1.0)[:, None]
    lse = _cluster.lse_of(m_all, l_sum)  # the partial (out, lse) of a split
    if CLUSTER > 1:  # the row's splits are clusters: each CTA merges 16 / CLUSTER heads from the others' shared memory
        _cluster.publish(out, lse, head, dim)  # (SPLIT: several clusters per row, their merges met through L2)
        _cluster.merge(out_ptr, part_out_ptr, part_lse_ptr, counters_ptr, row, split, num_splits, has_context, group,
                       CLUSTER, SPLIT)
    elif SPLIT:
        if TAIL > 0:  # the rows before the tail are one program each, the tail rows TAIL splits (``tail_for``)
            if row < tail_begin:
                _store_row(out_ptr, out, has_tokens, has_context, row, group, head, dim)
            else:
                _split_epilogue(out_ptr, part_out_ptr, part_lse_ptr, counters_ptr, context_lens_ptr, position_ptr,
                                out, lse, head, dim, row, row - tail_begin, split, has_context, group, num_splits,
                                table_width, num_kv_heads, pages_per_split, SOURCE, True)
        else:
            _split_epilogue(out_ptr, part_out_ptr, part_lse_ptr, counters_ptr, context_lens_ptr, position_ptr, out,
                            lse, head, dim, row, row, split, has_context, group, num_splits, table_width,
                            num_kv_heads, pages_per_split, SOURCE, False)
    else:
        _store_row(out_ptr, out, has_tokens, has_context, row, group, head, dim)


@gluon.jit
def _store_row(out_ptr, out, has_tokens, has_context, row, group, head, dim):
    """A direct program's output row (bf16): no token: zeros; tokens but no weight (all logits -inf) or NaN: NaN."""
    out = gl.where(has_tokens[:, None], out, gl.where(has_context, float("nan"), 0.0))
    gl.store(out_ptr + (row * group + head[:, None]) * HEAD_DIM + dim[None, :], out.to(gl.bfloat16),
             mask=(head < group)[:, None])


@gluon.jit
def _split_epilogue(out_ptr, part_out_ptr, part_lse_ptr, counters_ptr, context_lens_ptr, position_ptr, out, lse, head,
                    dim, row, slot_row, split, has_context, group, num_splits, table_width, num_kv_heads,
                    pages_per_split, SOURCE: gl.constexpr, CONTEXT_FROM_USED: gl.constexpr):
    """A split's partial (out, lse) into workspace slot ``slot_row x num_splits + split`` (slot_row: the row, or its
    place in the split tail); the row's last split to finish merges them (no second launch). CONTEXT_FROM_USED (the
    split tail: TABLES / DENSE rows only): whether the row has a token is read as ``used > 0`` (the same for those
    sources: a row with tokens has a page in its first split) instead of keeping ``has_context`` live over the merge
    loop (a spilled predicate register otherwise)."""
    base = (slot_row * num_splits + split) * BLOCK_H
    gl.store(part_out_ptr + (base + head[:, None]) * HEAD_DIM + dim[None, :], out)
    gl.store(part_lse_ptr + base + head, lse)
    cta_barrier()  # every thread's partial is stored; the release below covers them (cumulative)
    done = gl.atomic_add(counters_ptr + row, 1, sem="acq_rel", scope="gpu")
    if done == num_splits - 1:  # acquire: every split's partial is visible
        used = _used_splits(row, context_lens_ptr, position_ptr, table_width, num_kv_heads, num_splits,
                            pages_per_split, SOURCE)
        if CONTEXT_FROM_USED:
            has_context = used > 0
        _merge_row(out_ptr, part_out_ptr, part_lse_ptr, row, slot_row, has_context, group, num_splits, used)
        gl.store(counters_ptr + row, 0)  # the next launch (a graph replay) starts from 0


@gluon.jit
def _merge_row(out_ptr, part_out_ptr, part_lse_ptr, row, slot_row, has_context, group, num_splits, used):
    """out[row] = sum_s w_s * part_out[slot_row, s], w_s = 2**(lse_s - max lse) / sum; a NaN lse makes the head NaN; all
    -inf: zeros when the row has no token, NaN when it has tokens whose logits are all -inf. The partials are read
    from L2 (.cg: other programs wrote them) MERGE_TRIP splits per trip as one [splits, 16, 128] block whose split
    dimension lies in each thread's registers, so a trip's loads are in flight together and the sums over splits are
    register-only; splits past the last read nothing (lse -inf: weight 0), nor do splits from ``used`` on (they hold no
    page of the row: ``_used_splits``)."""
    WARPS: gl.constexpr = gl.num_warps()
    PARTIALS: gl.constexpr = _partials(WARPS)
    split = gl.arange(0, MERGE_TRIP, layout=gl.SliceLayout(1, gl.SliceLayout(2, PARTIALS)))
    head = gl.arange(0, BLOCK_H, layout=gl.SliceLayout(0, gl.SliceLayout(2, PARTIALS)))
    dim = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, gl.SliceLayout(1, PARTIALS)))
    rows_layout: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(0, PARTIALS))  # [16] beside acc [16, 128]
    m_i = gl.full([BLOCK_H], float("-inf"), gl.float32, gl.SliceLayout(0, gl.SliceLayout(2, PARTIALS)))
    l_i = gl.zeros([BLOCK_H], gl.float32, gl.SliceLayout(0, gl.SliceLayout(2, PARTIALS)))
    acc = gl.zeros([BLOCK_H, HEAD_DIM], gl.float32, gl.SliceLayout(0, PARTIALS))
    for first in range(0, used, MERGE_TRIP):
        present = first + split < used
        slot = (slot_row * num_splits + first + split) * BLOCK_H  # [trip]
        lse = gl.load(part_lse_ptr + slot[:, None] + head[None, :], mask=present[:, None] & (head < BLOCK_H)[None, :],
                      other=float("-inf"), cache_modifier=".cg")  # [trip, 16]
        part = gl.load(part_out_ptr + (slot[:, None, None] + head[None, :, None]) * HEAD_DIM + dim[None, None, :],
                       mask=(present[:, None] & (head < BLOCK_H)[None, :])[:, :, None], other=0.0,
                       cache_modifier=".cg")  # [trip, 16, 128]
        m_new = gl.maximum(m_i, gl.max(lse, axis=0))
        m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = gl.exp2(m_i - m_safe)
        weight = gl.exp2(lse - m_safe[None, :])  # [trip, 16]; NaN for a NaN lse, which then reaches l and the head
        l_i = l_i * alpha + gl.sum(weight, axis=0)
        acc = (acc * gl.convert_layout(alpha, rows_layout, assert_trivial=True)[:, None]
               + gl.sum(part * weight[:, :, None], axis=0))
        m_i = m_new
    _cluster.store_rows(out_ptr, row, head, dim, l_i, acc, has_context, group, PARTIALS)


# ---- launcher ---------------------------------------------------------------------------------------------------
def _check_launch(out, q, k_cache, v_cache, query_scale, indices, plan, width):
    """Launch invariants shared by pa_decode and attend (user input was checked by atom_mxfp4.ops); the plan even
    under check=False: a plan too small would be written past its workspace."""
    group = q.shape[1]
    if plan is not None:
        check_plan(plan, backend=NAME, rows=q.shape[0], width=width, group=group, device=q.device,
                   kind=HopperDecodePlan)
    expect(group <= L.BLOCK_H, "q.shape[1] (GQA group)", f"<= {L.BLOCK_H}", group)
    expect(q.dtype in (torch.bfloat16, torch.float8_e4m3fn), "q.dtype", "torch.bfloat16 or torch.float8_e4m3fn",
           q.dtype, TypeError)
    for name, tensor in (("q", q), ("out", out)) + indices + (
            (("query_scale", query_scale),) if isinstance(query_scale, torch.Tensor) else ()):
        expect_contiguous(tensor, name)  # read by pointer with unit strides
    for name, tensor in indices:  # read as int32 words (free to check; a wider dtype would be misread)
        expect(tensor.dtype == torch.int32, f"{name}.dtype", "torch.int32", tensor.dtype, TypeError)
    if isinstance(query_scale, torch.Tensor):  # an fp64 tensor would turn the logits' arithmetic fp64
        expect(query_scale.dtype == torch.float32, "query_scale.dtype", "torch.float32", query_scale.dtype, TypeError)
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not (cache.is_contiguous() and cache.shape[-1] == L.RECORD_BYTES and cache.data_ptr() % 16 == 0):
            fail(f"{name} layout", f"contiguous [pages, heads, {L.RECORD_BYTES}] uint8 records, 16-byte aligned",
                 f"{list(cache.shape)} strides {cache.stride()} at address {cache.data_ptr():#x}")


def _launch(out, q, k_cache, v_cache, width, softmax_scale, query_scale, plan, pointers, sizes, source, topk_pow2=1,
            ppb=1):
    """Launch the kernel for ``rows`` x ``width`` (the table's width; a given plan was checked by ``_check_launch``)
    as the plan decided for that shape (``launch_shape``); ``pointers``: tables / block table, context_lens, request,
    position, topk (unused ones any tensor); ``sizes``: table_stride, num_kv_heads, num_tokens, topk."""
    rows, group, _ = q.shape
    # ---- early return
    if rows == 0 or width == 0:
        out.zero_()
        return out
    # ---- allocate (the plan's workspace; one is made here when the caller passed none)
    plan = make_plan(rows, width, group, q.device) if plan is None else plan
    # ---- tuning: decided once per (plan, shape); the same split under any plan that covers the call
    shape = launch_shape(plan, rows, width, source)
    splits, cluster = shape.splits, shape.cluster
    # ---- flatten: records as int32 words; a tensor query_scale is read per row, a number (or None = 1) is folded
    has_query_scale = isinstance(query_scale, torch.Tensor)
    scalar_scale = 1.0 if query_scale is None or has_query_scale else float(query_scale)
    table_stride, num_kv_heads, num_tokens, topk = sizes
    # ---- launch (the plan's workspace: partials of splits, or of grouped clusters' head slices)
    workspace = (plan.part_out, plan.part_lse, plan.counters) if splits > 1 else (out, out, out)
    args = (out, q, k_cache.view(torch.int32), v_cache.view(torch.int32), *pointers,
            query_scale if has_query_scale else out, *workspace,  # query_scale never read unless HAS_QUERY_SCALE
            table_stride, width, num_kv_heads, num_tokens, topk, group, shape.pages_per_split, splits,
            float(softmax_scale) * scalar_scale * LOG2E, shape.tail_begin)  # tail_begin 0 unless read: one JIT
    # specialisation of the kernels without a tail whatever the row count (an int 1 or a multiple of 16 is another)
    constexprs = _constexprs(plan, shape, has_query_scale, source, topk_pow2, ppb)
    if shape.tail:
        launcher(_pa_decode_kernel)[(shape.programs, 1)](*args, **constexprs)
        return out
    if cluster > 1 and _launch_clusters(rows * splits // cluster, cluster, args, constexprs, q.device):
        return out
    # no cluster, or this device cannot hold one of this kernel's clusters: the row's last split merges through L2
    launcher(_pa_decode_kernel)[(rows, splits)](*args, **_constexprs(plan, shape, has_query_scale, source, topk_pow2,
                                                                      ppb, l2=True))
    return out


def _constexprs(plan, shape, has_query_scale, source, topk_pow2, ppb, l2=False) -> dict:
    """The kernel's constexpr and option keywords for a launch of ``shape`` (``l2``: its splits merged through L2,
    no cluster), made once per plan and kind of launch. Callers never change the dict they get."""
    key = (shape, has_query_scale, source, topk_pow2, ppb, l2)
    found = plan.shapes.get(key)
    if found is None:
        cfg, cluster = plan.config, 1 if l2 else shape.cluster
        found = plan.shapes[key] = dict(
            HAS_QUERY_SCALE=has_query_scale, SPLIT=shape.splits > cluster, STAGES=cfg.stages,
            FAST_DECODE=cfg.fast_decode, SOURCE=source, TOPK_POW2=topk_pow2, PPB=ppb, CLUSTER=cluster,
            TAIL=shape.tail, num_warps=shape.warps, **FUSED, **({"maxnreg": cfg.maxnreg} if cfg.maxnreg is not None
                                                               else {}))
    return found


_CLUSTERS_FIT: dict = {}  # (CUfunction, cluster size, shared bytes) -> whether the device holds such a cluster


def _max_active_clusters(function, shared: int, cluster: int) -> int:
    """cuOccupancyMaxActiveClusters for clusters of ``cluster`` CTAs of 128 threads and ``shared`` bytes (Triton's
    utils: triton 3.6 and 3.8)."""
    return triton.runtime.driver.active.utils.cuOccupancyMaxActiveClusters(function, shared, cluster)


def _clusters_fit(function, cluster: int, shared: int) -> bool:
    """Whether the device can co-schedule one cluster of ``cluster`` CTAs of this compiled kernel with ``shared``
    bytes each (the driver's cuOccupancyMaxActiveClusters through Triton's utils, which count 128 threads a CTA: the
    4-warp program the policy clusters), once per kernel, cluster size and shared size. A cluster's CTAs must fit one
    GPC at once: the H200 holds every cluster the policy launches; an sm_90 part with smaller GPCs may not, and a
    launch it cannot hold fails. An occupancy query that fails counts as no (warned once): the merge through L2."""
    key = (function, cluster, shared)
    if key not in _CLUSTERS_FIT:
        try:
            _CLUSTERS_FIT[key] = _max_active_clusters(function, shared, cluster) > 0
        except Exception as error:  # noqa: BLE001 (a driver or Triton version without the query: no clusters)
            warnings.warn(f"Hopper pa_decode: cannot ask the driver whether a cluster of {cluster} CTAs fits "
                          f"({error!r}); merging splits through L2 instead", RuntimeWarning, stacklevel=3)
            _CLUSTERS_FIT[key] = False
    return _CLUSTERS_FIT[key]


def _launch_clusters(clusters, cluster, args, constexprs, device) -> bool:
    """Launch ``clusters`` clusters of ``cluster`` CTAs (one grid dimension: a row's splits consecutive) with the
    exchange region (``_cluster.XCHG_BYTES``) past the kernel's own shared memory; False (nothing launched) when the
    device cannot hold such a cluster (``_clusters_fit``). Triton launches a kernel compiled for one CTA per program
    without a cluster, so the compiled kernel is run with the cluster size and shared-memory size its launcher takes
    per call (atom_mxfp4.launch)."""
    return launcher(_pa_decode_kernel).cluster((clusters,), cluster, _cluster.XCHG_BYTES,
                                               _clusters_fit)(*args, **constexprs)


def pa_decode(out, q, k_cache, v_cache, tables, context_lens, *, softmax_scale, query_scale, plan):
    # out [R, G, 128] bf16; q [R, G, 128] bf16|e4m3; caches [pages, heads, 8704] u8; tables [R, W] i32; lens [R] i32
    # ---- validate
    width = tables.shape[1]
    _check_launch(out, q, k_cache, v_cache, query_scale, (("tables", tables), ("context_lens", context_lens)), plan,
                  width)
    return _launch(out, q, k_cache, v_cache, width, softmax_scale, query_scale, plan,
                   (tables, context_lens, context_lens, context_lens, context_lens), (width, 1, q.shape[0], 0),
                   SOURCE_TABLES)


def fuses_sparse(rows: int, width: int, device: torch.device, plan: HopperDecodePlan | None = None) -> bool:
    """Whether a sparse ``attend`` of ``rows`` x ``width`` runs as one launch: when its programs fit one per SM (rows
    x splits <= SMs), where the saved tables launch is worth more than what the kernel pays for reading the top-k ids
    itself (a dependent load per page and a few registers: the loop rematerialises addresses). Measured on the H200
    (2026-12-03, docs/hopper.md "One launch per layer"): batch 1 / 8 / 32 one launch 8.3 / 9.0 / 14.7 us against
    tables + decode 9.1 / 10.4 / 15.1; batch 128 / 512 28.9 / 88.5 against 27.8 / 83.9. Otherwise the Triton tables
    kernel, then the decode over its tables (the same output bits; ``attend`` declines, atom_mxfp4.ops composes)."""
    splits = (plan.splits_for(rows, width)[0] if plan is not None
              else num_splits_for(rows, width, device, DEFAULT_CONFIG.programs_per_sm))
    return rows * splits <= _sms(device)


def attend(out, q, k_cache, v_cache, block_table, row_request, row_position, *, num_kv_heads, topk_blocks,
           pages_per_block, softmax_scale, query_scale, plan, always_fuse: bool = False):
    """atom_mxfp4.ops.attend in one launch: the decode kernel reads the block table (and the top-k ids) itself,
    the tables pa_decode would get are never made. Same output bits as pa_decode over those tables (same pages in
    the same order, same splits: the split depends only on (rows, width)). Sparse launches of more programs than
    SMs are declined (returns None; ``fuses_sparse``: the composition measured faster there), so atom_mxfp4.ops runs
    the composition. ``always_fuse``: one launch whatever the shape (benchmarks measure the crossover with it)."""
    # out / q [T * nkv, G, 128]; block_table [B, W] i32; row_request / row_position [T] i32; topk [nkv, T, topk] i32
    # ---- validate
    indices = (("block_table", block_table), ("row_request", row_request), ("row_position", row_position))
    if topk_blocks is not None:
        indices += (("topk_blocks", topk_blocks),)
    width = block_table.shape[1] if topk_blocks is None else topk_blocks.shape[2] * pages_per_block
    _check_launch(out, q, k_cache, v_cache, query_scale, indices, plan, width)
    for name, tensor in indices[:1] + indices[3:]:  # the kernel offsets into them in 32 bits
        expect(tensor.numel() < 2**31, f"{name}.numel()", "< 2**31", tensor.numel())
    tokens = row_request.shape[0]
    expect(q.shape[0] == tokens * num_kv_heads, "q.shape[0]", f"len(row_request) x num_kv_heads = {tokens} x "
           f"{num_kv_heads}", q.shape[0])
    expect(1 <= pages_per_block <= MAX_PAGES_PER_BLOCK, "pages_per_block", f"in [1, {MAX_PAGES_PER_BLOCK}]",
           pages_per_block)  # compile-time sizes stay bounded even under check=False
    if block_table.shape[1] == 0:  # no request holds a page: no token to attend (and no entry to clamp a read to)
        out.zero_()
        return out
    sizes_common = (block_table.stride(0), num_kv_heads, tokens)
    if topk_blocks is None:
        return _launch(out, q, k_cache, v_cache, width, softmax_scale, query_scale, plan,
                       (block_table, row_request, row_request, row_position, row_request), sizes_common + (0,),
                       SOURCE_DENSE)
    topk = topk_blocks.shape[2]
    expect(topk <= MAX_TOPK, "topk_blocks.shape[2] (topk)", f"<= {MAX_TOPK}", topk)
    expect(topk_blocks.shape[:2] == (num_kv_heads, tokens), "topk_blocks.shape[:2]",
           f"(num_kv_heads, len(row_request)) = {(num_kv_heads, tokens)}", tuple(topk_blocks.shape[:2]))
    if not always_fuse and not fuses_sparse(q.shape[0], width, q.device, plan):
        return None  # declined: atom_mxfp4.ops composes build_sparse_tables + pa_decode (the same bits)
    return _launch(out, q, k_cache, v_cache, width, softmax_scale, query_scale, plan,
                   (block_table, row_request, row_request, row_position, topk_blocks), sizes_common + (topk,),
                   SOURCE_SPARSE, pow2_at_least(max(topk, 1)), pages_per_block)


# ---- compile without a GPU (tests/test_hopper_compile.py, atom_mxfp4/evals/bench/hopper_sass.py) ---------------------
SIGNATURE = {
    "out_ptr": "*bf16", "q_ptr": "*bf16", "k_ptr": "*i32", "v_ptr": "*i32", "tables_ptr": "*i32",
    "context_lens_ptr": "*i32", "request_ptr": "*i32", "position_ptr": "*i32", "topk_ptr": "*i32",
    "query_scale_ptr": "*fp32", "part_out_ptr": "*fp32", "part_lse_ptr": "*fp32", "counters_ptr": "*i32",
    "table_stride": "i32", "table_width": "i32", "num_kv_heads": "i32", "num_tokens": "i32", "topk": "i32",
    "group": "i32", "pages_per_split": "i32", "num_splits": "i32", "logit_scale": "fp32", "tail_begin": "i32",
    "HAS_QUERY_SCALE": "constexpr", "SPLIT": "constexpr", "STAGES": "constexpr", "FAST_DECODE": "constexpr",
    "SOURCE": "constexpr", "TOPK_POW2": "constexpr", "PPB": "constexpr", "CLUSTER": "constexpr", "TAIL": "constexpr",
}
SOURCES = {"tables": SOURCE_TABLES, "dense": SOURCE_DENSE, "sparse": SOURCE_SPARSE}  # compile_for_sm90's names


def compile_for_sm90(config: HopperConfig = DEFAULT_CONFIG, *, split: bool = False, query_scale: bool = False,
                     source: str = "tables", topk: int = 16, pages_per_block: int = 1, cluster: int = 1,
                     tail: int = 0):
    """Compile the decode kernel for sm_90 with the ptxas Triton ships (no GPU needed); returns the CompiledKernel.
    ``source``: pa_decode's tables, or attend's "dense" / "sparse" (``topk`` ids of ``pages_per_block`` pages);
    ``cluster``: the split merge over clusters of that many CTAs (with ``split``: several clusters per row, grouped);
    ``tail``: the split tail of that many splits (``tail_for``; a split launch).

    Pointer arguments get the 16-byte divisibility the launcher specialises on at run time (the caches are checked
    16-byte aligned; 8704-byte records keep every page 16-byte aligned)."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    expect(source in SOURCES, "source", f"one of {list(SOURCES)}", repr(source))
    expect(cluster == 1 or cluster in CLUSTER_SIZES, "cluster", f"1 or one of {CLUSTER_SIZES}", cluster)
    expect(tail == 0 or (cluster == 1 and source != "sparse"), "tail", "0, or a launch without clusters that is not a "
           "sparse attend", f"tail {tail} with cluster {cluster}, source {source!r}")
    constants = {"HAS_QUERY_SCALE": query_scale, "SPLIT": split or tail > 0, "CLUSTER": cluster, "TAIL": tail,
                 "STAGES": config.stages, "FAST_DECODE": config.fast_decode, "SOURCE": SOURCES[source],
                 "TOPK_POW2": pow2_at_least(topk) if source == "sparse" else 1,
                 "PPB": pages_per_block if source == "sparse" else 1}
    pointers = [i for i, kind in enumerate(SIGNATURE.values()) if kind.startswith("*")]
    attrs = {(i,): [["tt.divisibility", 16]] for i in pointers}
    warps = L.WARPS if config.warps is None else config.warps
    options = {"num_warps": warps, **FUSED, **({"maxnreg": config.maxnreg} if config.maxnreg is not None else {})}
    return triton.compile(GluonASTSource(_pa_decode_kernel, SIGNATURE, constants, attrs),
                          target=GPUTarget("cuda", 90, 32), options=options)
