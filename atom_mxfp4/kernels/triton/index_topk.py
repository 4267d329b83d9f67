"""index_topk (Triton): score every 128-token KV block with the index query, force init/local blocks, keep top-k.

``score[h, r, b] = max_{p in block b, p <= row_position[r]} idx_q[r, h] . idx_k[p]`` (dequantized K, fp32 sums;
bf16 idx_q: bf16 x e2m1 products on the tensor cores; fp32 / fp16 idx_q: an fp32 dot, ``input_precision="ieee"``,
never rounded to bf16). A NaN product sum counts as -inf (it never wins a block's max). Two launches:
1. ``_score_kernel`` grid (rows, block chunks): one dequantized index-K page per trip, one ``tl.dot`` for all
   index heads of the row, the page loads software-pipelined ``SCORE_STAGES`` deep (branch-free trips: forced
   blocks are masked, not skipped); writes rank keys [niq, R, max_blocks] int32 for blocks <= the row's own block
   only: the monotone int of the fp32 score (-0 as +0), or for forced blocks (not read) INIT_KEY / LOCAL_KEY, above the
   key of every score including +inf (init blocks b < init_blocks; the ``local_blocks`` blocks ending at the own
   block; init wins where both apply, as in the torch backend).
2. ``_select_kernel`` grid (rows, niq): ``min(topk, own_block + 1)`` rounds (a run-time loop: compiles once for
   every topk) of one int64 max over (rank key << 32 | (max_blocks - block)), so a tie goes to the smaller block
   id; the chosen ids are written ascending by rank (prefix count), padding -1.
Index-K dtype (``INDEX_FP8``): MXFP4 records (8704 B per page) or fp8 records (``_fp8.py``, 16896 B per page:
e4m3 x e8m0 decoded exactly to fp32, then the same bf16 / fp32 dot as MXFP4).
Sentinels: INIT_KEY / LOCAL_KEY forced ranks, -1 padding. Not checked at run time: block_table entries in range.
"""

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from atom_mxfp4.errors import expect, expect_aligned, expect_contiguous, fail
from atom_mxfp4.index_k import IndexKDtype
from atom_mxfp4.launch import cdiv, launcher, pow2_at_least
from atom_mxfp4.layout import INIT_KEY as _INIT_KEY, LOCAL_KEY as _LOCAL_KEY, MAX_INDEX_BLOCKS, MAX_TOPK
from atom_mxfp4.plan import sm_count

from . import INTERPRETER_SMS
from ._fp8 import fp8_query_blocks, fp8_scores, load_fp8_tokens
from ._mxfp4 import HEAD_DIM, NO_BLOCK, PAGE_SIZE, decode_variant, load_tokens, mma_bf16, mma_operand, qk_tile
from ._options import FUSED

INIT_KEY = tl.constexpr(_INIT_KEY)  # rank keys of forced blocks: above +inf's (0x7F800000), init above local
LOCAL_KEY = tl.constexpr(_LOCAL_KEY)
BLOCK_H = tl.constexpr(16)  # index heads per dot (padded; niq <= 16)
MAX_HEADS, NO_BLOCK_ID = int(BLOCK_H), int(NO_BLOCK)  # the launcher's ints (a constexpr's int() is a call)
SCORE_STAGES = tl.constexpr(5)  # software-pipeline depth of the page loop (docs/triton.md, "Pages in flight")


@triton.jit
def _page_score(q, record, first_token, position, read, BLOCK_N: tl.constexpr,
                BLOCK_H: tl.constexpr, MMA_BF16: tl.constexpr, DECODE: tl.constexpr, Q_FP32: tl.constexpr,
                INDEX_FP8: tl.constexpr):
    """[BLOCK_H] max over the page's visible tokens of q . k (NaN -> -inf); ``read`` False: no byte read, -inf.
    q: [BLOCK_H, D] (bf16 values or fp32), or ``fp8_query_blocks`` for the CUDA fp8 scorer."""
    score = tl.full([BLOCK_H], float("-inf"), tl.float32)
    for t in tl.static_range(0, PAGE_SIZE, BLOCK_N):
        offset = t + tl.arange(0, BLOCK_N)
        visible = first_token + offset <= position
        mask = visible & read
        if INDEX_FP8 and DECODE == 2 and not Q_FP32:  # Decode.PTX (CUDA): hardware e4m3, scale per block
            s = fp8_scores(q, record, offset, mask, BLOCK_H, BLOCK_N)
        elif INDEX_FP8:  # e4m3 x 2**k: exact in fp32 and in bf16
            k = load_fp8_tokens(record, offset, mask, BLOCK_N)
            if Q_FP32:
                s = tl.dot(q, tl.trans(k), input_precision="ieee")
            else:
                s = tl.dot(q, tl.trans(mma_operand(k, MMA_BF16)))
        elif Q_FP32:  # fp32 dot of fp32 values (the decoded K is exact in fp32)
            k = load_tokens(record, offset, mask, BLOCK_N, False, DECODE).to(tl.float32)
            s = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            s = qk_tile(q, record, offset, mask, BLOCK_N, MMA_BF16, DECODE)  # [BLOCK_H, N]
        s = tl.where(mask[None, :] & (s == s), s, float("-inf"))  # NaN never wins the max
        score = tl.maximum(score, tl.max(s, axis=1))
    return score


# the integers that change with the batch (rows, table widths, the split): not specialised on, or each
# new combination of 1 / multiple of 16 / neither is another compile in a running server (tests/test_specialisation.py)
BATCH_INTEGERS = ("num_rows", "table_stride", "max_blocks", "blocks_per_program")


@triton.jit(do_not_specialize=BATCH_INTEGERS)
def _score_kernel(
    idx_q_ptr, index_k_ptr, block_table_ptr, row_request_ptr, row_position_ptr, keys_ptr,
    num_rows, num_heads, table_stride, max_blocks, blocks_per_program, init_blocks, local_blocks,
    BLOCK_N: tl.constexpr, MMA_BF16: tl.constexpr, DECODE: tl.constexpr, Q_FP32: tl.constexpr,
    INDEX_FP8: tl.constexpr, INDEX_RECORD_BYTES: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    head = tl.arange(0, BLOCK_H)
    dim = tl.arange(0, HEAD_DIM)
    head_ok = head < num_heads
    request = tl.load(row_request_ptr + row).to(tl.int64)
    position = tl.load(row_position_ptr + row)
    own_block = position // PAGE_SIZE
    if INDEX_FP8 and DECODE == 2 and not Q_FP32:  # the CUDA fp8 scorer: four bf16 [BLOCK_H, 32] blocks
        q = fp8_query_blocks(idx_q_ptr + row * num_heads * HEAD_DIM, head_ok, BLOCK_H)
    else:
        q = tl.load(idx_q_ptr + (row * num_heads + head[:, None]) * HEAD_DIM + dim[None, :], mask=head_ok[:, None],
                    other=0.0).to(tl.float32)
        if not Q_FP32:
            q = mma_operand(q, MMA_BF16)  # bf16 values: exact
    out_ptr = keys_ptr + (head * num_rows + row) * max_blocks  # [BLOCK_H] pointers of keys[h, row, :]
    first = chunk * blocks_per_program
    # the chunk's blocks <= own_block (and in the table), every trip the same code without a branch, so the compiler
    # pipelines the page loads SCORE_STAGES deep (cp.async); a forced block reads nothing (masked), its key set after.
    # The fp32 dot (fp32 / fp16 idx_q) is not pipelined: staged, its fp32 operands spill on sm_90.
    trips = tl.minimum(blocks_per_program, tl.minimum(own_block + 1, max_blocks) - first)
    for i in tl.range(0, trips, num_stages=1 if Q_FP32 else SCORE_STAGES):
        blk = first + i
        is_init = blk < init_blocks
        read = (blk >= init_blocks) & (blk <= own_block - local_blocks)  # not forced: init or local
        page = tl.load(block_table_ptr + request * table_stride + blk, mask=read, other=0).to(tl.int64)
        score = _page_score(q, index_k_ptr + page * INDEX_RECORD_BYTES, blk * PAGE_SIZE, position, read, BLOCK_N,
                            BLOCK_H, MMA_BF16, DECODE, Q_FP32, INDEX_FP8)
        bits = (score + 0.0).to(tl.int32, bitcast=True)  # -0.0 -> +0.0 (they tie in the torch backend)
        key = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)  # monotone: larger score -> larger key
        key = tl.where(read, key, tl.where(is_init, INIT_KEY, LOCAL_KEY))
        tl.store(out_ptr + blk, key, mask=head_ok)


@triton.jit(do_not_specialize=BATCH_INTEGERS)
def _score_tiled_kernel(
    idx_q_ptr, index_k_ptr, block_table_ptr, row_request_ptr, row_position_ptr, tile_start_ptr, keys_ptr,
    num_rows, num_heads, table_stride, max_blocks, blocks_per_program, init_blocks, local_blocks,
    BLOCK_M: tl.constexpr, HEADS: tl.constexpr, BLOCK_N: tl.constexpr, MMA_BF16: tl.constexpr,
    DECODE: tl.constexpr, INDEX_FP8: tl.constexpr, INDEX_RECORD_BYTES: tl.constexpr,
):
    """Prefill-shaped scoring: one program scores ``BLOCK_M`` consecutive rows of one request (a tile from
    ``tile_starts``; -1: no tile, nothing done) x all their index heads against a chunk of blocks, each page decoded
    once for the whole tile: the dot is [BLOCK_M x HEADS, 128] x [128, BLOCK_N] (row-major over (row, head)).
    Writes the same rank keys as ``_score_kernel`` (every block <= each row's own block)."""
    start = tl.load(tile_start_ptr + tl.program_id(0))
    live = start >= 0
    start = tl.maximum(start, 0).to(tl.int64)
    chunk = tl.program_id(1)
    f = tl.arange(0, BLOCK_M * HEADS)  # (row in tile, head) flattened
    row = start + f // HEADS
    head = f % HEADS
    request0 = tl.load(row_request_ptr + start)
    in_range = (row < num_rows) & live
    request = tl.load(row_request_ptr + row, mask=in_range, other=-1)
    row_ok = in_range & (request == request0)  # the tile's rows: one request (tile_starts cut at request changes)
    lane_ok = row_ok & (head < num_heads)
    position = tl.load(row_position_ptr + row, mask=row_ok, other=0)
    own_block = position // PAGE_SIZE
    dim = tl.arange(0, HEAD_DIM)
    q = tl.load(idx_q_ptr + (row[:, None] * num_heads + head[:, None]) * HEAD_DIM + dim[None, :],
                mask=lane_ok[:, None], other=0.0).to(tl.float32)
    q = mma_operand(q, MMA_BF16)  # bf16 values: exact
    out_ptr = keys_ptr + (head.to(tl.int64) * num_rows + row) * max_blocks
    first = chunk * blocks_per_program
    top_block = tl.max(tl.where(lane_ok, own_block, -1), axis=0)
    trips = tl.minimum(blocks_per_program, tl.minimum(top_block + 1, max_blocks) - first)
    for i in range(0, trips):
        blk = first + i
        is_init = blk < init_blocks
        read = lane_ok & (blk >= init_blocks) & (blk <= own_block - local_blocks)  # per lane: not forced
        page_read = tl.max(read.to(tl.int32), axis=0) > 0
        page = tl.load(block_table_ptr + request0 * table_stride + blk, mask=page_read, other=0).to(tl.int64)
        record = index_k_ptr + page * INDEX_RECORD_BYTES
        score = tl.full([BLOCK_M * HEADS], float("-inf"), tl.float32)
        for t in tl.static_range(0, PAGE_SIZE, BLOCK_N):
            offset = t + tl.arange(0, BLOCK_N)
            token_ok = (offset >= 0) & page_read
            if INDEX_FP8:
                k = load_fp8_tokens(record, offset, token_ok, BLOCK_N)
            else:
                k = load_tokens(record, offset, token_ok, BLOCK_N, MMA_BF16, DECODE)
            s = tl.dot(q, tl.trans(mma_operand(k, MMA_BF16)))  # [BLOCK_M x HEADS, BLOCK_N]
            visible = (blk * PAGE_SIZE + offset)[None, :] <= position[:, None]
            s = tl.where(visible & read[:, None] & (s == s), s, float("-inf"))  # NaN never wins the max
            score = tl.maximum(score, tl.max(s, axis=1))
        bits = (score + 0.0).to(tl.int32, bitcast=True)  # -0.0 -> +0.0
        key = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)
        key = tl.where(read, key, tl.where(is_init, INIT_KEY, LOCAL_KEY))
        tl.store(out_ptr + blk, key, mask=lane_ok & (blk <= own_block))


@triton.jit(do_not_specialize=("num_rows", "max_blocks"))
def _select_kernel(
    keys_ptr, row_position_ptr, out_ptr, num_rows, max_blocks,
    TOPK: tl.constexpr, TOPK_POW2: tl.constexpr, BLOCKS_POW2: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    position = tl.load(row_position_ptr + row)
    own_block = position // PAGE_SIZE
    blk = tl.arange(0, BLOCKS_POW2)
    valid = (blk <= own_block) & (blk < max_blocks)
    rank_key = tl.load(keys_ptr + (head * num_rows + row) * max_blocks + blk, mask=valid, other=0)
    # the rank key in the high half, the block id in the low half with smaller ids larger, so one max picks the best
    # score and, on a tie, the smallest block
    key = (rank_key.to(tl.int64) << 32) | (max_blocks - blk).to(tl.int64)
    NONE: tl.constexpr = -9223372036854775807 - 1
    key = tl.where(valid, key, NONE)
    count = tl.minimum(own_block + 1, TOPK)
    chosen = blk < 0  # all False
    for _ in range(0, count):  # run-time bound: no unrolling by topk
        best = tl.max(key, axis=0)
        pick = (key == best) & (best != NONE)  # (NONE only if own_block >= max_blocks: unchecked input)
        chosen = chosen | pick
        key = tl.where(pick, NONE, key)
    # ascending output: rank of a chosen block = number of chosen blocks before it
    rank = tl.cumsum(chosen.to(tl.int32), axis=0) - 1
    base = out_ptr + (head * num_rows + row) * TOPK
    tl.store(base + rank, blk.to(tl.int32), mask=chosen & (rank < TOPK))
    slot = tl.arange(0, TOPK_POW2)
    tl.store(base + slot, tl.full([TOPK_POW2], NO_BLOCK, tl.int32), mask=(slot >= count) & (slot < TOPK))


# ---- tuning -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class IndexConfig:
    block_n: int = 128  # tokens per dot inside a page (H200 sweep: 128 > 64 > 32 at 32K context)
    score_warps: int = 4
    select_warps: int = 4
    blocks_per_program: int | None = None  # None: the heuristic below
    tile_rows: int | None = None  # (row, head) lanes per program of one request (``_score_tiled_kernel``, 16 or 32:
    # the dot's M; at 64 sm_90's wgmma lowering refuses the MXFP4 decode's layout), prefill-shaped batches, bf16 idx_q
    # only; None: one program per row. A layer asks for it in prefill batches (ops.index_topk tile_rows,
    # LayerConfig.index_tile_rows; timed by evals/bench/prefill_bench.py)
    asm: bool = True  # the PTX decode of pa_decode's DecodeConfig.asm (GPU only); the same exact bf16 values as the
    # Triton decode, so the same scores and ids. Faster than tl.dot_scaled at large batch on the H200, which was
    # removed (docs/triton.md "Tried and not kept ("Removed experiments")"; 32K x 256: ledger rows "index_topk" /
    # "triton PTX decode", docs/results/ledger.csv); batch 1 unchanged


DEFAULT_CONFIG = IndexConfig()
TILED_CONFIGS = {rows: IndexConfig(tile_rows=rows) for rows in (16, 32)}  # ops.index_topk(tile_rows=)


def blocks_per_program_for(num_rows: int, max_blocks: int, device: torch.device) -> int:
    """Blocks scored per program: about 8 programs per SM over the whole (rows x blocks) grid, at most 64."""
    sms = sm_count(device.index if device.type == "cuda" else 0, INTERPRETER_SMS)
    want = max(1, (num_rows * max_blocks) // (8 * sms))
    return min(64, max_blocks, pow2_at_least(want))


def check_index_topk(idx_q, index_k_cache, block_table, row_request, row_position, topk, index_k_dtype):
    """The launch invariants of an index_topk kernel (host-side, no sync; also under check=False) -> the index-K
    dtype. Shared with the Hopper scorer (atom_mxfp4/kernels/hopper/index_topk.py)."""
    rows, heads, _ = idx_q.shape
    index_dtype = IndexKDtype.parse(index_k_dtype)
    width = index_dtype.record_bytes
    if (heads <= MAX_HEADS and 1 <= topk <= MAX_TOPK and block_table.shape[1] <= MAX_INDEX_BLOCKS
            and idx_q.is_contiguous() and all([t.is_contiguous() and t.dtype == torch.int32
                                               for t in (block_table, row_request, row_position)])
            and index_k_cache.dtype == torch.uint8 and index_k_cache.is_contiguous()
            and index_k_cache.shape[1:] == (1, width)):
        return index_dtype  # every invariant holds: one expression; the named checks below say which does not
    expect(heads <= MAX_HEADS, "idx_q.shape[1] (index heads)", f"<= {MAX_HEADS}", heads)
    # compile-time sizes stay bounded even under check=False (host-side, no sync)
    expect(1 <= topk <= MAX_TOPK, "topk", f"in [1, {MAX_TOPK}]", topk)
    expect(block_table.shape[1] <= MAX_INDEX_BLOCKS, "block_table.shape[1]", f"<= {MAX_INDEX_BLOCKS}",
           block_table.shape[1])
    for name, tensor in (("idx_q", idx_q), ("block_table", block_table), ("row_request", row_request),
                         ("row_position", row_position)):
        expect_contiguous(tensor, name)  # read by pointer with unit strides (block_table rows by its row stride)
    for name, tensor in (("block_table", block_table), ("row_request", row_request), ("row_position", row_position)):
        # read as int32 words (free to check; a wider dtype would be misread)
        expect(tensor.dtype == torch.int32, f"{name}.dtype", "torch.int32", tensor.dtype, TypeError)
    if not (index_k_cache.dtype == torch.uint8 and index_k_cache.is_contiguous()
            and index_k_cache.shape[1:] == (1, width)):
        fail("index_k_cache", f"contiguous uint8 [pages, 1, {width}] (index_k_dtype {index_dtype.value!r})",
             f"{index_k_cache.dtype} {list(index_k_cache.shape)} strides {tuple(index_k_cache.stride())}")
    return index_dtype


def tile_starts(row_request, block_m: int) -> torch.Tensor:
    """The tiles of ``_score_tiled_kernel``: runs of consecutive rows of one request cut every ``block_m`` rows ->
    [R] int32, the first row of each tile in order, then -1 (no tile). Built on the device without a sync (R slots:
    as many tiles as rows at most, when every row is a request of its own; a prefill batch needs about R / block_m)."""
    rows = row_request.shape[0]
    index = torch.arange(rows, device=row_request.device)
    new_run = torch.ones(rows, dtype=torch.bool, device=row_request.device)
    new_run[1:] = row_request[1:] != row_request[:-1]
    run_start = torch.where(new_run, index, 0).cummax(0).values
    is_start = (index - run_start) % block_m == 0
    slot = torch.where(is_start, torch.cumsum(is_start, 0) - 1, rows)  # non-starts to the spare slot past the end
    starts = torch.full((rows + 1,), -1, dtype=torch.int32, device=row_request.device)
    starts.scatter_(0, slot, index.to(torch.int32))
    return starts[:rows]


def select_topk(keys, row_position, out, *, topk, config=None):
    """keys [heads, R, max_blocks] int32 (the score kernels' rank keys, blocks <= each row's own block) -> out [heads,
    R, topk]: the ``min(topk, own + 1)`` best blocks ascending, -1 padded (``_select_kernel``). Shared with the Hopper
    scorer."""
    heads, rows, max_blocks = keys.shape
    cfg = DEFAULT_CONFIG if config is None else config
    launcher(_select_kernel)[(rows, heads)](
        keys, row_position, out, rows, max_blocks,
        TOPK=topk, TOPK_POW2=pow2_at_least(topk), BLOCKS_POW2=pow2_at_least(max_blocks),
        num_warps=cfg.select_warps, **FUSED,
    )
    return out


def allocate_outputs(idx_q, block_table, topk):
    """(out [heads, R, topk] int32, keys [heads, R, max_blocks] int32) of a score + select launch, or (out, None)
    when no launch is needed: no rows or heads (empty out), a zero-width block table (every id -1). Shared with the
    Hopper scorer."""
    rows, heads, _ = idx_q.shape
    max_blocks = block_table.shape[1]
    out = torch.empty(heads, rows, topk, dtype=torch.int32, device=idx_q.device)
    if rows == 0 or heads == 0:
        return out, None
    if max_blocks == 0:
        return out.fill_(NO_BLOCK_ID), None
    return out, torch.empty(heads, rows, max_blocks, dtype=torch.int32, device=idx_q.device)


def index_topk(idx_q, index_k_cache, block_table, row_request, row_position, *, topk, init_blocks, local_blocks,
               index_k_dtype=IndexKDtype.MXFP4, config=None, tile_rows=None):
    # idx_q [R, niq, 128]; index_k_cache [pages, 1, 8704] (mxfp4) / [pages, 1, 16896] (fp8) u8;
    # block_table [B, max_blocks] i32; row_* [R] i32; tile_rows (ops.index_topk's): the default config's tiled form
    # ---- validate (launch invariants)
    index_dtype = check_index_topk(idx_q, index_k_cache, block_table, row_request, row_position, topk, index_k_dtype)
    if index_dtype is IndexKDtype.FP8:  # checked on every device: the interpreter too (one contract)
        expect_aligned(index_k_cache, "index_k_cache", 4, "the fp8 scorer reads a token's 4 scale bytes as one int32")
    rows, heads, _ = idx_q.shape
    width = index_dtype.record_bytes
    # ---- flatten
    max_blocks = block_table.shape[1]
    device = idx_q.device
    # ---- allocate, early return
    out, keys = allocate_outputs(idx_q, block_table, topk)
    if keys is None:
        return out
    # ---- tuning
    cfg = config or (DEFAULT_CONFIG if tile_rows is None else TILED_CONFIGS.get(tile_rows)
                     or fail("tile_rows", "None, 16 or 32", repr(tile_rows)))
    q_fp32 = idx_q.dtype != torch.bfloat16  # fp32 / fp16 idx_q: an fp32 dot (bf16 would round it)
    tiled = cfg.tile_rows is not None and not q_fp32  # the prefill-shaped scorer: a program per tile of rows
    if tiled:
        heads_pow2 = pow2_at_least(heads)
        expect(cfg.tile_rows in (16, 32) and cfg.tile_rows >= heads_pow2, "config.tile_rows",
               f"16 or 32 and >= the index heads rounded up to a power of two ({heads_pow2})", cfg.tile_rows)
        block_m = cfg.tile_rows // heads_pow2
    per_program = (blocks_per_program_for(cdiv(rows, block_m) if tiled else rows, max_blocks, device)
                   if cfg.blocks_per_program is None else cfg.blocks_per_program)  # ~8 programs per SM
    # ---- launch
    if tiled:
        starts = tile_starts(row_request, block_m)
        launcher(_score_tiled_kernel)[(starts.shape[0], cdiv(max_blocks, per_program))](
            idx_q, index_k_cache, block_table, row_request, row_position, starts, keys,
            rows, heads, block_table.stride(0), max_blocks, per_program, init_blocks, local_blocks,
            BLOCK_M=block_m, HEADS=heads_pow2, BLOCK_N=min(cfg.block_n, 64), MMA_BF16=mma_bf16(),
            DECODE=decode_variant(cfg.asm).value, INDEX_FP8=index_dtype is IndexKDtype.FP8,
            INDEX_RECORD_BYTES=width, num_warps=cfg.score_warps, **FUSED,
        )
    else:
        launcher(_score_kernel)[(rows, cdiv(max_blocks, per_program))](
            idx_q, index_k_cache, block_table, row_request, row_position, keys,
            rows, heads, block_table.stride(0), max_blocks, per_program, init_blocks, local_blocks,
            BLOCK_N=cfg.block_n, MMA_BF16=mma_bf16(), DECODE=decode_variant(cfg.asm).value, Q_FP32=q_fp32,
            INDEX_FP8=index_dtype is IndexKDtype.FP8, INDEX_RECORD_BYTES=width,
            num_warps=cfg.score_warps, **FUSED,
        )
    return select_topk(keys, row_position, out, topk=topk, config=cfg)
