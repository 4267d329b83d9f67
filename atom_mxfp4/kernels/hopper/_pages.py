"""Where a program's pages come from: the page sourcing of the Hopper pa_decode kernel (Gluon, sm_90; pa_decode.py).

A program's (row, split) (``_coords``); its row's context, table row and head by where the pages come from (the SOURCE
constexpr: pa_decode's tables, or attend's block table, + the top-k ids when sparse: ``_row_source``,
``_has_context``); the pages its split attends (``_pages_a_split``, ``_program_pages``); the folded page id of each
(``_block_of``, ``_page_id``); and the ``cp.async`` of a page's K and V records into a ring stage (``_issue_page``).
The main loop (_loop.py) streams these pages; the split merge (_merge.py) reads a row's context again to count the
splits that hold its pages. The guarantees (tokens past the context never loaded, entries past the row never read,
unchecked lengths read inside the table): pa_decode.py's docstring.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from . import layout as L
from ._gluon import async_load
from .policy import SOURCE_DENSE, SOURCE_SPARSE, SOURCE_TABLES

PAGE = gl.constexpr(L.PAGE_SIZE)
RECORD_WORDS = gl.constexpr(L.RECORD_WORDS)
CODE_WORDS = gl.constexpr(L.CODE_WORDS)
SCALE_WORD = gl.constexpr(L.SCALE_WORD)
# where a row's pages come from (the SOURCE constexpr): pa_decode's tables, or attend's block table (+ top-k ids)
TABLES = gl.constexpr(SOURCE_TABLES)
DENSE = gl.constexpr(SOURCE_DENSE)
SPARSE = gl.constexpr(SOURCE_SPARSE)


# ---- the program's layouts, by its warp count (gl.num_warps(): 4, or 8 for small batches; layout.PROGRAM_WARPS) ------
@gluon.constexpr_function
def _copy_codes(warps):  # [128, 16] words: 16 B per cp.async
    return gl.BlockedLayout([1, L.COPY_CODE_VEC], [8, 4], [warps, 1], [1, 0])


@gluon.constexpr_function
def _copy_scales(warps):  # [128] words (8 warps: threads 128..255 repeat 0..127's words; the PTX predicates their
    # cp.async off with tid < 128, so each word is copied once: hopper_sass.py --dump, 8_warps_split.ptx)
    return gl.BlockedLayout([1], [32], [warps], [0])


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
    slower on the H200 at large batch (one more live register, addresses rematerialised in the loop; ledger row
    "attend" / "hopper one launch, id a trip ahead", batch=512 sparse top-16, docs/results/ledger.csv)."""
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
