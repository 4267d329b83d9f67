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
direct (one program per row, bf16 out) otherwise, except that a direct launch's rows past its last full wave, when
they are at most one program per SM, run as ``HopperConfig.tail_splits`` splits each (3 by default; ``tail_for``,
docs/hopper.md "The split tail"). The split count depends only on (rows, table width), so a plan made once is
valid for every replay of a CUDA graph.
Not checked at run time: page ids in range (``atom_mxfp4.ops`` checks with check=True). A length (TABLES) or position
(DENSE) past the table passes under check=False: the kernel reads it as the whole table and a negative length as 0
(``_in_table``), so that no entry past the row and no partial slot past the row's is read.
Files (one role each; this file imports them, they never import it): _pages.py, where a program's pages come from
(its (row, split), the row's source, its split's pages, their table entries and copies into the ring); _loop.py, the
main loop (Q, the K / V operands, the online softmax and its rescale, the warp combine); _merge.py, the epilogue (the
direct store, the in-launch split merge); this file, the kernel ``_pa_decode_kernel`` that strings them together, the
launchers and ``compile_for_sm90``.
"""

from __future__ import annotations

import warnings

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from atom_mxfp4.errors import expect, expect_contiguous, fail
from atom_mxfp4.layout import MAX_PAGES_PER_BLOCK, MAX_TOPK
from atom_mxfp4.launch import launcher, pow2_at_least
from atom_mxfp4.plan import check_plan

from . import NAME
from . import _cluster
from . import layout as L
from ._gluon import FUSED, cta_barrier
from ._loop import BLOCK_H, HEAD_DIM, _combine_out, _combine_warps, _stream
from ._merge import _split_epilogue, _store_row
from ._pages import CODE_WORDS, PAGE, _coords, _has_context, _program_pages
# helpers read through this module by tests/gpu/test_hopper_gpu.py's own kernel and tests/test_hopper_layout.py
from ._loop import _b_operand, _k_operand, _v_load, _v_operand, rescale_vote_registers  # noqa: F401
from ._pages import TABLES, _issue_page, _page_id  # noqa: F401
# the split policy and the plan (policy.py), re-exported: this module is the Hopper pa_decode's whole interface
from .policy import (  # noqa: F401
    CLUSTER_PAGES_PER_SPLIT, CLUSTER_SIZES, CLUSTERED_SPLITS, DEFAULT_CONFIG, EIGHT_WARP_MIN_PAGES,
    FILL_PAGES_PER_SPLIT, H200_SMS, MAX_SPLITS, MAX_TAIL_SPLITS, MIN_PAGES_PER_SPLIT, ONE_PAGE_SPLIT_WIDTH,
    POLICY_CLUSTER_SIZES, SOURCE_DENSE, SOURCE_SPARSE, SOURCE_TABLES, HopperConfig, HopperDecodePlan, LaunchShape, _sms,
    cluster_for, launch_shape, make_plan, num_splits_for, overlap_for, partial_slots, tail_for, warps_for, with_config)

LOG2E = 1.4426950408889634

# the ring the kernel allocates: _issue_page (_pages.py) copies pages into its stages, the loop (_loop.py) reads them
RING_CODES = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))  # [stages, 128, 16]: unswizzled [128, 16] stages
RING_SCALES = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [0]))  # [stages, 128]


# the integers that change with the batch (rows, table widths, the split): not specialised on, or each
# new combination of 1 / multiple of 16 / neither is another compile in a running server (tests/test_specialisation.py)
BATCH_INTEGERS = ("table_stride", "table_width", "num_tokens", "pages_per_split", "num_splits", "tail_begin")


@gluon.jit(do_not_specialize=BATCH_INTEGERS)
def _pa_decode_kernel(
    out_ptr, q_ptr, k_ptr, v_ptr, tables_ptr, context_lens_ptr, request_ptr, position_ptr, topk_ptr, query_scale_ptr,
    part_out_ptr, part_lse_ptr, counters_ptr,
    table_stride, table_width, num_kv_heads, num_tokens, topk, group, pages_per_split, num_splits, logit_scale,
    tail_begin,
    HAS_QUERY_SCALE: gl.constexpr, SPLIT: gl.constexpr, STAGES: gl.constexpr, FAST_DECODE: gl.constexpr,
    SOURCE: gl.constexpr, TOPK_POW2: gl.constexpr, PPB: gl.constexpr, CLUSTER: gl.constexpr, TAIL: gl.constexpr,
    OVERLAP: gl.constexpr,
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
                                   k_codes, k_scales, v_codes, v_scales, STAGES, FAST_DECODE, SOURCE, PPB, OVERLAP)
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


# ---- launcher ---------------------------------------------------------------------------------------------------
_Q_DTYPES = (torch.bfloat16, torch.float8_e4m3fn)


def _records_ok(cache) -> bool:
    """Contiguous ``[pages, heads, RECORD_BYTES]`` records at a 16-byte aligned address (the kernel's cp.async)."""
    return cache.is_contiguous() and cache.shape[-1] == L.RECORD_BYTES and cache.data_ptr() % 16 == 0


def _check_launch(out, q, k_cache, v_cache, query_scale, indices, plan, width):
    """Launch invariants shared by pa_decode and attend (user input was checked by atom_mxfp4.ops); the plan even
    under check=False: a plan too small would be written past its workspace."""
    group = q.shape[1]
    if plan is not None:
        check_plan(plan, backend=NAME, rows=q.shape[0], width=width, group=group, device=q.device,
                   kind=HopperDecodePlan)
    scale_tensor = isinstance(query_scale, torch.Tensor)
    if (group <= L.BLOCK_H and q.dtype in _Q_DTYPES and q.is_contiguous() and out.is_contiguous()
            and all([t.is_contiguous() and t.dtype == torch.int32 for _, t in indices])
            and (not scale_tensor or (query_scale.is_contiguous() and query_scale.dtype == torch.float32))
            and _records_ok(k_cache) and _records_ok(v_cache)):
        return  # every invariant holds: one expression; the named checks below only to say which one does not
    expect(group <= L.BLOCK_H, "q.shape[1] (GQA group)", f"<= {L.BLOCK_H}", group)
    expect(q.dtype in _Q_DTYPES, "q.dtype", "torch.bfloat16 or torch.float8_e4m3fn",
           q.dtype, TypeError)
    for name, tensor in (("q", q), ("out", out)) + indices + (
            (("query_scale", query_scale),) if isinstance(query_scale, torch.Tensor) else ()):
        expect_contiguous(tensor, name)  # read by pointer with unit strides
    for name, tensor in indices:  # read as int32 words (free to check; a wider dtype would be misread)
        expect(tensor.dtype == torch.int32, f"{name}.dtype", "torch.int32", tensor.dtype, TypeError)
    if isinstance(query_scale, torch.Tensor):  # an fp64 tensor would turn the logits' arithmetic fp64
        expect(query_scale.dtype == torch.float32, "query_scale.dtype", "torch.float32", query_scale.dtype, TypeError)
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not _records_ok(cache):
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
            TAIL=shape.tail, OVERLAP=overlap_for(cfg, source), num_warps=shape.warps, **FUSED,
            **({"maxnreg": cfg.maxnreg} if cfg.maxnreg is not None else {}))
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
    """Whether a sparse ``attend`` of ``rows`` x ``width`` runs as one launch: when its programs fit one per SM (rows x
    splits <= SMs), where the saved tables launch is worth more than what the kernel pays for reading the top-k ids
    itself (a dependent load per page and a few registers: the loop rematerialises addresses). Measured faster on the
    H200 up to batch 32 and slower from batch 128 (docs/hopper.md "One launch per layer"; the sweep's figures: ledger
    rows "attend" / "hopper one launch" against "hopper tables + decode", batch 1 to 512; the current times are in the
    ledger too, docs/results/ledger.csv). Otherwise the Triton tables kernel, then the decode over its tables (the
    same output bits; ``attend`` declines, atom_mxfp4.ops composes)."""
    if plan is None:
        return rows * num_splits_for(rows, width, device, DEFAULT_CONFIG.programs_per_sm) <= _sms(device)
    key = ("fuses_sparse", rows, width)  # asked once per plan and shape (plan.shapes: the plan's launch decisions)
    found = plan.shapes.get(key)
    if found is None:
        found = plan.shapes[key] = rows * plan.splits_for(rows, width)[0] <= _sms(device)
    return found


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
    tokens = row_request.shape[0]
    if not (all([tensor.numel() < 2**31 for _, tensor in indices[:1] + indices[3:]])
            and q.shape[0] == tokens * num_kv_heads and 1 <= pages_per_block <= MAX_PAGES_PER_BLOCK):
        for name, tensor in indices[:1] + indices[3:]:  # the kernel offsets into them in 32 bits
            expect(tensor.numel() < 2**31, f"{name}.numel()", "< 2**31", tensor.numel())
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
    if not (topk <= MAX_TOPK and topk_blocks.shape[:2] == (num_kv_heads, tokens)):
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
    "OVERLAP": "constexpr",
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
                 "PPB": pages_per_block if source == "sparse" else 1, "OVERLAP": overlap_for(config, SOURCES[source])}
    pointers = [i for i, kind in enumerate(SIGNATURE.values()) if kind.startswith("*")]
    attrs = {(i,): [["tt.divisibility", 16]] for i in pointers}
    warps = L.WARPS if config.warps is None else config.warps
    options = {"num_warps": warps, **FUSED, **({"maxnreg": config.maxnreg} if config.maxnreg is not None else {})}
    return triton.compile(GluonASTSource(_pa_decode_kernel, SIGNATURE, constants, attrs),
                          target=GPUTarget("cuda", 90, 32), options=options)
