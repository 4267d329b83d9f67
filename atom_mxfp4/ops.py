"""The four public ops of DESIGN §5: validate (DESIGN §6), then dispatch to a backend; and ``attend``, a layer's
attention step (pa_decode over the tables of ``dense_tables`` / ``build_sparse_tables``), which a backend may run as
one launch (Hopper) and the others compose.

Every op takes ``backend=None`` (best available for the device; an explicit name never falls back) and
``check=True``: attribute checks (dtype, shape, device, strides) on every call, and value checks that need a
device->host sync (slot and page ids in range, positions inside the RoPE table, lengths inside the table, top-k ids
canonical) once per batch: a value check that passed for the same, unchanged tensors is not run again
(``atom_mxfp4.checked``), so every layer after the first reading a batch's metadata pays no sync. ``check=False``
skips all validation: use it on the CUDA-graph hot path with inputs you built yourself. Unchecked inputs out of
range are undefined behaviour.
"""

from __future__ import annotations

import math
import weakref

import torch

from . import op_replay
from .backends import resolve_backend
from .cache import as_records, index_k_dtype_of, index_records
from .checked import attributes, once
from .errors import (expect, expect_contiguous, expect_device, expect_dtype, expect_int, expect_positive,
                     expect_shape, fail, is_number)
from .format import DEFAULT_CACHE_SCALE_MODE, ScaleMode
from .layout import (HEAD_DIM, MAX_GROUP, MAX_INDEX_BLOCKS, MAX_INDEX_HEADS, MAX_PAGES_PER_BLOCK,  # noqa: F401
                     MAX_TOPK, NO_BLOCK, NO_SLOT, PAGE_SIZE, qkv_width)
from .plan import DecodePlan, check_plan, plan_device
from .replay import derived

FLOAT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
Q_DTYPES = (torch.bfloat16, torch.float8_e4m3fn)
INDEX = (torch.int32,)


def _index_vector(tensor, name: str, length: int, device, dtype=INDEX) -> None:
    expect(isinstance(tensor, torch.Tensor), name, "a tensor", type(tensor).__name__, TypeError)
    expect_dtype(tensor, name, dtype)
    expect_shape(tensor, name, (length,))
    expect_device(tensor, name, device)
    expect_contiguous(tensor, name)


# The attribute checks below run on every check=True call (issue 39: a few host microseconds at most). Each group
# first tests all its conditions in one expression (``*_ok``); the named checks, which say which condition failed,
# run only when that expression is false. An ``*_ok`` is never looser than its named checks (where it is stricter,
# e.g. a numpy float scale, the named checks decide).
_Tensor = torch.Tensor
_NUMBER = (int, float)  # type(x) in _NUMBER: a plain int or float (not a bool, not a numpy scalar)


def _vector_ok(tensor, length: int, device, dtype=torch.int32) -> bool:
    """``_index_vector``'s conditions in one expression."""
    return (isinstance(tensor, _Tensor) and tensor.dtype == dtype and tensor.dim() == 1
            and tensor.shape[0] == length and tensor.device == device and tensor.is_contiguous())


def _in_range(tensor: torch.Tensor, name: str, low: int, high: int) -> None:
    """All values in [low, high) (host sync; only under check=True)."""
    if tensor.numel() == 0:
        return
    lo, hi = int(tensor.min()), int(tensor.max())
    expect(lo >= low and hi < high, name, f"values in [{low}, {high})", f"values in [{lo}, {hi}]")


def _distinct_slots(slot_mapping: torch.Tensor) -> None:
    """Two tokens never write one slot (which one would win differs between backends); -1 may repeat. Host sync."""
    slots = slot_mapping[slot_mapping != NO_SLOT]
    if slots.numel() < 2:
        return
    ordered = torch.sort(slots).values
    repeated = ordered[1:] == ordered[:-1]
    if bool(repeated.any()):
        slot = int(ordered[1:][repeated][0])
        tokens = torch.nonzero(slot_mapping == slot).flatten().tolist()
        shown = ", ".join(map(str, tokens[:8])) + (f", ... ({len(tokens)} tokens)" if len(tokens) > 8 else "")
        fail("slot_mapping", "distinct slots (-1 may repeat)", f"slot {slot} for tokens [{shown}]")


def _head_dim(tensor, name: str) -> None:
    expect(tensor.shape[-1] == HEAD_DIM, f"{name}.shape[-1] (head_dim)", f"{HEAD_DIM} (the only head_dim of the "
           "MXFP4 kernels)", tensor.shape[-1])


# ----------------------------------------------------------------------------------------------------------------
def check_write_args(qkv, positions, q_norm_weight, k_norm_weight, idx_q_norm_weight, idx_k_norm_weight,
                     cos_sin_cache, slot_mapping, k_records, v_records, i_records, *, num_q_heads, num_kv_heads,
                     num_index_heads, rotary_dim, eps, q_dtype) -> None:
    """Everything fused_qknorm_rope_write checks with check=True (caches already as records); host syncs for the
    value checks. The layer runs it before its first write, so a refused step writes nothing."""
    def named():
        if not _write_args_ok(qkv, positions, (q_norm_weight, k_norm_weight, idx_q_norm_weight, idx_k_norm_weight),
                              cos_sin_cache, slot_mapping, k_records, v_records, i_records, num_q_heads,
                              num_kv_heads, num_index_heads, rotary_dim, eps, q_dtype):
            _check_write_attributes(qkv, positions, q_norm_weight, k_norm_weight, idx_q_norm_weight,
                                    idx_k_norm_weight, cos_sin_cache, slot_mapping, k_records, v_records, i_records,
                                    num_q_heads, num_kv_heads, num_index_heads, rotary_dim, eps, q_dtype)

    attributes("write", (num_q_heads, num_kv_heads, num_index_heads, rotary_dim, eps, q_dtype),
               (qkv, positions, q_norm_weight, k_norm_weight, idx_q_norm_weight, idx_k_norm_weight, cos_sin_cache,
                slot_mapping, k_records, v_records, i_records), named)
    pages = k_records.shape[0]

    def values():
        _in_range(positions, "positions", 0, cos_sin_cache.shape[0])
        _in_range(slot_mapping, "slot_mapping", NO_SLOT, pages * PAGE_SIZE)
        _distinct_slots(slot_mapping)

    once("write", (positions, slot_mapping), (cos_sin_cache.shape[0], pages), values)


def _write_args_ok(qkv, positions, weights, cos_sin_cache, slot_mapping, k_records, v_records, i_records, nq, nkv,
                   niq, rotary_dim, eps, q_dtype) -> bool:
    """``_check_write_attributes``' conditions in one expression."""
    if not (type(nq) is int and type(nkv) is int and type(niq) is int and nq >= 1 and nkv >= 1 and niq >= 0
            and nq % nkv == 0 and nq // nkv <= MAX_GROUP and (niq == 0) == (i_records is None)
            and isinstance(qkv, _Tensor) and qkv.dtype in FLOAT_DTYPES and qkv.dim() == 2):
        return False
    device, tokens = qkv.device, qkv.shape[0]
    pages = k_records.shape[0]
    return (qkv.shape[1] == qkv_width(nq, nkv, niq) and qkv.stride(1) == 1
            and _vector_ok(positions, tokens, device, torch.int64) and _vector_ok(slot_mapping, tokens, device,
                                                                                   torch.int64)
            and all([isinstance(w, _Tensor) and w.dtype in FLOAT_DTYPES and w.dim() == 1 and w.shape[0] == HEAD_DIM
                     and w.device == device and w.is_contiguous() for w in (weights if niq else weights[:2])])
            and type(rotary_dim) is int and 2 <= rotary_dim <= HEAD_DIM and rotary_dim % 2 == 0
            and isinstance(cos_sin_cache, _Tensor) and cos_sin_cache.dtype == torch.float32
            and cos_sin_cache.dim() == 2 and cos_sin_cache.shape[1] == rotary_dim and cos_sin_cache.device == device
            and cos_sin_cache.is_contiguous() and type(eps) in _NUMBER and math.isfinite(eps) and eps > 0
            and q_dtype in Q_DTYPES and k_records.shape[1] == nkv and k_records.device == device
            and v_records.shape[1] == nkv and v_records.device == device and v_records.shape[0] == pages
            and (i_records is None or (i_records.shape[1] == 1 and i_records.device == device
                                       and i_records.shape[0] == pages)))


def _check_write_attributes(qkv, positions, q_norm_weight, k_norm_weight, idx_q_norm_weight, idx_k_norm_weight,
                            cos_sin_cache, slot_mapping, k_records, v_records, i_records, num_q_heads, num_kv_heads,
                            num_index_heads, rotary_dim, eps, q_dtype) -> None:
    """check_write_args' attribute checks, named (the first that fails raises)."""
    nq, nkv = expect_int(num_q_heads, "num_q_heads", 1), expect_int(num_kv_heads, "num_kv_heads", 1)
    niq = expect_int(num_index_heads, "num_index_heads", 0)
    expect(nq % nkv == 0 and nq // nkv <= MAX_GROUP, "num_q_heads / num_kv_heads (GQA group)",
           f"an integer group in [1, {MAX_GROUP}]", f"{nq} / {nkv}")
    expect((niq == 0) == (i_records is None), "index_k_cache", "given exactly when num_index_heads > 0",
           f"index_k_cache={'None' if i_records is None else 'a cache'}, num_index_heads={niq}")
    expect(isinstance(qkv, torch.Tensor), "qkv", "a tensor", type(qkv).__name__, TypeError)
    expect_dtype(qkv, "qkv", FLOAT_DTYPES)
    width = qkv_width(nq, nkv, niq)
    expect_shape(qkv, "qkv", (None, width))
    # rows may be strided (qkv a column slice of a wider projection); elements within a row contiguous
    expect(qkv.stride(1) == 1, "qkv.stride(1)", "1 (each row contiguous; rows may be strided)", qkv.stride(1))
    device, tokens = qkv.device, qkv.shape[0]
    _index_vector(positions, "positions", tokens, device, (torch.int64,))
    _index_vector(slot_mapping, "slot_mapping", tokens, device, (torch.int64,))
    for name, weight in (("q_norm_weight", q_norm_weight), ("k_norm_weight", k_norm_weight)) + (
            (("idx_q_norm_weight", idx_q_norm_weight), ("idx_k_norm_weight", idx_k_norm_weight)) if niq else ()):
        expect(isinstance(weight, torch.Tensor), name, "a tensor", type(weight).__name__, TypeError)
        expect_dtype(weight, name, FLOAT_DTYPES)
        expect_shape(weight, name, (HEAD_DIM,))
        expect_device(weight, name, device)
        expect_contiguous(weight, name)
    expect_int(rotary_dim, "rotary_dim", 2)
    expect(rotary_dim % 2 == 0 and rotary_dim <= HEAD_DIM, "rotary_dim", f"even and <= {HEAD_DIM}", rotary_dim)
    expect(isinstance(cos_sin_cache, torch.Tensor), "cos_sin_cache", "a tensor", type(cos_sin_cache).__name__,
           TypeError)
    expect_dtype(cos_sin_cache, "cos_sin_cache", (torch.float32,))
    expect_shape(cos_sin_cache, "cos_sin_cache", (None, rotary_dim))
    expect_device(cos_sin_cache, "cos_sin_cache", device)
    expect_contiguous(cos_sin_cache, "cos_sin_cache")
    expect_positive(eps, "eps")
    expect(q_dtype in Q_DTYPES, "q_dtype", f"one of {Q_DTYPES}", q_dtype, TypeError)
    for name, records, heads in (("k_cache", k_records, nkv), ("v_cache", v_records, nkv),
                                 ("index_k_cache", i_records, 1)):
        if records is None:
            continue
        expect(records.shape[1] == heads, f"{name} heads", heads, records.shape[1])
        expect_device(records, name, device)
    pages = k_records.shape[0]
    expect(v_records.shape[0] == pages and (i_records is None or i_records.shape[0] == pages),
           "v_cache / index_k_cache pages", f"{pages} (as k_cache)",
           f"{v_records.shape[0]} / {None if i_records is None else i_records.shape[0]}")


def fused_qknorm_rope_write(qkv, positions, q_norm_weight, k_norm_weight, idx_q_norm_weight, idx_k_norm_weight,
                            cos_sin_cache, slot_mapping, k_cache, v_cache, index_k_cache=None, *, num_q_heads,
                            num_kv_heads, num_index_heads=0, rotary_dim=64, eps=1e-6,
                            scale_mode=DEFAULT_CACHE_SCALE_MODE, q_dtype=torch.bfloat16,
                            index_k_dtype=None, backend=None, check=True):
    """Gemma QK-norm + partial NeoX RoPE of q/k/idx_q/idx_k, MXFP4 write of K, V, index-K at ``slot_mapping``.

    qkv [T, (nq + 2 nkv + niq + (niq > 0)) * 128] bf16 (rows may be strided, each row contiguous); positions [T]
    i64; *_norm_weight [128] contiguous; cos_sin_cache [max_pos, rotary_dim] fp32 = [cos | sin];
    slot_mapping [T] i64 (-1: skip the token; other slots distinct);
    k_cache / v_cache [pages, nkv, 8704] u8; index_k_cache (None for dense layers, niq = 0): [pages, 1, 8704] u8 for
    ``index_k_dtype="mxfp4"`` (written with ``scale_mode``), [pages, 1, 16896] u8 for ``"fp8"`` (e4m3 + per-32 e8m0,
    atom_mxfp4.index_k; ``scale_mode`` does not apply). ``index_k_dtype=None``: the cache's own (a cache object's
    dtype, a records tensor's width); given, the cache must be of that dtype.
    Returns q [T, nq, 128] in q_dtype (bf16 or float8_e4m3fn, unit scale) and idx_q [T, niq, 128] bf16 (or None).
    """
    scale_mode = ScaleMode.parse(scale_mode)
    index_dtype = index_k_dtype_of(index_k_cache, index_k_dtype)
    k_records = as_records(k_cache, "k_cache")
    v_records = as_records(v_cache, "v_cache")
    i_records = None if index_k_cache is None else index_records(index_k_cache, index_dtype)
    if check:
        check_write_args(qkv, positions, q_norm_weight, k_norm_weight, idx_q_norm_weight, idx_k_norm_weight,
                         cos_sin_cache, slot_mapping, k_records, v_records, i_records, num_q_heads=num_q_heads,
                         num_kv_heads=num_kv_heads, num_index_heads=num_index_heads, rotary_dim=rotary_dim, eps=eps,
                         q_dtype=q_dtype)
    impl = resolve_backend(backend, qkv.device)
    return op_replay.run(
        ("write", num_q_heads, num_kv_heads, num_index_heads, rotary_dim, eps, scale_mode, q_dtype, index_dtype),
        impl.name, (qkv, positions, q_norm_weight, k_norm_weight, idx_q_norm_weight, idx_k_norm_weight,
                    cos_sin_cache, slot_mapping, k_records, v_records, i_records),
        lambda: impl.fused_qknorm_rope_write(
            qkv, positions, q_norm_weight, k_norm_weight, idx_q_norm_weight, idx_k_norm_weight, cos_sin_cache,
            slot_mapping, k_records, v_records, i_records, num_q_heads=num_q_heads, num_kv_heads=num_kv_heads,
            num_index_heads=num_index_heads, rotary_dim=rotary_dim, eps=eps, scale_mode=scale_mode,
            q_dtype=q_dtype, index_k_dtype=index_dtype))


# ----------------------------------------------------------------------------------------------------------------
def check_rows(block_table, row_request, row_position, rows: int, device, pages: int,
               block_tokens: int = PAGE_SIZE, pages_per_block: int = 1,
               names: tuple[str, str, str] = ("block_table", "row_request", "row_position")) -> None:
    """The rows' metadata, as index_topk / build_sparse_tables check it: block_table [B, W] i32 contiguous,
    row_request / row_position [rows] i32 in range, every page a row can see in [0, pages). Host syncs.
    ``names``: how the messages call the three (the layer names its metadata fields)."""
    _rows_attributes(block_table, row_request, row_position, rows, device, names)
    _rows_values(block_table, row_request, row_position, pages, block_tokens, pages_per_block, names)


def _rows_attributes(block_table, row_request, row_position, rows: int, device,
                     names: tuple[str, str, str] = ("block_table", "row_request", "row_position")) -> None:
    table_name, request_name, position_name = names
    if not (isinstance(block_table, _Tensor) and block_table.dtype == torch.int32 and block_table.dim() == 2
            and block_table.device == device and block_table.is_contiguous()
            and _vector_ok(row_request, rows, device) and _vector_ok(row_position, rows, device)):
        expect(isinstance(block_table, torch.Tensor), table_name, "a tensor", type(block_table).__name__, TypeError)
        expect_dtype(block_table, table_name, INDEX)
        expect_shape(block_table, table_name, (None, None))
        expect_device(block_table, table_name, device)
        expect_contiguous(block_table, table_name)
        _index_vector(row_request, request_name, rows, device)
        _index_vector(row_position, position_name, rows, device)


def _rows_values(block_table, row_request, row_position, pages: int, block_tokens: int = PAGE_SIZE,
                 pages_per_block: int = 1,
                 names: tuple[str, str, str] = ("block_table", "row_request", "row_position")) -> None:
    """check_rows' value checks (their attributes checked), once per batch."""
    table_name, request_name, position_name = names

    def values():
        _in_range(row_request, request_name, 0, block_table.shape[0])
        max_tokens = block_table.shape[1] // pages_per_block * block_tokens
        _in_range(row_position, position_name, 0, max_tokens)
        if row_request.shape[0]:
            # every page a row can see must be a real page
            needed = (row_position.long() // PAGE_SIZE + 1)
            used = torch.arange(block_table.shape[1], device=block_table.device) < needed[:, None]
            _in_range(block_table[row_request.long()][used], f"{table_name} (entries a row can see)", 0, pages)

    once("rows", (block_table, row_request, row_position), (pages, block_tokens, pages_per_block, names), values)


def index_topk(idx_q, index_k_cache, block_table, row_request, row_position, *, topk=16, init_blocks=0,
               local_blocks=1, index_k_dtype=None, tile_rows=None, backend=None, check=True):
    """Top-k KV blocks per query row and index head: topk_blocks [niq, R, topk] i32, ascending, -1 padded.

    idx_q [R, niq, 128]; index_k_cache [pages, 1, 8704] u8 (``index_k_dtype="mxfp4"``) or [pages, 1, 16896] u8
    (``"fp8"``: e4m3 + per-32 e8m0, atom_mxfp4.index_k; None: the cache's own dtype, as fused_qknorm_rope_write);
    block_table [B, max_blocks] i32 page ids;
    row_request [R] i32 (request of each row); row_position [R] i32 (the row's token position).
    ``score[h, r, b] = max_{p in b, p <= row_position[r]} idx_q[r, h] . idx_k[p]`` in fp32 (fp32 idx_q is never
    rounded; a NaN dot product counts as -inf); blocks ``b < init_blocks`` and the ``local_blocks`` blocks ending at
    the row's own block are forced: they rank above every score (init above local); keeps
    ``min(topk, own_block + 1)`` blocks, ties to the smaller id. topk <= MAX_TOPK, block table width <=
    MAX_INDEX_BLOCKS, idx_q contiguous with <= MAX_INDEX_HEADS heads.
    ``tile_rows`` (None, 16 or 32): for prefill-shaped rows (runs of one request's consecutive tokens), a scorer that
    decodes each index-K page once per tile of that many (row, head) lanes instead of once per row, where the backend
    has one (Triton, Hopper); the ids are the same (the layer passes it for prefill batches:
    ``LayerConfig.index_tile_rows``).
    """
    index_dtype = index_k_dtype_of(index_k_cache, index_k_dtype)
    records = index_records(index_k_cache, index_dtype)
    if check:
        attributes("index_topk", (topk, init_blocks, local_blocks, tile_rows),
                   (idx_q, records, block_table, row_request, row_position),
                   lambda: _index_attributes(idx_q, records, block_table, row_request, row_position, topk,
                                             init_blocks, local_blocks, tile_rows))
        _rows_values(block_table, row_request, row_position, records.shape[0])
    impl = resolve_backend(backend, idx_q.device)
    return op_replay.run(("index_topk", topk, init_blocks, local_blocks, index_dtype, tile_rows), impl.name,
                         (idx_q, records, block_table, row_request, row_position),
                         lambda: impl.index_topk(idx_q, records, block_table, row_request, row_position, topk=topk,
                                                 init_blocks=init_blocks, local_blocks=local_blocks,
                                                 index_k_dtype=index_dtype, tile_rows=tile_rows))


def _index_attributes(idx_q, records, block_table, row_request, row_position, topk, init_blocks, local_blocks,
                      tile_rows) -> None:
    if not (isinstance(idx_q, _Tensor) and idx_q.dtype in FLOAT_DTYPES and idx_q.dim() == 3
            and idx_q.shape[2] == HEAD_DIM and idx_q.shape[1] <= MAX_INDEX_HEADS and idx_q.is_contiguous()
            and records.shape[1] == 1 and records.device == idx_q.device
            and type(topk) is int and 1 <= topk <= MAX_TOPK and type(init_blocks) is int
            and init_blocks >= 0 and type(local_blocks) is int and local_blocks >= 0):
        expect(isinstance(idx_q, torch.Tensor), "idx_q", "a tensor", type(idx_q).__name__, TypeError)
        expect_dtype(idx_q, "idx_q", FLOAT_DTYPES)
        expect(idx_q.dim() == 3, "idx_q", "of shape [rows, index_heads, 128]", list(idx_q.shape))
        _head_dim(idx_q, "idx_q")
        expect(idx_q.shape[1] <= MAX_INDEX_HEADS, "idx_q.shape[1] (index heads)", f"<= {MAX_INDEX_HEADS}",
               idx_q.shape[1])
        expect_contiguous(idx_q, "idx_q")
        expect(records.shape[1] == 1, "index_k_cache heads", "1 (one shared index-K head)", records.shape[1])
        expect_device(records, "index_k_cache", idx_q.device)
        expect_int(topk, "topk", 1, MAX_TOPK)
        expect_int(init_blocks, "init_blocks", 0)
        expect_int(local_blocks, "local_blocks", 0)
    expect(tile_rows is None or (tile_rows in (16, 32) and type(tile_rows) is int), "tile_rows",
           "None, 16 or 32", repr(tile_rows))
    _rows_attributes(block_table, row_request, row_position, idx_q.shape[0], idx_q.device)
    expect(block_table.shape[1] <= MAX_INDEX_BLOCKS, "block_table.shape[1] (blocks per request)",
           f"<= {MAX_INDEX_BLOCKS} for index_topk", block_table.shape[1])


def _check_selection(topk_blocks: torch.Tensor, row_position: torch.Tensor, block_tokens: int) -> None:
    """Per (head, row): distinct ascending ids <= the row's own block, then -1 padding (host sync; check=True)."""
    if topk_blocks.numel() == 0:
        return
    ids = topk_blocks.long().transpose(0, 1)  # [R, nkv, topk]: the first bad entry is found row first
    own = row_position.long() // block_tokens
    chosen = ids != NO_BLOCK
    bad = chosen & (ids > own[:, None, None])  # past the row's own block: future tokens, another page
    follows = torch.zeros_like(bad)
    follows[..., 1:] = chosen[..., 1:] & (~chosen[..., :-1] | (ids[..., 1:] <= ids[..., :-1]))  # after -1 / not up
    bad |= follows
    if bool(bad.any()):
        r, h, k = (int(i) for i in bad.nonzero()[0])
        fail("topk_blocks", "distinct ascending block ids <= the row's own block, then -1 padding (what index_topk "
             "returns)", f"{ids[r, h].tolist()} at row {r}, head {h} (own block {int(own[r])}; first bad value "
             f"{int(ids[r, h, k])} at index {k})")


def _selection_attributes(topk_blocks, block_table, row_request, row_position, num_kv_heads,
                          pages_per_block) -> None:
    """build_sparse_tables' (and sparse attend's) inputs: the top-k ids and the rows' metadata (``_rows_attributes``);
    their values: ``_selection_values``."""
    if not (isinstance(topk_blocks, _Tensor) and topk_blocks.dtype == torch.int32 and topk_blocks.dim() == 3
            and topk_blocks.is_contiguous() and type(num_kv_heads) is int and topk_blocks.shape[0] == num_kv_heads
            and num_kv_heads >= 1 and topk_blocks.shape[2] <= MAX_TOPK and type(pages_per_block) is int
            and 1 <= pages_per_block <= MAX_PAGES_PER_BLOCK):
        expect(isinstance(topk_blocks, torch.Tensor), "topk_blocks", "a tensor", type(topk_blocks).__name__,
               TypeError)
        expect_dtype(topk_blocks, "topk_blocks", INDEX)
        expect(topk_blocks.dim() == 3, "topk_blocks", "of shape [kv_heads, rows, topk]", list(topk_blocks.shape))
        expect_contiguous(topk_blocks, "topk_blocks")
        nkv = expect_int(num_kv_heads, "num_kv_heads", 1)
        expect(topk_blocks.shape[0] == nkv, "topk_blocks.shape[0]", f"num_kv_heads = {nkv}", topk_blocks.shape[0])
        expect(topk_blocks.shape[2] <= MAX_TOPK, "topk_blocks.shape[2] (topk)", f"<= {MAX_TOPK}",
               topk_blocks.shape[2])
        expect_int(pages_per_block, "pages_per_block", 1, MAX_PAGES_PER_BLOCK)
    _rows_attributes(block_table, row_request, row_position, topk_blocks.shape[1], topk_blocks.device)


def _selection_values(topk_blocks, block_table, row_request, row_position, nkv: int, ppb: int,
                      pages: int | None) -> None:
    """The top-k ids and the rows' metadata's values (their attributes checked), once per batch; host syncs.
    ``pages``: the page ids a row may see are below it (attend: the cache's pages); None: the folded ids
    ``page * nkv + h`` fit int32."""
    _rows_values(block_table, row_request, row_position, (2**31 - 1) // nkv if pages is None else pages,
                 PAGE_SIZE * ppb, ppb)
    blocks_per_row = block_table.shape[1] // ppb

    def values():
        _in_range(topk_blocks, "topk_blocks", NO_BLOCK, max(blocks_per_row, 0))
        _check_selection(topk_blocks, row_position, PAGE_SIZE * ppb)

    once("selection", (topk_blocks, row_position), (blocks_per_row, ppb), values)


# ----------------------------------------------------------------------------------------------------------------
def build_sparse_tables(topk_blocks, block_table, row_request, row_position, *, num_kv_heads, pages_per_block=1,
                        backend=None, check=True):
    """One-block-per-page tables for pa_decode from each row's top-k blocks.

    topk_blocks [nkv, R, topk] i32 -> tables [R * nkv, topk * ppb] i32 (folded page ids ``page * nkv + h``; full
    blocks first, the own partial block last; unused entries 0) and context_lens [R * nkv] i32.
    Each (head, row) of topk_blocks must hold distinct block ids in ascending order, none past the row's own block
    (``row_position // (128 * ppb)``), then -1 padding: what index_topk returns. Checked with check=True; anything
    else under check=False is undefined (e.g. another request's page or future tokens become attendable).
    topk <= MAX_TOPK, pages_per_block <= MAX_PAGES_PER_BLOCK.
    """
    if check:
        attributes("build_sparse_tables", (num_kv_heads, pages_per_block),
                   (topk_blocks, block_table, row_request, row_position),
                   lambda: _selection_attributes(topk_blocks, block_table, row_request, row_position, num_kv_heads,
                                                 pages_per_block))
        _selection_values(topk_blocks, block_table, row_request, row_position, num_kv_heads, pages_per_block, None)
    impl = resolve_backend(backend, topk_blocks.device)
    # not through op_replay: one launch behind a short host path, which a replay's key and allocations did not beat
    # (the H100 host measured it 1.4x slower with replay in one run of two, the CPU slower too; docs/api.md)
    return impl.build_sparse_tables(topk_blocks, block_table, row_request, row_position,
                                    num_kv_heads=num_kv_heads, pages_per_block=pages_per_block)


def _query_scale_values(query_scale) -> None:
    """A query_scale tensor's values (its attributes checked): finite and >= 0, once per tensor (a host sync)."""
    if not isinstance(query_scale, torch.Tensor):
        return

    def values():
        bad = ~(torch.isfinite(query_scale) & (query_scale >= 0))
        if query_scale.numel() and bool(bad.any()):
            first = int(bad.nonzero()[0, 0])
            fail("query_scale", "finite values >= 0", f"{float(query_scale[first])} at row {first}")

    once("query_scale", (query_scale,), (), values)


def _attention_attributes(out, q, k_records, v_records, softmax_scale, query_scale) -> None:
    """pa_decode's (and attend's) arguments other than the tables: q / out / the caches / the scales (a query_scale
    tensor's values: ``_query_scale_values``)."""
    if (isinstance(q, _Tensor) and isinstance(out, _Tensor) and q.dim() == 3 and q.shape[2] == HEAD_DIM
            and q.dtype in Q_DTYPES and 1 <= q.shape[1] <= MAX_GROUP and out.dtype == torch.bfloat16
            and out.shape == q.shape and out.device == q.device and out.is_contiguous() and q.is_contiguous()
            and k_records.device == q.device and v_records.device == q.device and k_records.shape == v_records.shape
            and type(softmax_scale) in _NUMBER and math.isfinite(softmax_scale) and softmax_scale > 0
            and (query_scale is None or (type(query_scale) in _NUMBER and math.isfinite(query_scale)
                                         and query_scale >= 0))):
        return  # a query_scale tensor takes the named path: its values are checked once (below)
    for name, tensor in (("q", q), ("out", out)):
        expect(isinstance(tensor, torch.Tensor), name, "a tensor", type(tensor).__name__, TypeError)
    expect(q.dim() == 3, "q", "of shape [rows, group, 128] (one query token per row: query_length must be 1)",
           list(q.shape))
    _head_dim(q, "q")
    expect_dtype(q, "q", Q_DTYPES)
    rows, group, _ = q.shape
    expect(1 <= group <= MAX_GROUP, "q.shape[1] (GQA group)", f"in [1, {MAX_GROUP}]", group)
    device = q.device
    expect_dtype(out, "out", (torch.bfloat16,))
    expect_shape(out, "out", tuple(q.shape))
    expect_device(out, "out", device)
    expect_contiguous(out, "out")
    expect_contiguous(q, "q")
    for name, records in (("k_cache", k_records), ("v_cache", v_records)):
        expect_device(records, name, device)
    expect(k_records.shape == v_records.shape, "v_cache.shape", f"{list(k_records.shape)} (as k_cache)",
           list(v_records.shape))
    expect_positive(softmax_scale, "softmax_scale")
    # query_scale: None (1), a finite number >= 0 (0: uniform attention), or fp32 [rows] of such numbers
    if isinstance(query_scale, torch.Tensor):
        expect_dtype(query_scale, "query_scale", (torch.float32,))
        expect_shape(query_scale, "query_scale", (rows,))
        expect_device(query_scale, "query_scale", device)
        expect_contiguous(query_scale, "query_scale")
    else:
        expect(query_scale is None or is_number(query_scale), "query_scale",
               "None, a float or a float32 tensor [rows]", type(query_scale).__name__, TypeError)
        expect(query_scale is None or (math.isfinite(query_scale) and query_scale >= 0), "query_scale",
               "a finite number >= 0 (0: uniform attention)", query_scale)


# ----------------------------------------------------------------------------------------------------------------
def pa_decode(out, q, k_cache, v_cache, tables, context_lens, *, softmax_scale, query_scale=None, plan=None,
              backend=None, check=True):
    """Paged attention, one query token per row, over MXFP4 K/V; writes and returns ``out``.

    plan: None (the backend plans this call itself) or a ``DecodePlan`` from ``plan_pa_decode`` of the same backend
    that covers the call (atom_mxfp4.plan: rows <= plan.num_rows, tables.shape[1] <= plan.max_table_width, the same
    group and device); it is checked even with check=False (host-side, no sync) and gives the output of None.

    out [R, G, 128] bf16; q [R, G, 128] bf16 | float8_e4m3fn (G <= 16 query heads sharing the row's KV head);
    k_cache / v_cache [pages, kv_heads, 8704] u8 (addressed folded: id = page * kv_heads + head);
    tables [R, W] i32 folded page ids; context_lens [R] i32: token t < context_lens[r] is at page
    tables[r, t // 128], offset t % 128; bytes of other tokens may be garbage and never reach ``out``;
    context_lens[r] == 0 writes zeros. ``logits = (q . k) * softmax_scale * query_scale[r]``, softmax in fp32.
    query_scale: None (1), a finite number >= 0 or fp32 [R] of such (0 gives uniform attention). Non-finite logits
    (from non-finite or huge q): NaN or +inf at an attended token -> that head's row is NaN; -inf -> weight 0;
    all -inf -> NaN (docs/api.md).
    """
    k_records = as_records(k_cache, "k_cache")
    v_records = as_records(v_cache, "v_cache")
    if check:
        scale_tensor = isinstance(query_scale, torch.Tensor)
        attributes("pa_decode", (softmax_scale, None if scale_tensor else query_scale),
                   (out, q, k_records, v_records, tables, context_lens, query_scale if scale_tensor else None),
                   lambda: _pa_decode_attributes(out, q, k_records, v_records, tables, context_lens, softmax_scale,
                                                 query_scale))
        rows, width, pages = q.shape[0], tables.shape[1], k_records.shape[0] * k_records.shape[1]

        def values():
            _in_range(context_lens, "context_lens", 0, width * PAGE_SIZE + 1)
            if rows and width:
                used = torch.arange(width, device=tables.device) * PAGE_SIZE < context_lens[:, None]
                _in_range(tables[used], "tables (entries below context_lens)", 0, pages)

        once("tables", (tables, context_lens), (pages,), values)
        _query_scale_values(query_scale)
    impl = resolve_backend(backend, q.device)
    if plan is not None:  # whatever check says: a plan too small for the call would be written past its workspace
        check_plan(plan, backend=impl.name, rows=q.shape[0], width=tables.shape[1], group=q.shape[1], device=q.device)
    _pa_decode(impl, out, q, k_records, v_records, tables, context_lens, float(softmax_scale), query_scale, plan)
    return out


def _pa_decode_attributes(out, q, k_records, v_records, tables, context_lens, softmax_scale, query_scale) -> None:
    for name, tensor in (("tables", tables), ("context_lens", context_lens)):
        expect(isinstance(tensor, torch.Tensor), name, "a tensor", type(tensor).__name__, TypeError)
    _attention_attributes(out, q, k_records, v_records, softmax_scale, query_scale)
    rows, device = q.shape[0], q.device
    if not (tables.dtype == torch.int32 and tables.dim() == 2 and tables.shape[0] == rows
            and tables.device == device and tables.is_contiguous() and _vector_ok(context_lens, rows, device)):
        expect_dtype(tables, "tables", INDEX)
        expect_shape(tables, "tables", (rows, None))
        expect_device(tables, "tables", device)
        expect_contiguous(tables, "tables")
        _index_vector(context_lens, "context_lens", rows, device)


def _pa_decode(impl, out, q, k_records, v_records, tables, context_lens, softmax_scale: float, query_scale, plan):
    """The backend's pa_decode, or a replay of its launches (atom_mxfp4.op_replay), checks done."""
    scale_tensor = isinstance(query_scale, torch.Tensor)
    op_replay.run(("pa_decode", softmax_scale, None if scale_tensor else query_scale), impl.name,
                  (out, q, k_records, v_records, tables, context_lens, query_scale if scale_tensor else None),
                  lambda: impl.pa_decode(out, q, k_records, v_records, tables, context_lens,
                                         softmax_scale=softmax_scale, query_scale=query_scale, plan=plan), plan)


# ----------------------------------------------------------------------------------------------------------------
DENSE_TABLES_KEPT = 4  # dense_tables: the newest results kept (one per batch's metadata; the dense layers share it)
_dense_kept: list = []  # [(key, the inputs (weak refs), (tables, context_lens), their versions)], newest last


def dense_tables(block_table, row_request, row_position, *, num_kv_heads):
    """The tables of a dense layer: row ``t * nkv + h`` sees its request's whole block-table row, folded
    (``page * nkv + h``), and ``row_position[t] + 1`` tokens -> (tables [T * nkv, W] i32, context_lens [T * nkv] i32).
    torch ops on any device, in int32 (folded ids fit: ``attend`` checks pages x nkv < 2**31), no check: two kernels
    for one KV head (the gather and the lengths), six for more (the layer's dense path on the composing backends).

    Made once per batch: for the same three tensors, unchanged since (the same objects, versions, addresses and
    shapes: what ``atom_mxfp4.checked`` calls unchanged) and ``num_kv_heads``, the tables made last are returned again
    (every dense layer of a step shares them; the step then runs no torch work and can replay: atom_mxfp4.replay).
    Made anew under CUDA-graph capture (the graph then makes them at each replay). As for the checks, a write torch
    does not see (a custom kernel, a graph replay refilling the metadata) is not seen here: pass new tensors or bump
    their versions (any in-place torch op) after one."""
    inputs = (block_table, row_request, row_position)
    key = (num_kv_heads, *[(id(t), t._version, t.data_ptr(), t.shape) for t in inputs])
    capturing = block_table.is_cuda and torch.cuda.is_current_stream_capturing()
    if not capturing:
        for kept_key, refs, result, versions in reversed(_dense_kept):
            if (kept_key == key and all(ref() is t for ref, t in zip(refs, inputs))
                    and versions == (result[0]._version, result[1]._version)):
                return result  # (a caller's in-place write into the returned tables makes new ones)
    rows = row_request.shape[0] * num_kv_heads
    result = fill_dense_tables(block_table, row_request, row_position,
                               torch.empty(rows, block_table.shape[1], dtype=torch.int32, device=block_table.device),
                               torch.empty(rows, dtype=torch.int32, device=block_table.device),
                               num_kv_heads=num_kv_heads)
    if not capturing:
        derived(*result)  # made from the metadata's values: a step trace reading them does not outlive a refill
        _dense_kept.append((key, [weakref.ref(t) for t in inputs], result, (result[0]._version, result[1]._version)))
        del _dense_kept[:max(0, len(_dense_kept) - DENSE_TABLES_KEPT)]
    return result


def fill_dense_tables(block_table, row_request, row_position, tables, context_lens, *, num_kv_heads):
    """``dense_tables``' values written into ``tables`` [T * nkv, W] i32 and ``context_lens`` [T * nkv] i32 (in
    place; returns the two): the gather and the lengths for one KV head, the fold for more. No check. What
    ``dense_tables`` makes new tensors for, and ``AttentionMetadata.dense_tables`` its own buffers."""
    request, lens = row_request.to(torch.int32), row_position.to(torch.int32)
    if num_kv_heads == 1:
        torch.index_select(block_table, 0, request, out=tables)
        torch.add(lens, 1, out=context_lens)
    else:
        tokens, width = request.shape[0], block_table.shape[1]
        heads = torch.arange(num_kv_heads, dtype=torch.int32, device=block_table.device)
        tables.view(tokens, num_kv_heads, width).copy_(
            block_table.index_select(0, request)[:, None, :] * num_kv_heads + heads[None, :, None])
        context_lens.view(tokens, num_kv_heads).copy_((lens + 1)[:, None])
    return tables, context_lens


def attend(out, q, k_cache, v_cache, block_table, row_request, row_position, *, num_kv_heads, topk_blocks=None,
           pages_per_block=1, softmax_scale, query_scale=None, plan=None, backend=None, check=True):
    """A layer's attention over the pages its rows' requests own, one query token per row; writes and returns out.

    The same output, bit for bit, as ``pa_decode`` over the tables of
    - ``dense_tables(block_table, row_request, row_position)`` when ``topk_blocks`` is None (dense layers: each row
      sees its request's tokens 0 .. row_position), or
    - ``build_sparse_tables(topk_blocks, block_table, row_request, row_position, pages_per_block=...)`` (sparse
      layers: the row's top-k blocks, what index_topk returns),
    and the same arguments otherwise: q / out [T * nkv, G, 128] (row ``t * nkv + h``: token t, KV head h), the caches
    [pages, nkv, 8704], softmax_scale, query_scale, plan (it covers T * nkv rows and tables as wide as the block table
    (dense) or ``topk * pages_per_block`` (sparse)). A backend that ships ``attend`` (Hopper) reads the block table
    and the top-k ids inside its decode launch, so no table is made; the others run the composition (two launches,
    or torch ops and one launch). Checks (check=True) are those of the composition: build_sparse_tables' on the
    selection, pa_decode's on the rest, and every page a row can see inside the cache.
    """
    k_records = as_records(k_cache, "k_cache")
    v_records = as_records(v_cache, "v_cache")
    sparse, scale_tensor = topk_blocks is not None, isinstance(query_scale, torch.Tensor)
    if check:
        attributes("attend", (num_kv_heads, pages_per_block, softmax_scale, None if scale_tensor else query_scale),
                   (out, q, k_records, v_records, block_table, row_request, row_position, topk_blocks,
                    query_scale if scale_tensor else None),
                   lambda: _attend_attributes(out, q, k_records, v_records, block_table, row_request, row_position,
                                              num_kv_heads, topk_blocks, pages_per_block, softmax_scale, query_scale))
        if sparse:  # the cache's pages bound the ids (pages x nkv < 2**31 was checked)
            _selection_values(topk_blocks, block_table, row_request, row_position, num_kv_heads, pages_per_block,
                              k_records.shape[0])
        else:
            _rows_values(block_table, row_request, row_position, k_records.shape[0])
        _query_scale_values(query_scale)
    impl = resolve_backend(backend, q.device)
    width = topk_blocks.shape[2] * pages_per_block if sparse else block_table.shape[1]
    if plan is not None:  # whatever check says: a plan too small for the call would be written past its workspace
        check_plan(plan, backend=impl.name, rows=q.shape[0], width=width, group=q.shape[1], device=q.device)
    softmax_scale = float(softmax_scale)

    def run():
        fused = getattr(impl, "attend", None)
        if fused is not None and fused(out, q, k_records, v_records, block_table, row_request, row_position,
                                       num_kv_heads=num_kv_heads, topk_blocks=topk_blocks,
                                       pages_per_block=pages_per_block, softmax_scale=softmax_scale,
                                       query_scale=query_scale, plan=plan) is not None:
            return  # ran as one launch (a backend declines, returning None, where its composition is faster)
        if sparse:
            tables, lens = impl.build_sparse_tables(topk_blocks, block_table, row_request, row_position,
                                                    num_kv_heads=num_kv_heads, pages_per_block=pages_per_block)
        else:
            tables, lens = dense_tables(block_table, row_request, row_position, num_kv_heads=num_kv_heads)
        impl.pa_decode(out, q, k_records, v_records, tables, lens, softmax_scale=softmax_scale,
                       query_scale=query_scale, plan=plan)

    if not sparse and not hasattr(impl, "attend"):
        # the batch's tables (torch work, or the ones kept: dense_tables), then pa_decode over them, which replays as
        # that op does (the tables are its arguments: a replay reads this batch's)
        tables, lens = dense_tables(block_table, row_request, row_position, num_kv_heads=num_kv_heads)
        _pa_decode(impl, out, q, k_records, v_records, tables, lens, softmax_scale, query_scale, plan)
        return out
    op_replay.run(("attend", num_kv_heads, pages_per_block, softmax_scale, None if scale_tensor else query_scale),
                  impl.name, (out, q, k_records, v_records, block_table, row_request, row_position, topk_blocks,
                              query_scale if scale_tensor else None), run, plan)
    return out


def _attend_attributes(out, q, k_records, v_records, block_table, row_request, row_position, num_kv_heads,
                       topk_blocks, pages_per_block, softmax_scale, query_scale) -> None:
    _attention_attributes(out, q, k_records, v_records, softmax_scale, query_scale)
    nkv = expect_int(num_kv_heads, "num_kv_heads", 1)
    expect(k_records.shape[1] == nkv, "k_cache.shape[1] (kv heads)", f"num_kv_heads = {nkv}", k_records.shape[1])
    expect(k_records.shape[0] * nkv <= 2**31 - 1, "k_cache pages * num_kv_heads", "< 2**31 (int32 page ids)",
           k_records.shape[0] * nkv)
    expect(isinstance(row_request, torch.Tensor), "row_request", "a tensor", type(row_request).__name__, TypeError)
    tokens = row_request.shape[0] if row_request.dim() == 1 else -1
    expect(q.shape[0] == tokens * nkv, "q.shape[0]", f"len(row_request) x num_kv_heads = {tokens} x {nkv}",
           q.shape[0])
    if topk_blocks is not None:
        expect(isinstance(topk_blocks, torch.Tensor), "topk_blocks", "a tensor", type(topk_blocks).__name__,
               TypeError)
        expect_device(topk_blocks, "topk_blocks", q.device)  # the rows' metadata is checked on its device
        _selection_attributes(topk_blocks, block_table, row_request, row_position, nkv, pages_per_block)
    else:
        expect(pages_per_block == 1, "pages_per_block", "1 on a dense layer (topk_blocks None)", pages_per_block)
        _rows_attributes(block_table, row_request, row_position, tokens, q.device)


def plan_pa_decode(num_rows: int, max_table_width: int, group: int, device, backend=None) -> DecodePlan:
    """The plan of pa_decode calls with <= num_rows rows, tables <= max_table_width wide, GQA group ``group`` on
    ``device`` (atom_mxfp4.plan): made once per batch, its workspace (graph-stable buffers) serves every layer and
    every CUDA-graph replay. ``backend``: as pa_decode's (the plan belongs to the backend resolved here)."""
    expect_int(num_rows, "num_rows", 0)
    expect_int(max_table_width, "max_table_width", 1)
    expect_int(group, "group", 1, MAX_GROUP)
    impl = resolve_backend(backend, device)
    return impl.make_plan(num_rows, max_table_width, group, plan_device(device))
