"""SparseMXFP4Attention: the MiniMax-M3 attention of one layer over MXFP4 paged caches.

Per step and layer (DESIGN §1): fused QK-norm + RoPE + MXFP4 cache write, then (sparse layers) index top-k and
sparse tables, then pa_decode with one query token per row, for prefill and decode alike. Dense layers attend
over the request's whole block table. Batches may mix prefill (with or without a cached prefix, chunked) and
decode requests: every new token is one row. Metadata is an explicit dataclass, never a global.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from . import ops
from .cache import HEAD_DIM, PAGE_SIZE, MXFP4PageCache
from .errors import expect
from .format import DEFAULT_CACHE_SCALE_MODE, ScaleMode
from .reference import rope_cos_sin

MAX_GROUP = ops.MAX_GROUP


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
    softmax_scale: float = field(default=1.0 / math.sqrt(HEAD_DIM))

    def __post_init__(self):
        expect(self.head_dim == HEAD_DIM, "head_dim", f"{HEAD_DIM} (the only head_dim of the MXFP4 kernels)",
               self.head_dim)
        expect(self.page_size == PAGE_SIZE, "page_size", f"{PAGE_SIZE} (= the sparse block size)", self.page_size)
        expect(self.num_kv_heads >= 1 and self.num_q_heads % self.num_kv_heads == 0, "num_q_heads / num_kv_heads",
               "a whole GQA group", f"{self.num_q_heads} / {self.num_kv_heads}")
        group = self.num_q_heads // self.num_kv_heads
        expect(group <= MAX_GROUP, "GQA group (num_q_heads / num_kv_heads)", f"<= {MAX_GROUP}", group)
        if self.sparse:
            expect(self.num_index_heads == self.num_kv_heads, "num_index_heads",
                   f"num_kv_heads = {self.num_kv_heads} on a sparse layer", self.num_index_heads)
        object.__setattr__(self, "scale_mode", ScaleMode.parse(self.scale_mode))

    @property
    def group(self) -> int:
        return self.num_q_heads // self.num_kv_heads

    @property
    def index_heads(self) -> int:
        """Index query heads in the fused projection (0 on dense layers)."""
        return self.num_index_heads if self.sparse else 0

    @property
    def qkv_width(self) -> int:
        niq = self.index_heads
        return (self.num_q_heads + 2 * self.num_kv_heads + niq + (1 if niq else 0)) * self.head_dim


@dataclass
class AttentionMetadata:
    """What one forward step needs; built once per batch, shared by every layer.

    positions [T] i64: each new token's position in its request; slot_mapping [T] i64: its cache slot
    (``page * 128 + offset``, -1 = do not write); token_request [T] i32: its row of ``block_table``;
    block_table [B, max_pages] i32: each request's page ids (position p lives in page ``block_table[b, p // 128]``).
    """

    positions: torch.Tensor
    slot_mapping: torch.Tensor
    token_request: torch.Tensor
    block_table: torch.Tensor

    @classmethod
    def for_requests(cls, block_table: torch.Tensor, prefix_lens: list[int], new_lens: list[int]):
        """Rows for ``new_lens[b]`` new tokens after ``prefix_lens[b]`` cached ones (decode: new_len 1)."""
        expect(len(prefix_lens) == len(new_lens) == block_table.shape[0], "prefix_lens / new_lens",
               f"{block_table.shape[0]} entries (block_table rows)", f"{len(prefix_lens)} / {len(new_lens)}")
        device = block_table.device
        positions = torch.cat([torch.arange(p, p + n, dtype=torch.int64) for p, n in zip(prefix_lens, new_lens)])
        request = torch.cat([torch.full((n,), b, dtype=torch.int32) for b, n in enumerate(new_lens)])
        positions, request = positions.to(device), request.to(device)
        pages = block_table.long()[request.long(), positions // PAGE_SIZE]
        slots = pages * PAGE_SIZE + positions % PAGE_SIZE
        return cls(positions, slots, request, block_table)

    @property
    def num_tokens(self) -> int:
        return self.positions.shape[0]


@dataclass
class LayerCaches:
    """The MXFP4 caches of one layer: K and V ``[pages, nkv, 8704]``, index-K ``[pages, 1, 8704]`` (sparse)."""

    k: MXFP4PageCache
    v: MXFP4PageCache
    index_k: MXFP4PageCache | None = None

    @classmethod
    def allocate(cls, config: LayerConfig, num_pages: int, device="cpu") -> "LayerCaches":
        return cls(MXFP4PageCache(num_pages, config.num_kv_heads, device),
                   MXFP4PageCache(num_pages, config.num_kv_heads, device),
                   MXFP4PageCache(num_pages, 1, device) if config.sparse else None)


class SparseMXFP4Attention:
    """One layer: ``forward(qkv [T, W] bf16, meta, caches) -> [T, nq * 128] bf16`` (before o_proj)."""

    def __init__(self, config: LayerConfig, weights: dict[str, torch.Tensor], backend: str | None = None,
                 rope_tables: dict | None = None):
        """``rope_tables``: a dict (device -> cos/sin table) to share between the layers of one model; each layer
        builds its own when None. Layers sharing it must have the same rotary_dim, rope_theta and max_position."""
        names = ["q_norm", "k_norm"] + (["idx_q_norm", "idx_k_norm"] if config.sparse else [])
        missing = [n for n in names if n not in weights]
        expect(not missing, "weights", f"a dict with {names}", f"missing {missing}")
        self.config, self.weights, self.backend = config, weights, backend
        self._cos_sin: dict[torch.device, torch.Tensor] = {} if rope_tables is None else rope_tables
        self._weights_by_device: dict[torch.device, dict[str, torch.Tensor]] = {}

    def cos_sin_cache(self, device) -> torch.Tensor:
        device = torch.device(device)
        if device not in self._cos_sin:
            c = self.config
            self._cos_sin[device] = rope_cos_sin(c.max_position, c.rotary_dim, c.rope_theta).to(device)
        return self._cos_sin[device]

    def weights_on(self, device) -> dict[str, torch.Tensor]:
        """The norm weights on ``device`` (moved once and kept: the layer may be given CPU weights)."""
        device = torch.device(device)
        if device not in self._weights_by_device:
            self._weights_by_device[device] = {name: w.to(device) for name, w in self.weights.items()}
        return self._weights_by_device[device]

    def select(self, idx_q: torch.Tensor, meta: AttentionMetadata, caches: LayerCaches, check: bool = True):
        """Sparse tables [T * nkv, topk] and context lengths [T * nkv] for the rows of ``meta``."""
        c = self.config
        rows, positions = meta.token_request, meta.positions.to(torch.int32)
        topk_blocks = ops.index_topk(idx_q, caches.index_k, meta.block_table, rows, positions, topk=c.topk,
                                     init_blocks=c.init_blocks, local_blocks=c.local_blocks, backend=self.backend,
                                     check=check)
        tables, lens = ops.build_sparse_tables(topk_blocks, meta.block_table, rows, positions,
                                               num_kv_heads=c.num_kv_heads, backend=self.backend, check=check)
        return tables, lens, topk_blocks

    def dense_tables(self, meta: AttentionMetadata):
        """Dense layers: row ``t * nkv + h`` sees its request's whole table (folded), ``position + 1`` tokens."""
        nkv = self.config.num_kv_heads
        pages = meta.block_table[meta.token_request.long()].long()  # [T, max_pages]
        heads = torch.arange(nkv, device=pages.device)
        tables = (pages[:, None, :] * nkv + heads[None, :, None]).reshape(-1, pages.shape[1])
        lens = (meta.positions + 1).repeat_interleave(nkv)
        return tables.to(torch.int32).contiguous(), lens.to(torch.int32)

    def forward(self, qkv: torch.Tensor, meta: AttentionMetadata, caches: LayerCaches, *, return_topk=False,
                check: bool = True):
        """``check=False`` skips the ops' validation, including their host-syncing value checks: for CUDA-graph
        capture of decode, with metadata the runner built itself."""
        c, w = self.config, self.weights_on(qkv.device)
        expect(qkv.shape[-1] == c.qkv_width, "qkv.shape[-1]", f"{c.qkv_width} for this layer's geometry",
               qkv.shape[-1])
        expect(c.sparse == (caches.index_k is not None), "caches.index_k",
               "given on sparse layers and None on dense ones", type(caches.index_k).__name__)
        q, idx_q = ops.fused_qknorm_rope_write(
            qkv, meta.positions, w["q_norm"], w["k_norm"], w.get("idx_q_norm"), w.get("idx_k_norm"),
            self.cos_sin_cache(qkv.device), meta.slot_mapping, caches.k, caches.v, caches.index_k,
            num_q_heads=c.num_q_heads, num_kv_heads=c.num_kv_heads, num_index_heads=c.index_heads,
            rotary_dim=c.rotary_dim, eps=c.eps, scale_mode=c.scale_mode, q_dtype=c.q_dtype, backend=self.backend,
            check=check)
        topk_blocks = None
        if c.sparse:
            tables, lens, topk_blocks = self.select(idx_q, meta, caches, check)
        else:
            tables, lens = self.dense_tables(meta)
        num_tokens = qkv.shape[0]
        out = torch.empty(num_tokens * c.num_kv_heads, c.group, c.head_dim, dtype=torch.bfloat16, device=qkv.device)
        ops.pa_decode(out, q.reshape(num_tokens * c.num_kv_heads, c.group, c.head_dim), caches.k, caches.v, tables,
                      lens, softmax_scale=c.softmax_scale, backend=self.backend, check=check)
        out = out.view(num_tokens, c.num_q_heads * c.head_dim)
        return (out, topk_blocks) if return_topk else out

    __call__ = forward
