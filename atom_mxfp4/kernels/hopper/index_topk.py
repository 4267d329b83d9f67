"""index_topk (Gluon, Hopper sm_90): the index-K scorer (fp8 and MXFP4) with explicit layouts, then the Triton select.

Same signature and semantics as the Triton backend's ``index_topk`` (DESIGN §5): ``score[h, r, b] = max over the
block's tokens p <= row_position[r] of idx_q[r, h] . idx_k[p]`` (dequantized, fp32 sums), NaN -> -inf, init / local
blocks forced, the ``min(topk, own + 1)`` best blocks ascending, -1 padded. This kernel scores the production case,
**bf16 idx_q with at most 8 index heads** (niq per rank is 1 at TP4, 4 at TP1), over either index-K dtype; any other
call (fp32 / fp16 idx_q, 9-16 heads) runs the Triton scorer: a composition inside the backend, stated here and in
docs/hopper.md, not a fallback from a failure. Both write the same rank keys, and the Triton ``_select_kernel`` picks
the ids from them (``select_topk``).

Numerics, fp8 index-K: the Triton GPU scorer's (``_fp8.fp8_scores``): per 32-channel block, the e4m3 codes converted
exactly to bf16 (hardware ``cvt.rn.f16x2.e4m3x2``, then f16 -> f32 -> bf16, exact: e4m3 fits both), one bf16 MMA
chain with fp32 accumulation, times the token's block scale ``2**(e - 127)`` in fp32 (``e << 23``: 255 -> Inf, as the
Triton scorer), the 4 blocks summed in order. MXFP4 index-K: pa_decode's exact K decode (the values as bf16, scale
folded in, as the Triton scorer's decode), one MMA chain over the 128 channels. So the scores equal the Triton
kernel's wherever the dot is exact (the MMA's internal sum order may differ; the GPU tests build exact scores and
compare the ids and the rank keys bit for bit).

Structure (layout.IDX_*): one program = 4 warps per (row, chunk of blocks); one loop trip = one 128-token page
streamed through a ring of ``IndexConfig.stages`` shared-memory stages with ``cp.async`` (per-token masks: tokens past
the row's position and every byte of a forced block are never read, zero-filled); warp ``w`` decodes its 32 tokens
straight into the A operand registers of ``mma.sync.m16n8k16`` (M = tokens, N = heads, K = channels; fp8: the channel
order permuted so that a lane's 8 bytes per (token, block) are one 64-bit shared load, ``layout.idx_channel``; MXFP4:
pa_decode's K operand order ``layout.qk_dim``; q is loaded once per program in the same order). Each warp stores its
page maxima to shared memory; after the loop one barrier, and the program writes the rank keys of its blocks (the
Triton kernel's keys, bit for bit).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy, mma_v2

from atom_mxfp4.errors import expect, expect_aligned
from atom_mxfp4.index_k import IndexKDtype
from atom_mxfp4.launch import cdiv, launcher
from atom_mxfp4.layout import INIT_KEY as _INIT_KEY, LOCAL_KEY as _LOCAL_KEY

from . import layout as L
from ._decode import unpack_bf16x2
from ._gluon import FUSED, async_load, cta_barrier
from ._loop import _k_operand

# the Triton scorer's module (the package's ``index_topk`` attribute is the function)
triton_index = importlib.import_module("atom_mxfp4.kernels.triton.index_topk")

PAGE = gl.constexpr(L.PAGE_SIZE)
WARPS = gl.constexpr(L.WARPS)
TOKENS_PER_WARP = gl.constexpr(L.TOKENS_PER_WARP)
HEADS = gl.constexpr(L.IDX_HEADS)
FP8_CODE_WORDS = gl.constexpr(L.FP8_CODE_WORDS)
FP8_RECORD_WORDS = gl.constexpr(L.FP8_RECORD_WORDS)
FP8_SCALE_WORD = gl.constexpr(L.FP8_SCALE_WORD)
MX_CODE_WORDS = gl.constexpr(L.CODE_WORDS)
MX_RECORD_WORDS = gl.constexpr(L.RECORD_WORDS)
MX_SCALE_WORD = gl.constexpr(L.SCALE_WORD)
QK_DIM_BITS = gl.constexpr(L.QK_DIM_BITS)
IDX_KK_BITS = gl.constexpr(L.IDX_KK_BITS)
WORDS_SHAPE = gl.constexpr(L.IDX_WORDS_SHAPE)
BLOCK_SPLIT_SHAPE = gl.constexpr(L.IDX_BLOCK_SPLIT_SHAPE)
BLOCK_SPLIT_ORDER = gl.constexpr(L.IDX_BLOCK_SPLIT_ORDER)
A_ORDER = gl.constexpr(L.IDX_A_ORDER)
INIT_KEY = gl.constexpr(_INIT_KEY)
LOCAL_KEY = gl.constexpr(_LOCAL_KEY)
MAX_TRIPS = gl.constexpr(64)  # blocks per program at most (blocks_per_program_for caps at 64): the maxima buffer

MMA = gl.constexpr(gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=L.MMA_WARPS, instr_shape=L.MMA_INSTR_SHAPE))
A_OPERAND = gl.constexpr(gl.DotOperandLayout(0, MMA.value, L.K_WIDTH))  # a block of K [4, 32 tokens, 32]
B_OPERAND = gl.constexpr(gl.DotOperandLayout(1, MMA.value, L.K_WIDTH))  # a block of q^T [4, 32, 8 heads]
ROWS = gl.constexpr(gl.SliceLayout(2, MMA.value))  # [4, 32 tokens]: one value per accumulator row
WORDS = gl.constexpr(gl.DistributedLinearLayout(**L.IDX_WORDS_BASES))
COPY_FP8 = gl.constexpr(gl.BlockedLayout([1, 4], [4, 8], [L.WARPS, 1], [1, 0]))  # [128, 32] words, 16 B copies
COPY_MX = gl.constexpr(gl.BlockedLayout([1, 4], [8, 4], [L.WARPS, 1], [1, 0]))  # [128, 16] words, 16 B copies
COPY_SCALES = gl.constexpr(gl.BlockedLayout([1], [32], [L.WARPS], [0]))  # [128] words
RING_CODES = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
RING_SCALES = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [0]))
MAXIMA_SMEM = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))  # [MAX_TRIPS, 4 warps, 8 heads] fp32 (the
# order is that of one trip's [4, 8], as for the ring layouts)
MAXIMA = gl.constexpr(gl.BlockedLayout([L.WARPS, 1], [1, 32], [1, L.WARPS], [1, 0]))  # one trip's [4, 8]: the warps
# in each thread's registers

# one word of 4 e4m3 bytes -> bf16x2 (bytes 0, 1) and bf16x2 (bytes 2, 3), exactly (f16 and f32 hold every e4m3;
# 0x7F / 0xFF -> NaN, as the Triton scorer's conversion)
FP8_ASM = gl.constexpr("\n".join([
    "{", ".reg .b16 lo, hi, a0, a1, b0, b1;", ".reg .b32 a, b;", ".reg .f32 f0, f1, f2, f3;",
    "mov.b32 {lo, hi}, $2;",
    "cvt.rn.f16x2.e4m3x2 a, lo;", "cvt.rn.f16x2.e4m3x2 b, hi;",
    "mov.b32 {a0, a1}, a;", "mov.b32 {b0, b1}, b;",
    "cvt.f32.f16 f0, a0;", "cvt.f32.f16 f1, a1;", "cvt.f32.f16 f2, b0;", "cvt.f32.f16 f3, b1;",
    "cvt.rn.bf16x2.f32 $0, f1, f0;", "cvt.rn.bf16x2.f32 $1, f3, f2;", "}"]))


@gluon.jit
def _query_operand(idx_q_ptr, row, num_heads, K: gl.constexpr, BITS: gl.constexpr, FIRST: gl.constexpr):
    """q^T as the B operand [4 warps, K, 8 heads], row k = channel FIRST + permute_bits(k, BITS) (heads >= num_heads
    are 0), once per program. fp8: one 32-channel block (K 32, layout.IDX_KK_BITS, FIRST 32 beta); MXFP4: all 128
    channels in pa_decode's K operand order (layout.QK_DIM_BITS)."""
    k = gl.arange(0, K, layout=gl.SliceLayout(0, gl.SliceLayout(2, B_OPERAND)))
    head = gl.arange(0, HEADS, layout=gl.SliceLayout(0, gl.SliceLayout(1, B_OPERAND)))
    warp = gl.arange(0, WARPS, layout=gl.SliceLayout(1, gl.SliceLayout(2, B_OPERAND)))
    channel = k * 0 + FIRST
    for i in gl.static_range(len(BITS)):
        channel += ((k >> i) & 1) << BITS[i]
    offset = (warp[:, None, None] * 0 + (row * num_heads + head[None, None, :]) * 128 + channel[None, :, None])
    return gl.load(idx_q_ptr + offset, mask=(head < num_heads)[None, None, :] & (warp >= 0)[:, None, None], other=0.0)


@gluon.jit
def _a_block(pairs):
    """[4, 32 tokens, c, sigma, b, h] bf16 of one block -> its A operand [4, 32, 32] (column kk = b + 2 c + 8 h + 16
    sigma), asserted free."""
    a = gl.reshape(gl.permute(pairs, A_ORDER.value), [WARPS, TOKENS_PER_WARP, 32])
    return gl.convert_layout(a, A_OPERAND, assert_trivial=True)


@gluon.jit
def _block_score(q, a, scale_words, beta: gl.constexpr, total):
    """total + (a . q) x the tokens' block-``beta`` scales (fp32, e << 23)."""
    part = mma_v2(a, q, gl.zeros([WARPS, TOKENS_PER_WARP, HEADS], gl.float32, MMA))
    factor = (((scale_words >> (8 * beta)) & 0xFF) << 23).to(gl.float32, bitcast=True)
    return part * factor[:, :, None] + total


@gluon.jit
def _page_maxima(q0, q1, q2, q3, codes, scales, slot, first_token, position, INDEX_FP8: gl.constexpr):
    """[4 warps, 8 heads] max over each warp's 32 tokens of ring slot ``slot`` (tokens > position and NaN: -inf)."""
    if INDEX_FP8:
        total = _fp8_scores(q0, q1, q2, q3, codes, scales, slot)
    else:  # MXFP4: pa_decode's exact K decode (scale folded, bf16), permuted to the A operand; one MMA chain
        kt = _k_operand(codes, scales, slot, False)  # [4, 128 (channel qk_dim(k)), 32 tokens], pa_decode's B operand
        a = gl.convert_layout(gl.permute(kt, [0, 2, 1]), A_OPERAND, assert_trivial=True)
        total = mma_v2(a, q0, gl.zeros([WARPS, TOKENS_PER_WARP, HEADS], gl.float32, MMA))
    warp = gl.arange(0, WARPS, layout=gl.SliceLayout(1, ROWS))
    token = gl.arange(0, TOKENS_PER_WARP, layout=gl.SliceLayout(0, ROWS))
    visible = first_token + warp[:, None] * TOKENS_PER_WARP + token[None, :] <= position
    total = gl.where(visible[:, :, None] & (total == total), total, float("-inf"))
    return gl.max(total, axis=1)


@gluon.jit
def _fp8_scores(q0, q1, q2, q3, codes, scales, slot):
    """[4 warps, 32 tokens, 8 heads] scores of the fp8 tokens of ring slot ``slot``: per 32-channel block one MMA
    chain, times the tokens' block scales in fp32, summed in block order."""
    words = codes.index(slot).reshape(WORDS_SHAPE.value).load(WORDS)  # [w, n, beta, c, sigma]
    h0, h1 = gl.inline_asm_elementwise(FP8_ASM, "=r,=r,r", [words], dtype=(gl.int32, gl.int32), is_pure=True,
                                       pack=1)
    pairs = gl.join(unpack_bf16x2(h0), unpack_bf16x2(h1))  # [w, n, beta, c, sigma, b, h]
    pairs = gl.permute(gl.reshape(pairs, BLOCK_SPLIT_SHAPE.value), BLOCK_SPLIT_ORDER.value)
    even, odd = gl.split(pairs)  # beta0 = 0 / 1: [w, n, c, sigma, b, h, beta1]
    block0, block2 = gl.split(even)
    block1, block3 = gl.split(odd)
    scale_words = scales.index(slot).reshape([WARPS, TOKENS_PER_WARP]).load(ROWS)
    total = gl.zeros([WARPS, TOKENS_PER_WARP, HEADS], gl.float32, MMA)
    total = _block_score(q0, _a_block(block0), scale_words, 0, total)
    total = _block_score(q1, _a_block(block1), scale_words, 1, total)
    total = _block_score(q2, _a_block(block2), scale_words, 2, total)
    return _block_score(q3, _a_block(block3), scale_words, 3, total)


@gluon.jit
def _read_block(block, init_blocks, own, local_blocks):
    """Whether block ``block`` is scored from its bytes (not forced: init, or one of the local blocks)."""
    return (block >= init_blocks) & (block <= own - local_blocks)


@gluon.jit
def _page_of(table_row, block, end, init_blocks, own, local_blocks):
    """The page of ``block`` (0 when it is not read or past the chunk: its copies are masked off)."""
    read = _read_block(block, init_blocks, own, local_blocks) & (block < end)
    return gl.load(table_row + block, mask=read, other=0)


@gluon.jit
def _issue(index_k_ptr, page, block, end, position, init_blocks, own, local_blocks, slot, codes, scales,
           INDEX_FP8: gl.constexpr):
    """cp.async block ``block``'s record (page ``page``) into ring slot ``slot``: only tokens <= position of a block
    that is read; the rest zero-filled, never read."""
    CODE_WORDS: gl.constexpr = FP8_CODE_WORDS if INDEX_FP8 else MX_CODE_WORDS
    SCALE_WORD: gl.constexpr = FP8_SCALE_WORD if INDEX_FP8 else MX_SCALE_WORD
    COPY: gl.constexpr = COPY_FP8 if INDEX_FP8 else COPY_MX
    read = _read_block(block, init_blocks, own, local_blocks) & (block < end)
    valid = gl.where(read, gl.minimum(position - block * PAGE + 1, PAGE), 0)
    record = page.to(gl.int64) * (FP8_RECORD_WORDS if INDEX_FP8 else MX_RECORD_WORDS)
    token = gl.arange(0, PAGE, layout=gl.SliceLayout(1, COPY))
    word = gl.arange(0, CODE_WORDS, layout=gl.SliceLayout(0, COPY))
    mask = (token < valid)[:, None] & (word < CODE_WORDS)[None, :]
    async_load(codes.index(slot), index_k_ptr + record + token[:, None] * CODE_WORDS + word[None, :], mask=mask)
    scale_token = gl.arange(0, PAGE, layout=COPY_SCALES)
    async_load(scales.index(slot), index_k_ptr + record + SCALE_WORD + scale_token, mask=scale_token < valid)


# the integers that change with the batch (rows, table widths, the split): not specialised on, or each
# new combination of 1 / multiple of 16 / neither is another compile in a running server (tests/test_specialisation.py)
BATCH_INTEGERS = ("num_rows", "table_stride", "max_blocks", "blocks_per_program")


@gluon.jit(do_not_specialize=BATCH_INTEGERS)
def _score_kernel(idx_q_ptr, index_k_ptr, block_table_ptr, row_request_ptr, row_position_ptr, keys_ptr,
                  num_rows, num_heads, table_stride, max_blocks, blocks_per_program, init_blocks, local_blocks,
                  STAGES: gl.constexpr, INDEX_FP8: gl.constexpr):
    gl.static_assert(STAGES >= 2)
    codes = gl.allocate_shared_memory(gl.int32, [STAGES, PAGE, FP8_CODE_WORDS if INDEX_FP8 else MX_CODE_WORDS],
                                      RING_CODES)
    scales = gl.allocate_shared_memory(gl.int32, [STAGES, PAGE], RING_SCALES)
    maxima = gl.allocate_shared_memory(gl.float32, [MAX_TRIPS, WARPS, HEADS], MAXIMA_SMEM)
    row = gl.program_id(0)
    first = gl.program_id(1) * blocks_per_program
    position = gl.load(row_position_ptr + row)
    table_row = block_table_ptr + gl.load(row_request_ptr + row).to(gl.int64) * table_stride
    own = position // PAGE
    end = gl.minimum(first + blocks_per_program, gl.minimum(own + 1, max_blocks))  # blocks [first, end)
    trips = end - first
    if INDEX_FP8:
        q0 = _query_operand(idx_q_ptr, row, num_heads, 32, IDX_KK_BITS, 0)
        q1 = _query_operand(idx_q_ptr, row, num_heads, 32, IDX_KK_BITS, 32)
        q2 = _query_operand(idx_q_ptr, row, num_heads, 32, IDX_KK_BITS, 64)
        q3 = _query_operand(idx_q_ptr, row, num_heads, 32, IDX_KK_BITS, 96)
    else:
        q0 = _query_operand(idx_q_ptr, row, num_heads, 128, QK_DIM_BITS, 0)
        q1 = q0
        q2 = q0
        q3 = q0
    for s in gl.static_range(STAGES - 1):  # prologue: the first STAGES - 1 blocks in flight
        block = first + s
        _issue(index_k_ptr, _page_of(table_row, block, end, init_blocks, own, local_blocks), block, end, position,
               init_blocks, own, local_blocks, s, codes, scales, INDEX_FP8)
        async_copy.commit_group()
    next_page = _page_of(table_row, first + STAGES - 1, end, init_blocks, own, local_blocks)  # a trip ahead
    for i in range(0, trips):
        async_copy.wait_group(STAGES - 2)  # this thread's copies of block first + i landed
        cta_barrier()  # everyone's did, and every warp is done with the slot refilled below
        block = first + i + STAGES - 1
        _issue(index_k_ptr, next_page, block, end, position, init_blocks, own, local_blocks, (i + STAGES - 1) % STAGES,
               codes, scales, INDEX_FP8)
        async_copy.commit_group()
        next_page = _page_of(table_row, block + 1, end, init_blocks, own, local_blocks)
        page_max = _page_maxima(q0, q1, q2, q3, codes, scales, i % STAGES, (first + i) * PAGE, position, INDEX_FP8)
        maxima.index(i).store(page_max)
    async_copy.wait_group(0)
    cta_barrier()
    # the rank keys of blocks [first, end): the Triton kernel's (monotone int of the score, -0 as +0; forced blocks
    # INIT_KEY / LOCAL_KEY, init first)
    head = gl.arange(0, HEADS, layout=gl.SliceLayout(0, MAXIMA))
    keys_row = keys_ptr + (head * num_rows + row).to(gl.int64) * max_blocks
    for i in range(0, trips):
        block = first + i
        score = gl.max(maxima.index(i).load(MAXIMA), axis=0)  # [8]: the max over the 4 warps
        bits = (score + 0.0).to(gl.int32, bitcast=True)
        key = gl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)
        forced = gl.where(block < init_blocks, INIT_KEY, LOCAL_KEY)
        key = gl.where(_read_block(block, init_blocks, own, local_blocks), key, forced)
        gl.store(keys_row + block, key, mask=head < num_heads)


# ---- tuning -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class IndexConfig:
    stages: int | None = None  # ring stages (pages in flight + 1); None: ``stages_for`` (the H200 measurement)
    blocks_per_program: int | None = None  # None: the Triton scorer's heuristic (about 8 programs per SM)


DEFAULT_CONFIG = IndexConfig()
NUM_WARPS = L.WARPS
MAX_STAGES = 8  # 8 x 16896 B + the maxima: 143 KB of the 227 KB a program may hold
SMALL_GRID_BLOCKS = 8192  # fp8, rows x max_blocks up to this: 2 stages (42 KB per program, 5 per SM), else 3 (59 KB)


def stages_for(rows: int, max_blocks: int, index_k_dtype: IndexKDtype = IndexKDtype.FP8) -> int:
    """Ring stages by the call, from a forced-stage sweep on the H200 (docs/hopper.md "index_topk"): fp8, 2 stages
    were 5-11% faster at rows x blocks <= 4096 (small grids hold more programs per SM), 3 stages 1-9% faster from 16384;
    MXFP4 (8704-B pages), 2 stages were as fast or faster at every shape; 4 stages never won. The sweep's figures:
    ledger rows "index_topk" / "hopper 2 stages" and "hopper 3 stages" (32K x 4 and 32K x 256 rows, both index-K
    dtypes; docs/results/ledger.csv)."""
    if index_k_dtype is IndexKDtype.MXFP4:
        return 2
    return 2 if rows * max_blocks <= SMALL_GRID_BLOCKS else 3


def native(idx_q: torch.Tensor) -> bool:
    """Whether this kernel scores the call (bf16 idx_q, <= 8 index heads; either index-K dtype); else the Triton
    scorer."""
    return idx_q.dtype == torch.bfloat16 and idx_q.shape[1] <= L.IDX_HEADS


def index_topk(idx_q, index_k_cache, block_table, row_request, row_position, *, topk, init_blocks, local_blocks,
               index_k_dtype=IndexKDtype.MXFP4, config=None, tile_rows=None):
    """DESIGN §5 ``index_topk`` on sm_90 (see the module docstring for which calls this kernel scores). ``tile_rows``
    (prefill-shaped rows, ops.index_topk): Triton's tiled scorer, which decodes each index-K page once per tile of a
    request's rows where this kernel decodes it once per row (H100: 1.9-2.8x faster on a 32K prompt's chunks,
    ledger rows "prefill chunk: index_tiled32")."""
    if not native(idx_q) or (tile_rows is not None and config is None):  # Triton checks its launch invariants
        return triton_index.index_topk(idx_q, index_k_cache, block_table, row_request, row_position, topk=topk,
                                       init_blocks=init_blocks, local_blocks=local_blocks,
                                       index_k_dtype=index_k_dtype, tile_rows=tile_rows)
    index_dtype = triton_index.check_index_topk(idx_q, index_k_cache, block_table, row_request, row_position, topk,
                                                index_k_dtype)
    expect_aligned(index_k_cache, "index_k_cache", 16, "the scorer copies records with 16-byte cp.async")
    out, keys = triton_index.allocate_outputs(idx_q, block_table, topk)
    if keys is None:
        return out
    rows, heads, _ = idx_q.shape
    max_blocks = block_table.shape[1]
    cfg = DEFAULT_CONFIG if config is None else config
    per_program = (triton_index.blocks_per_program_for(rows, max_blocks, idx_q.device)
                   if cfg.blocks_per_program is None else cfg.blocks_per_program)
    if not (1 <= per_program <= MAX_TRIPS.value and (cfg.stages is None or 2 <= cfg.stages <= MAX_STAGES)
            and idx_q.numel() < 2**31):  # the messages made only on a refusal
        expect(1 <= per_program <= MAX_TRIPS.value, "config.blocks_per_program", f"in [1, {MAX_TRIPS.value}]",
               per_program)
        expect(cfg.stages is None or 2 <= cfg.stages <= MAX_STAGES, "config.stages", f"None or in [2, {MAX_STAGES}]",
               cfg.stages)
        expect(idx_q.numel() < 2**31, "idx_q.numel()", "< 2**31 (the kernel's q offsets are 32-bit)", idx_q.numel())
    launcher(_score_kernel)[(rows, cdiv(max_blocks, per_program))](
        idx_q, index_k_cache.view(torch.int32), block_table, row_request, row_position, keys,
        rows, heads, block_table.stride(0), max_blocks, per_program, init_blocks, local_blocks,
        STAGES=stages_for(rows, max_blocks, index_dtype) if cfg.stages is None else cfg.stages,
        INDEX_FP8=index_dtype is IndexKDtype.FP8, num_warps=NUM_WARPS, **FUSED,
    )
    return triton_index.select_topk(keys, row_position, out, topk=topk)


SIGNATURE = {
    "idx_q_ptr": "*bf16", "index_k_ptr": "*i32", "block_table_ptr": "*i32", "row_request_ptr": "*i32",
    "row_position_ptr": "*i32", "keys_ptr": "*i32",
    "num_rows": "i32", "num_heads": "i32", "table_stride": "i32", "max_blocks": "i32", "blocks_per_program": "i32",
    "init_blocks": "i32", "local_blocks": "i32", "STAGES": "constexpr", "INDEX_FP8": "constexpr",
}


def compile_for_sm90(config: IndexConfig = IndexConfig(stages=3), index_k_dtype: str = "fp8"):
    """The scorer compiled for sm_90 without a GPU (atom_mxfp4/evals/bench/hopper_sass.py --index,
    tests/test_hopper_compile.py)."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    pointers = [i for i, kind in enumerate(SIGNATURE.values()) if kind.startswith("*")]
    attrs = {(i,): [["tt.divisibility", 16]] for i in pointers}
    stages = 3 if config.stages is None else config.stages
    constants = {"STAGES": stages, "INDEX_FP8": IndexKDtype.parse(index_k_dtype) is IndexKDtype.FP8}
    return triton.compile(GluonASTSource(_score_kernel, SIGNATURE, constants, attrs),
                          target=GPUTarget("cuda", 90, 32), options={"num_warps": NUM_WARPS, **FUSED})
