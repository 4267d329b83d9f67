"""The epilogue of the Hopper pa_decode kernel (Gluon, sm_90; pa_decode.py): a program's output row, direct or merged.

A direct program stores its bf16 row (``_store_row``); a split stores its partial (out, lse) into the plan's
workspace, and the row's last split to arrive (an acq_rel counter per row, reset by that program) merges the row's
splits that hold pages (``_used_splits``) from L2 in the same launch (``_split_epilogue``, ``_merge_row``). The merge
over a thread-block cluster: _cluster.py. The kernel picks the epilogue by its SPLIT / CLUSTER / TAIL constexprs.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from . import _cluster
from . import layout as L
from ._gluon import cta_barrier
from ._pages import PAGE, SPARSE, TABLES, _in_table, _pages_a_split

HEAD_DIM = gl.constexpr(L.HEAD_DIM)
BLOCK_H = gl.constexpr(L.BLOCK_H)
MERGE_TRIP = gl.constexpr(8)  # partials per trip of the in-launch split merge (_merge_row)


# ---- the program's layouts, by its warp count (gl.num_warps(): 4, or 8 for small batches; layout.PROGRAM_WARPS) ------
@gluon.constexpr_function
def _partials(warps):  # [MERGE_TRIP, 16, 128] of the split merge: the split dimension in each thread's registers
    return gl.BlockedLayout([MERGE_TRIP.value, 1, 4], [1, 4, 8], [1, 4, warps // 4], [2, 1, 0])


# ---- device code ---------------------------------------------------------------------------------------------------
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
