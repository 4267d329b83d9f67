"""SparseMXFP4Attention: the MiniMax-M3 attention of one layer over MXFP4 paged caches.

Per step and layer (DESIGN §1): fused QK-norm + RoPE + MXFP4 cache write, then (sparse layers) index top-k, then
``ops.attend``: pa_decode with one query token per row over the sparse tables of the top-k blocks (sparse layers) or
the request's whole block table (dense layers), for prefill and decode alike; one launch on the Hopper backend,
which reads the block table and the top-k ids itself, the composition of build_sparse_tables / dense_tables and
pa_decode elsewhere. Batches may mix prefill (with or without a cached prefix, chunked) and
decode requests: every new token is one row. Metadata is an explicit dataclass, never a global.
"""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass, field

import torch

from . import launch, ops, prefill
from .backends import resolve_backend
from .cache import FP8IndexKCache, MXFP4PageCache, allocate_index_k, as_records, index_records
from .checked import once
from .errors import expect, expect_aligned, expect_int, expect_positive, fail
from .format import DEFAULT_CACHE_SCALE_MODE, ScaleMode
from .index_k import DEFAULT_INDEX_K_DTYPE, IndexKDtype
from .layout import HEAD_DIM, MAX_GROUP, MAX_INDEX_BLOCKS, MAX_INDEX_HEADS, MAX_TOPK, PAGE_SIZE, qkv_width
from .plan import DecodePlan, plan_device
from .replay import (REPLAYABLE_BACKENDS, Guard, Trace, capturing, current_stream, layout, meta_state, prove, proven,
                     retain, signature)
from .rope import rope_cos_sin

MAX_POSITION = 2**31 - 1  # positions go to the top-k ops as int32
_KINDS: dict = {}  # (LayerConfig, backend) -> a small int: the key of a kind of layer's traced steps


@dataclass(frozen=True)
class LayerConfig:
    """Geometry of one attention layer on one tensor-parallel rank (defaults: MiniMax-M3 at TP4)."""

    num_q_heads: int = 16
    num_kv_heads: int = 1
    num_index_heads: int = 1  # per rank; equals num_kv_heads on sparse layers, unused on dense ones
    head_dim: int = HEAD_DIM
    page_size: int = PAGE_SIZE
    rotary_dim: int = 64
    rope_theta: float = 5e6
    eps: float = 1e-6
    sparse: bool = True
    topk: int = 16
    init_blocks: int = 0
    local_blocks: int = 1
    max_position: int = 1 << 17
    scale_mode: ScaleMode = ScaleMode(DEFAULT_CACHE_SCALE_MODE)  # chosen by docs/accuracy.md
    q_dtype: torch.dtype = torch.bfloat16
    index_k_dtype: IndexKDtype = IndexKDtype(DEFAULT_INDEX_K_DTYPE)  # "mxfp4" | "fp8" (atom_mxfp4.index_k)
    softmax_scale: float = field(default=1.0 / math.sqrt(HEAD_DIM))
    # dense layers: prefill segments of at least this many new tokens run as flash attention over the dequantized
    # prefix (atom_mxfp4.prefill; needs AttentionMetadata.segments and a bf16 q); 0: every row by the decode kernel
    flash_prefill_rows: int = 0
    # sparse layers: prefill batches (a segment of at least this many rows) score the index with the tiled scorer
    # (ops.index_topk tile_rows: each index-K page decoded once per tile of 32 (row, head) lanes, not once per row;
    # the same ids); 0: the row scorer always
    index_tile_rows: int = 32

    def __post_init__(self):
        """Every field is checked here, naming it, so a bad config fails at construction, not deep in a kernel."""
        expect(self.head_dim == HEAD_DIM and not isinstance(self.head_dim, bool), "head_dim",
               f"{HEAD_DIM} (the only head_dim of the MXFP4 kernels)", repr(self.head_dim))
        expect(self.page_size == PAGE_SIZE and not isinstance(self.page_size, bool), "page_size",
               f"{PAGE_SIZE} (= the sparse block size)", repr(self.page_size))
        expect_int(self.num_q_heads, "num_q_heads", 1)
        expect_int(self.num_kv_heads, "num_kv_heads", 1)
        expect_int(self.num_index_heads, "num_index_heads", 0)
        expect(self.num_q_heads % self.num_kv_heads == 0, "num_q_heads / num_kv_heads", "a whole GQA group",
               f"{self.num_q_heads} / {self.num_kv_heads}")
        group = self.num_q_heads // self.num_kv_heads
        expect(group <= MAX_GROUP, "GQA group (num_q_heads / num_kv_heads)", f"<= {MAX_GROUP}", group)
        expect(isinstance(self.sparse, bool), "sparse", "a bool", repr(self.sparse), TypeError)
        if self.sparse:
            expect(self.num_index_heads == self.num_kv_heads, "num_index_heads",
                   f"num_kv_heads = {self.num_kv_heads} on a sparse layer", self.num_index_heads)
            expect(self.num_index_heads <= MAX_INDEX_HEADS, "num_index_heads",
                   f"<= {MAX_INDEX_HEADS} on a sparse layer", self.num_index_heads)
        expect_int(self.rotary_dim, "rotary_dim", 2, HEAD_DIM)
        expect(self.rotary_dim % 2 == 0, "rotary_dim", f"even, in [2, {HEAD_DIM}]", self.rotary_dim)
        expect_int(self.topk, "topk", 1, MAX_TOPK)
        expect_int(self.init_blocks, "init_blocks", 0)
        expect_int(self.local_blocks, "local_blocks", 0)
        expect_int(self.max_position, "max_position", 1, MAX_POSITION)
        expect_int(self.flash_prefill_rows, "flash_prefill_rows", 0)
        expect(self.index_tile_rows in (0, 16, 32) and type(self.index_tile_rows) is int, "index_tile_rows",
               "0 (off), 16 or 32", repr(self.index_tile_rows))
        object.__setattr__(self, "rope_theta", expect_positive(self.rope_theta, "rope_theta"))
        object.__setattr__(self, "eps", expect_positive(self.eps, "eps"))
        object.__setattr__(self, "softmax_scale", expect_positive(self.softmax_scale, "softmax_scale"))
        expect(self.q_dtype in ops.Q_DTYPES, "q_dtype", f"one of {ops.Q_DTYPES}", self.q_dtype, TypeError)
        object.__setattr__(self, "scale_mode", ScaleMode.parse(self.scale_mode))
        object.__setattr__(self, "index_k_dtype", IndexKDtype.parse(self.index_k_dtype, "index_k_dtype"))

    @property
    def group(self) -> int:
        return self.num_q_heads // self.num_kv_heads

    @property
    def index_heads(self) -> int:
        """Index query heads in the fused projection (0 on dense layers)."""
        return self.num_index_heads if self.sparse else 0

    @functools.cached_property
    def qkv_width(self) -> int:  # asked by every forward: computed once (the config is frozen)
        return qkv_width(self.num_q_heads, self.num_kv_heads, self.index_heads)

    def pa_decode_shape(self, meta: "AttentionMetadata") -> tuple[int, int]:
        """(rows, table width) a layer of this geometry may hand pa_decode for ``meta``'s batch: rows = tokens x kv
        heads; width = the widest of a dense layer's tables (the block table's width) and a sparse layer's (topk, one
        page per block), so one plan serves both kinds of layer."""
        return meta.num_tokens * self.num_kv_heads, max(meta.block_table.shape[1], self.topk)


@dataclass
class AttentionMetadata:
    """What one forward step needs; built once per batch, shared by every layer.

    positions [T] i64: each new token's position in its request; slot_mapping [T] i64: its cache slot
    (``page * 128 + offset``, -1 = do not write); token_request [T] i32: its row of ``block_table``;
    block_table [B, max_pages] i32: each request's page ids (position p lives in page ``block_table[b, p // 128]``).
    plans: the batch's pa_decode plans (``pa_decode_plan``), made once and reused by every layer; a runner that
    refills these tensors in place for the next batch (CUDA-graph buffers) keeps them: a plan depends on shapes only.
    segments: the rows as runs of consecutive new tokens of one request (``prefill.Segment``, host ints, in row
    order; ``for_requests`` and the SGLang backend make them): what lets a dense layer run a long run as flash
    attention (``LayerConfig.flash_prefill_rows``); empty: every row by the decode kernel. check=True compares them
    with positions / token_request once per batch.
    """

    positions: torch.Tensor
    slot_mapping: torch.Tensor
    token_request: torch.Tensor
    block_table: torch.Tensor
    plans: dict = field(default_factory=dict, repr=False, compare=False)
    segments: tuple = field(default=(), repr=False, compare=False)
    _longest: tuple = field(default=((), 0), init=False, repr=False, compare=False)
    _rows: tuple = field(default=(None, None), init=False, repr=False, compare=False)
    _dense: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    # the layers' traced steps of this batch (atom_mxfp4.replay), per kind of layer; made and read by forward
    steps: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def row_position(self) -> torch.Tensor:
        """``positions`` as int32 [T] (what the top-k and attention ops read): converted once per batch, not once per
        layer, into one buffer (graph-stable). Converted again whenever ``positions`` changed since (a new tensor, or
        an in-place refill: torch's version counter) and under CUDA-graph capture (so a captured graph converts the
        positions it is replayed with)."""
        positions = self.positions
        state, rows = self._rows
        now = (id(positions), positions._version, positions.data_ptr(), positions.shape)
        if state != now or (positions.is_cuda and torch.cuda.is_current_stream_capturing()):
            if rows is None or rows.shape != positions.shape or rows.device != positions.device:
                rows = torch.empty(positions.shape, dtype=torch.int32, device=positions.device)
            rows.copy_(positions)
            self._rows = (now, rows)
        return rows

    def dense_tables(self, num_kv_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The dense layers' pa_decode tables of this batch (``ops.dense_tables``' values: each row's request's whole
        block-table row, folded, and ``row_position + 1`` tokens), in buffers of the metadata: made once per batch
        and made again, into the same buffers while the shapes hold, whenever ``block_table``, ``token_request`` or
        ``positions`` changed (new tensors or an in-place refill), and under CUDA-graph capture (as
        ``row_position``). What a composing backend's dense layers read; a replayed step reads them at the same
        addresses after a refill (``SparseMXFP4Attention._refresh``)."""
        rows, table, request = self.row_position, self.block_table, self.token_request
        now = tuple([(id(t), t._version, t.data_ptr(), t.shape) for t in (table, request, self.positions)])
        state, made = self._dense.get(num_kv_heads, (None, None))
        if state == now and not (table.is_cuda and torch.cuda.is_current_stream_capturing()):
            return made
        pages_shape = (request.shape[0] * num_kv_heads, table.shape[1])
        if made is None or made[0].shape != pages_shape or made[0].device != table.device:
            made = (torch.empty(pages_shape, dtype=torch.int32, device=table.device),
                    torch.empty(pages_shape[0], dtype=torch.int32, device=table.device))
        ops.fill_dense_tables(table, request, rows, *made, num_kv_heads=num_kv_heads)
        self._dense[num_kv_heads] = (now, made)
        return made

    def pa_decode_plan(self, config: LayerConfig, device, backend: str | None = None) -> DecodePlan:
        """The pa_decode plan of this batch for layers of ``config``'s geometry on ``device`` (atom_mxfp4.plan).

        Made on first use (``ops.plan_pa_decode``: by the runner beside the metadata, or by the first layer) and kept
        per (backend, group, device); every later layer gets the same plan. A call the kept plan does not cover (more
        tokens or a wider block table than it was made for) replaces it by one covering both. Never allocates when the
        plan exists: build it before CUDA-graph capture."""
        rows, width = config.pa_decode_shape(self)
        plan = self.plans.get((backend, config.group, device))  # every layer after the first: this lookup
        if plan is not None and plan.num_rows >= rows and plan.max_table_width >= width:
            return plan
        device = plan_device(device)
        name = resolve_backend(backend, device).name
        key = (name, config.group, device)
        plan = self.plans.get(key)
        if plan is None or not plan.covers(backend=name, rows=rows, width=width, group=config.group, device=device):
            if plan is not None:
                rows, width = max(rows, plan.num_rows), max(width, plan.max_table_width)
            plan = self.plans[key] = ops.plan_pa_decode(rows, width, config.group, device, backend=name)
        self.plans[(backend, config.group, device)] = plan
        return plan

    @classmethod
    def for_requests(cls, block_table: torch.Tensor, prefix_lens: list[int], new_lens: list[int]):
        """Rows for ``new_lens[b]`` new tokens after ``prefix_lens[b]`` cached ones (decode: new_len 1).

        block_table [B, max_pages] i32; lengths are ints >= 0 with ``prefix_lens[b] + new_lens[b] <= 128 *
        max_pages`` and the pages of the new tokens >= 0 (one host sync). Each is checked here, naming it.
        """
        expect(isinstance(block_table, torch.Tensor), "block_table", "a tensor", type(block_table).__name__,
               TypeError)
        expect(block_table.dtype == torch.int32, "block_table", "of dtype torch.int32", block_table.dtype, TypeError)
        expect(block_table.dim() == 2, "block_table", "of shape [requests, max_pages]", list(block_table.shape))
        prefix_lens, new_lens = list(prefix_lens), list(new_lens)
        expect(len(prefix_lens) == len(new_lens) == block_table.shape[0], "prefix_lens / new_lens",
               f"{block_table.shape[0]} entries (block_table rows)", f"{len(prefix_lens)} / {len(new_lens)}")
        capacity = block_table.shape[1] * PAGE_SIZE
        for b, (p, n) in enumerate(zip(prefix_lens, new_lens)):
            expect_int(p, f"prefix_lens[{b}]", 0)
            expect_int(n, f"new_lens[{b}]", 0)
            expect(p + n <= capacity, f"prefix_lens[{b}] + new_lens[{b}]",
                   f"<= {capacity} (the tokens block_table's {block_table.shape[1]} pages hold)", p + n)
        device = block_table.device
        positions = torch.cat([torch.arange(p, p + n, dtype=torch.int64) for p, n in zip(prefix_lens, new_lens)]
                              + [torch.empty(0, dtype=torch.int64)])
        request = torch.cat([torch.full((n,), b, dtype=torch.int32) for b, n in enumerate(new_lens)]
                            + [torch.empty(0, dtype=torch.int32)])
        positions, request = positions.to(device), request.to(device)
        pages = block_table.long()[request.long(), positions // PAGE_SIZE]
        if pages.numel():
            bad = int(pages.argmin())
            expect(int(pages[bad]) >= 0, "block_table", "page ids >= 0 for every new token",
                   f"{int(pages[bad])} for request {int(request[bad])}, position {int(positions[bad])}")
        slots = pages * PAGE_SIZE + positions % PAGE_SIZE
        return cls(positions, slots, request, block_table, segments=prefill.segments_for(prefix_lens, new_lens))

    @property
    def longest_segment(self) -> int:
        """The most rows of one run in ``segments`` (0: none), counted once per segments object (every layer asks)."""
        segments, longest = self._longest
        if segments is not self.segments:
            self._longest = (self.segments, prefill.longest(self.segments))
            longest = self._longest[1]
        return longest

    @property
    def num_tokens(self) -> int:
        return self.positions.shape[0]


@dataclass
class LayerCaches:
    """The caches of one layer: MXFP4 K and V ``[pages, nkv, 8704]``; on sparse layers the index-K of
    ``config.index_k_dtype``: MXFP4 ``[pages, 1, 8704]`` or fp8 ``[pages, 1, 16896]`` (atom_mxfp4.index_k)."""

    k: MXFP4PageCache
    v: MXFP4PageCache
    index_k: MXFP4PageCache | FP8IndexKCache | None = None

    @classmethod
    def allocate(cls, config: LayerConfig, num_pages: int, device="cpu") -> "LayerCaches":
        return cls(MXFP4PageCache(num_pages, config.num_kv_heads, device),
                   MXFP4PageCache(num_pages, config.num_kv_heads, device),
                   allocate_index_k(config.index_k_dtype, num_pages, device) if config.sparse else None)


class SparseMXFP4Attention:
    """One layer: ``forward(qkv [T, W] bf16, meta, caches) -> [T, nq * 128] bf16`` (before o_proj)."""

    def __init__(self, config: LayerConfig, weights: dict[str, torch.Tensor], backend: str | None = None,
                 rope_tables: dict | None = None):
        """``weights``: the norm weights [128] (``q_norm``, ``k_norm``, and ``idx_q_norm``, ``idx_k_norm`` on sparse
        layers), read at every forward: replacing an entry or updating a tensor in place takes effect at the next
        step (see ``weights_on``). ``rope_tables``: a dict to share cos/sin tables between the layers of one model
        (keyed by device, rotary_dim, rope_theta, max_position: layers of another RoPE get their own table); each
        layer keeps its own when None."""
        expect(isinstance(config, LayerConfig), "config", "a LayerConfig", type(config).__name__, TypeError)
        names = ["q_norm", "k_norm"] + (["idx_q_norm", "idx_k_norm"] if config.sparse else [])
        missing = [n for n in names if n not in weights]
        expect(not missing, "weights", f"a dict with {names}", f"missing {missing}")
        for name in names:
            expect(isinstance(weights[name], torch.Tensor), f"weights[{name!r}]", "a tensor",
                   type(weights[name]).__name__, TypeError)
        self.config, self.weights, self.backend = config, weights, backend
        self._cos_sin: dict[tuple, torch.Tensor] = {} if rope_tables is None else rope_tables
        self._moved: dict[tuple[str, torch.device], tuple[torch.Tensor, int, torch.Tensor]] = {}
        # layers of equal config and backend share their traced steps (atom_mxfp4.replay): one small int per kind
        self._kind = _KINDS.setdefault((config, backend), len(_KINDS))
        self._static: tuple | None = None  # (what it was made from, its tensors, their signatures): _statics

    def cos_sin_cache(self, device) -> torch.Tensor:
        """The RoPE table [max_position, rotary_dim] fp32 of this layer's config on ``device`` (built once)."""
        c = self.config
        key = (torch.device(device), c.rotary_dim, c.rope_theta, c.max_position)
        if key not in self._cos_sin:
            self._cos_sin[key] = rope_cos_sin(c.max_position, c.rotary_dim, c.rope_theta).to(key[0])
        return self._cos_sin[key]

    def weights_on(self, device) -> dict[str, torch.Tensor]:
        """The current norm weights on ``device``, contiguous.

        A weight already on ``device`` is used as it is (a contiguous copy if strided): never stale. A weight on
        another device is copied once and kept, and refreshed in place (same buffer, so captured CUDA graphs see
        it) when the entry is replaced or the tensor's version changes (any in-place op on it; a write through
        ``.data`` bypasses the version counter: replace the entry instead)."""
        device = torch.device(device)
        current = {}
        for name, weight in self.weights.items():
            if weight.device == device:
                current[name] = weight.contiguous()
                continue
            source, version, moved = self._moved.get((name, device), (None, None, None))
            if source is not weight or version != weight._version:
                if moved is not None and moved.shape == weight.shape and moved.dtype == weight.dtype:
                    moved.copy_(weight)
                else:
                    moved = weight.to(device).contiguous()
                self._moved[(name, device)] = (weight, weight._version, moved)
            current[name] = moved
        return current

    def select(self, idx_q: torch.Tensor, meta: AttentionMetadata, caches: LayerCaches, check: bool = True,
               positions: torch.Tensor | None = None):
        """Top-k blocks [nkv, T, topk] of the rows of ``meta`` (index_topk; ``forward`` hands them to ops.attend).
        ``positions``: the rows' positions as int32 (None: ``meta.row_position``)."""
        c = self.config
        positions = meta.row_position if positions is None else positions
        return ops.index_topk(idx_q, caches.index_k, meta.block_table, meta.token_request,
                              positions, topk=c.topk, init_blocks=c.init_blocks,
                              local_blocks=c.local_blocks, index_k_dtype=c.index_k_dtype,
                              tile_rows=c.index_tile_rows if self._tiled(meta) else None, backend=self.backend,
                              check=check)

    def validate(self, qkv: torch.Tensor, meta: AttentionMetadata, caches: LayerCaches,
                 weights: dict[str, torch.Tensor] | None = None) -> None:
        """Everything ``forward`` needs, checked before its first cache write, so a refused step leaves the caches
        byte-identical: the fused write's arguments (the same check as the op's) and the metadata every later op
        reads (the checks of index_topk / attend on it; their other inputs are made by the ops before them and are
        valid by construction). Attributes on every call; the metadata's values once per batch (host syncs, only
        in the first layer that reads them: atom_mxfp4.checked). ``forward(check=True)`` runs it, passing the
        ``weights_on`` it launches with (None: looked up here)."""
        c = self.config
        expect(isinstance(meta, AttentionMetadata), "meta", "an AttentionMetadata", type(meta).__name__, TypeError)
        expect(isinstance(caches, LayerCaches), "caches", "a LayerCaches", type(caches).__name__, TypeError)
        expect(isinstance(qkv, torch.Tensor), "qkv", "a tensor", type(qkv).__name__, TypeError)
        records = [None if x is None else as_records(x, f"caches.{name}")
                   for name, x in (("k", caches.k), ("v", caches.v))]
        records.append(None if caches.index_k is None else index_records(caches.index_k, c.index_k_dtype,
                                                                          "caches.index_k"))
        # the Hopper / FlyDSL readers refuse others after the write has run: refused here first (named only when not)
        if any([x is not None and x.data_ptr() % 16 for x in records]):
            for name, x in zip(("caches.k", "caches.v", "caches.index_k"), records):
                if x is not None:
                    expect_aligned(x, name, 16, "records are copied in 16-byte units")
        w = self.weights_on(qkv.device) if weights is None else weights
        ops.check_write_args(qkv, meta.positions, w["q_norm"], w["k_norm"], w.get("idx_q_norm"), w.get("idx_k_norm"),
                             self.cos_sin_cache(qkv.device), meta.slot_mapping, *records, num_q_heads=c.num_q_heads,
                             num_kv_heads=c.num_kv_heads, num_index_heads=c.index_heads, rotary_dim=c.rotary_dim,
                             eps=c.eps, q_dtype=c.q_dtype)
        pages = records[0].shape[0]
        expect(pages * c.num_kv_heads <= 2**31 - 1, "caches.k pages * num_kv_heads", "< 2**31 (int32 table ids)",
               pages * c.num_kv_heads)
        # the ops read the positions as int32 (``row_position``); their values are named after what the caller gave
        row_position = meta.row_position
        ops.check_rows(meta.block_table, meta.token_request, row_position, qkv.shape[0], qkv.device, pages,
                       names=("meta.block_table", "meta.token_request", "meta.positions"))
        if c.sparse:
            expect(meta.block_table.shape[1] <= MAX_INDEX_BLOCKS, "meta.block_table.shape[1] (pages per request)",
                   f"<= {MAX_INDEX_BLOCKS} on a sparse layer", meta.block_table.shape[1])
        once("slots", (meta.block_table, meta.token_request, meta.positions, meta.slot_mapping), (),
             lambda: _check_slots(meta))
        if self._flash(meta):
            once("segments", (meta.block_table, meta.token_request, meta.positions), (meta.segments,),
                 lambda: prefill.check_segments(meta.segments, meta.positions, meta.token_request, meta.block_table))

    def forward(self, qkv: torch.Tensor, meta: AttentionMetadata, caches: LayerCaches, *, return_topk=False,
                check: bool = True, out: torch.Tensor | None = None):
        """``check=True`` validates the whole step before the first cache write (``validate``: the metadata's values
        once per batch), then runs the ops unchecked; ``check=False`` skips validation: for CUDA-graph capture of
        decode, with metadata the runner built itself (unchecked bad input is undefined). ``out``: where to write the
        result (a contiguous bf16 [T, nq * 128] tensor; None: a new one).

        From the third layer of a kind on the same metadata, the step is a replay of the second's launches with this
        layer's tensors (atom_mxfp4.replay; ``check=True`` then checks that this layer's tensors match the validated
        ones); with check=False also on the next batches, where the metadata is refilled in place (a runner's
        per-batch-size buffers). The step's intermediate buffers are then the batch's, shared by those layers:
        ``return_topk=True`` always takes the ordinary path, so the top-k ids it returns are this call's own."""
        if not return_topk:
            done = self._replayed(qkv, meta, caches, check, out)
            if done is not None:
                return done
        c = self.config
        if not (isinstance(qkv, torch.Tensor) and isinstance(caches, LayerCaches) and qkv.shape[-1] == c.qkv_width
                and c.sparse == (caches.index_k is not None)):
            expect(isinstance(qkv, torch.Tensor), "qkv", "a tensor", type(qkv).__name__, TypeError)
            expect(isinstance(caches, LayerCaches), "caches", "a LayerCaches", type(caches).__name__, TypeError)
            expect(qkv.shape[-1] == c.qkv_width, "qkv.shape[-1]", f"{c.qkv_width} for this layer's geometry",
                   qkv.shape[-1])
            expect(c.sparse == (caches.index_k is not None), "caches.index_k",
                   "given on sparse layers and None on dense ones", type(caches.index_k).__name__)
        num_tokens, device = qkv.shape[0], qkv.device
        if out is None:
            out = torch.empty(num_tokens, c.num_q_heads * c.head_dim, dtype=torch.bfloat16, device=device)
        elif check:
            expect(isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16 and out.device == device
                   and tuple(out.shape) == (num_tokens, c.num_q_heads * c.head_dim) and out.is_contiguous(), "out",
                   f"a contiguous bf16 tensor [{num_tokens}, {c.num_q_heads * c.head_dim}] on {device}",
                   f"{getattr(out, 'dtype', type(out).__name__)} {list(getattr(out, 'shape', []))}")
        w = self.weights_on(device)
        if check:
            self.validate(qkv, meta, caches, w)
        key = None if return_topk else self._trace_key(qkv, meta, caches, check, out)
        if key is None:
            topk_blocks = self._launches(qkv, meta, caches, w, out)
            return (out, topk_blocks) if return_topk else out
        clean = proven(key)
        self._refresh(meta, qkv.device)  # (copies, which the Guard refuses) before the trace, not inside it
        with launch.tracing() as traced, (Guard() if clean is None else contextlib.nullcontext()) as guard:
            self._launches(qkv, meta, caches, w, out)
        if clean is None:
            prove(key, guard.refused is None)
        built = None if clean is None and guard.refused else Trace.build(traced, (qkv, out, *self._static[1]))
        launches, keep = built or ((), ())
        trace = meta.steps[self._kind] = Trace(meta, current_stream(qkv), key[1], key[2], key[3], launches, check,
                                               keep, key[4])
        if launches:
            retain(trace)
        return out

    __call__ = forward

    def _launches(self, qkv, meta, caches, w, out):
        """The step's ops, unchecked (``forward`` has validated or was told not to): the top-k ids (None: dense)."""
        c = self.config
        num_tokens, device = qkv.shape[0], qkv.device
        q, idx_q = ops.fused_qknorm_rope_write(
            qkv, meta.positions, w["q_norm"], w["k_norm"], w.get("idx_q_norm"), w.get("idx_k_norm"),
            self.cos_sin_cache(device), meta.slot_mapping, caches.k, caches.v, caches.index_k,
            num_q_heads=c.num_q_heads, num_kv_heads=c.num_kv_heads, num_index_heads=c.index_heads,
            rotary_dim=c.rotary_dim, eps=c.eps, scale_mode=c.scale_mode, q_dtype=c.q_dtype,
            index_k_dtype=c.index_k_dtype, backend=self.backend, check=False)
        topk_blocks = self.select(idx_q, meta, caches, check=False) if c.sparse else None
        plan = meta.pa_decode_plan(c, device, self.backend)  # the batch's: made by the first layer or the runner
        rows = (num_tokens * c.num_kv_heads, c.group, c.head_dim)
        out_rows, q_rows, row_position = out.view(rows), q.view(rows), meta.row_position
        if not self._flash(meta):
            if not c.sparse and not self._fuses_dense(device):  # the batch's tables, kept by the metadata
                tables, lens = meta.dense_tables(c.num_kv_heads)
                ops.pa_decode(out_rows, q_rows, caches.k, caches.v, tables, lens, softmax_scale=c.softmax_scale,
                              plan=plan, backend=self.backend, check=False)
                return None
            # dense: the request's pages; sparse: its top-k blocks (one launch where the backend fuses the tables)
            ops.attend(out_rows, q_rows, caches.k, caches.v, meta.block_table, meta.token_request, row_position,
                       num_kv_heads=c.num_kv_heads, topk_blocks=topk_blocks, softmax_scale=c.softmax_scale,
                       plan=plan, backend=self.backend, check=False)
            return topk_blocks

        def decode(first: int, end: int) -> None:  # the rows of tokens [first, end) by the decode kernel
            h = c.num_kv_heads
            ops.attend(out_rows[first * h: end * h], q_rows[first * h: end * h], caches.k, caches.v,
                       meta.block_table, meta.token_request[first:end], row_position[first:end], num_kv_heads=h,
                       softmax_scale=c.softmax_scale, plan=plan, backend=self.backend, check=False)

        prefill.attend_dense(out_rows, q_rows, caches.k, caches.v, meta.block_table, meta.token_request,
                             row_position, meta.segments, num_kv_heads=c.num_kv_heads, softmax_scale=c.softmax_scale,
                             min_rows=c.flash_prefill_rows, decode=decode,
                             backend=resolve_backend(self.backend, device).name)
        return None

    def _fuses_dense(self, device) -> bool:
        """Whether the backend runs a dense attend as one launch reading the block table (Hopper); the others run
        pa_decode over ``AttentionMetadata.dense_tables``."""
        return hasattr(resolve_backend(self.backend, device), "attend")

    def _refresh(self, meta, device) -> None:
        """What this step reads that the metadata derives from its values (torch ops), made for the batch now in
        it: before a trace (a copy inside it would refuse it) and before a replay after a refill."""
        meta.row_position  # noqa: B018 - the int32 positions
        if not self.config.sparse and not self._fuses_dense(device) and not self._flash(meta):
            meta.dense_tables(self.config.num_kv_heads)

    def _tiled(self, meta) -> bool:
        """Whether this sparse step scores the index with the tiled scorer (a prefill batch: ``index_tile_rows``)."""
        c = self.config
        return c.sparse and c.index_tile_rows > 0 and getattr(meta, "longest_segment", 0) >= c.index_tile_rows

    def _flash(self, meta) -> bool:
        """Whether this dense step runs a prefill segment as flash attention (atom_mxfp4.prefill)."""
        c = self.config
        return (c.flash_prefill_rows > 0 and not c.sparse and c.q_dtype == torch.bfloat16
                and getattr(meta, "longest_segment", 0) >= c.flash_prefill_rows)

    # ---- the replayed step (atom_mxfp4.replay) ----
    def _statics(self, caches: LayerCaches, qkv: torch.Tensor) -> tuple[tuple, tuple]:
        """(this layer's own tensors besides qkv and out, their signatures): the caches, the norm weights as the
        kernels get them (``weights_on``) and the RoPE table, in the order a trace names them. Kept while the caches,
        the weights (objects and versions) and their addresses stay the same."""
        memo, weights, device = self._static, self.weights, qkv.get_device()
        if memo is not None:
            made, tensors, signatures, addresses = memo
            if (made[0] is caches and made[1] is caches.k and made[2] is caches.v and made[3] is caches.index_k
                    and made[4] == device and len(made[5]) == len(weights)):
                for weight, (kept, version) in zip(weights.values(), made[5]):
                    if weight is not kept or weight._version != version:
                        break
                else:
                    if tuple([0 if t is None else t.data_ptr() for t in tensors]) == addresses:
                        return tensors, signatures
        w = self.weights_on(qkv.device)
        tensors = (*[getattr(x, "records", x) for x in (caches.k, caches.v, caches.index_k)], w["q_norm"],
                   w["k_norm"], w.get("idx_q_norm"), w.get("idx_k_norm"), self.cos_sin_cache(qkv.device))
        signatures = tuple(signature(t) for t in tensors)
        made = (caches, caches.k, caches.v, caches.index_k, device,
                tuple((weight, weight._version) for weight in weights.values()))
        self._static = (made, tensors, signatures, tuple([0 if t is None else t.data_ptr() for t in tensors]))
        return tensors, signatures

    def _trace_key(self, qkv, meta, caches, check: bool, out) -> tuple | None:
        """What this ordinary step's trace rests on (replay.proven's key) when it is to be traced, else None: on a
        backend whose every launch can replay, outside CUDA-graph capture, the first step of its kind on this
        metadata when a step of this key was proven to run only allocations and views (atom_mxfp4.replay), else the
        second one (the first leaves a mark; the second is traced under the Guard). A later ordinary step with
        check=True and the trace's signatures marks the trace validated."""
        if not isinstance(meta, AttentionMetadata) or capturing(qkv):
            return None
        if self._flash(meta) or self._tiled(meta):  # torch work on host ints / the tiles: never traced
            meta.steps[self._kind] = Trace(meta, launches=())
            return None
        seen, state = meta.steps.get(self._kind), meta_state(meta)
        # first: no step of this kind seen on this metadata, as it is now or (a mark left) in an earlier fill of the
        # same tensors (so a model of one layer per kind traces its second batch and replays from the third)
        first = seen is None or (seen.meta_state != state and (seen.launches is not None
                                                               or seen.meta_state[:4] != state[:4]))
        if not first and seen.launches is not None:
            if check and seen.launches and not seen.validated and self._matches(seen, qkv, caches, out):
                seen.validated = True
            return None
        if resolve_backend(self.backend, qkv.device).name not in REPLAYABLE_BACKENDS:
            meta.steps[self._kind] = Trace(meta, launches=())  # its launches cannot replay: not asked again
            return None
        key = (self._kind, signature(qkv), signature(out), self._statics(caches, qkv)[1], layout(meta))
        clean = proven(key)
        if clean is False:
            meta.steps[self._kind] = Trace(meta, launches=())
            return None
        if first and clean is None:
            meta.steps[self._kind] = Trace(meta)
            return None
        return key

    def _matches(self, trace: Trace, qkv, caches, out) -> bool:
        return (trace.static == self._statics(caches, qkv)[1] and signature(qkv) == trace.qkv
                and signature(out) == trace.out and current_stream(qkv) == trace.stream)

    def _replayed(self, qkv, meta, caches, check: bool, out):
        """The step as a replay of the batch's trace (module docstring of atom_mxfp4.replay), or None where there is
        none to replay for these tensors (``forward`` then takes its ordinary path)."""
        steps = getattr(meta, "steps", None)
        trace = None if steps is None else steps.get(self._kind)
        if (trace is None or not trace.launches or not isinstance(qkv, torch.Tensor)
                or not isinstance(caches, LayerCaches) or capturing(qkv)):
            return None
        state = meta_state(meta)
        if trace.meta_state != state:
            if check or not trace.refilled(meta, state):
                return None
            self._refresh(meta, qkv.device)  # the refilled batch's int32 positions (and dense tables)
        elif check and not trace.validated:
            return None
        statics, signatures = self._statics(caches, qkv)
        if signatures != trace.static or signature(qkv) != trace.qkv:
            return None
        if out is None:
            c = self.config
            out = torch.empty(qkv.shape[0], c.num_q_heads * c.head_dim, dtype=torch.bfloat16, device=qkv.device)
        elif not isinstance(out, torch.Tensor) or signature(out) != trace.out:
            return None
        if current_stream(qkv) != trace.stream:
            return None
        addresses = (qkv.data_ptr(), out.data_ptr(), *[0 if t is None else t.data_ptr() for t in statics])
        return out if launch.replay(trace.launches, addresses, trace.stream) else None



def _check_slots(meta: AttentionMetadata) -> None:
    """Each token is written where the attention reads it: slot = block_table[request, pos // 128] * 128 + pos % 128,
    or -1 (a value check ``validate`` runs once per batch: a host sync)."""
    pages = meta.block_table.long()[meta.token_request.long(), meta.positions // PAGE_SIZE]
    where = pages * PAGE_SIZE + meta.positions % PAGE_SIZE
    wrong = (meta.slot_mapping >= 0) & (meta.slot_mapping != where)
    if wrong.numel() and bool(wrong.any()):
        t = int(wrong.nonzero()[0, 0])
        fail("meta.slot_mapping", "-1 or the slot block_table gives the token's position",
             f"{int(meta.slot_mapping[t])} for token {t} (position {int(meta.positions[t])}, table slot "
             f"{int(where[t])})")
