"""The paged MXFP4 cache (DESIGN §4): one uint8 record of 8704 bytes per (page, head).

Record of a (page, head): ``[128 tokens x 64 B data][128 tokens x 4 B e8m0 scales]``.
Token slot = ``page * 128 + offset``; slot -1 means "do not write" (consumed by the write op).
Folding heads into pages gives physical page id ``page * heads + head``: what sparse tables hold.
"""

from __future__ import annotations

import torch

from .errors import expect, expect_dtype, fail
from .index_k import FP8_RECORD_BYTES, IndexKDtype, fp8_data_view, fp8_scale_view
# re-exported for code that read the geometry from here; the one definition is atom_mxfp4.layout
from .layout import (DATA_BYTES, HEAD_DIM, PAGE_SIZE, RECORD_BYTES, SCALE_BYTES, TOKEN_BYTES,  # noqa: F401
                     data_view, pages_for, scale_view)

BYTES_PER_TOKEN_HEAD = {"mxfp4": TOKEN_BYTES, "fp8": HEAD_DIM, "bf16": 2 * HEAD_DIM}
"""Bytes per token per head of one of K or V, per cache dtype."""


def kv_bytes_per_token(dtype: str = "mxfp4", kv_heads: int = 1) -> int:
    """Bytes per token of K + V for ``kv_heads`` heads (mxfp4: 136 per head, fp8: 256, bf16: 512)."""
    expect(dtype in BYTES_PER_TOKEN_HEAD, "dtype", f"one of {list(BYTES_PER_TOKEN_HEAD)}", dtype)
    return 2 * kv_heads * BYTES_PER_TOKEN_HEAD[dtype]


def tokens_that_fit(num_bytes: int, dtype: str = "mxfp4", kv_heads: int = 1) -> int:
    """How many tokens of K + V fit in ``num_bytes`` (whole pages only for mxfp4)."""
    if dtype == "mxfp4":
        return (num_bytes // (2 * kv_heads * RECORD_BYTES)) * PAGE_SIZE
    return num_bytes // kv_bytes_per_token(dtype, kv_heads)


def capacity_ratio(dtype: str = "bf16") -> float:
    """Tokens of mxfp4 per token of ``dtype`` in the same memory (bf16: 3.76, fp8: 1.88)."""
    return BYTES_PER_TOKEN_HEAD[dtype] / BYTES_PER_TOKEN_HEAD["mxfp4"]


def as_records(cache: "MXFP4PageCache | torch.Tensor", name: str) -> torch.Tensor:
    """Accept a cache object or its records tensor; check the record layout."""
    return _dense_records(cache.records if isinstance(cache, MXFP4PageCache) else cache, name, RECORD_BYTES, "",
                          "an MXFP4PageCache or a uint8 tensor")


def _dense_records(records, name: str, width: int, what: str, kinds: str) -> torch.Tensor:
    """``records`` as a dense uint8 ``[pages, heads, width]`` tensor, or a refusal naming ``name``. Every op calls
    this for each cache: the messages are built only on failure."""
    if not isinstance(records, torch.Tensor):
        fail(name, kinds, type(records).__name__, TypeError)
    shape = records.shape
    if records.dtype == torch.uint8 and len(shape) == 3 and shape[2] == width and records.stride() == (
            width * shape[1], width, 1):
        return records
    expect_dtype(records, name, (torch.uint8,))
    if len(shape) != 3 or shape[2] != width:
        fail(f"{name}.shape", f"[pages, heads, {width}]{what}", list(shape))
    if records.stride() != (width * shape[1], width, 1):
        fail(f"{name}.stride()", f"({width * shape[1]}, {width}, 1) (dense records)", tuple(records.stride()))
    return records


class _PageRecords:
    """What every page-record cache holds: ``records [pages, heads, record bytes]`` uint8 and its two views (the
    subclass names them: ``_data_view`` / ``_scale_view`` take the records, return views sharing storage)."""

    records: torch.Tensor

    @property
    def num_pages(self) -> int:
        return self.records.shape[0]

    @property
    def num_heads(self) -> int:
        return self.records.shape[1]

    @property
    def device(self) -> torch.device:
        return self.records.device

    @property
    def data(self) -> torch.Tensor:
        return self._data_view(self.records)

    @property
    def scale(self) -> torch.Tensor:
        return self._scale_view(self.records)

    @property
    def nbytes(self) -> int:
        return self.records.numel()


class MXFP4PageCache(_PageRecords):
    """Zero-filled MXFP4 records ``[pages, heads, 8704]`` uint8 for one of K, V or index-K of one layer.

    Views share storage (no copies): ``data [pages, heads, 128, 64]``, ``scale [pages, heads, 128, 4]``, with page
    stride ``8704 * heads`` and head stride ``8704`` bytes. The index-K cache is this class with one head.
    """

    def __init__(self, num_pages: int | None = None, num_heads: int = 1, device: torch.device | str = "cpu",
                 records: torch.Tensor | None = None):
        # either allocate (num_pages, num_heads, device) or wrap existing ``records`` [pages, heads, 8704]
        if records is None:
            expect(isinstance(num_pages, int) and num_pages > 0, "num_pages", "a positive int", num_pages)
            expect(isinstance(num_heads, int) and num_heads > 0, "num_heads", "a positive int", num_heads)
            records = torch.zeros(num_pages, num_heads, RECORD_BYTES, dtype=torch.uint8, device=device)
        self.records = as_records(records, "records")

    _data_view, _scale_view = staticmethod(data_view), staticmethod(scale_view)

    @classmethod
    def for_tokens(cls, num_tokens: int, num_heads: int = 1, device="cpu") -> "MXFP4PageCache":
        return cls(max(1, pages_for(num_tokens)), num_heads, device)

    def fold_heads(self) -> "MXFP4PageCache":
        """The ``[pages * heads, 1, 8704]`` view: physical page id ``page * heads + head``."""
        return MXFP4PageCache(records=self.records.view(self.num_pages * self.num_heads, 1, RECORD_BYTES))


    def __repr__(self) -> str:
        return (f"MXFP4PageCache(pages={self.num_pages}, heads={self.num_heads}, device={self.device}, "
                f"{self.nbytes / 2**20:.1f} MiB)")


# ---- the index-K cache of either dtype (atom_mxfp4.index_k) ----------------------------------------------------
def index_k_dtype_of(cache, dtype: "IndexKDtype | str | None" = None) -> IndexKDtype:
    """The index-K dtype an op reads ``cache`` as: ``dtype`` when given (``index_records`` then checks the cache
    against it), else the cache's own: an ``FP8IndexKCache`` / ``MXFP4PageCache`` object's, a uint8 records tensor's
    by its record width (16896 B: fp8, anything else: mxfp4, whose checks then name the width they expect)."""
    if dtype is not None:
        return IndexKDtype.parse(dtype)
    if isinstance(cache, (MXFP4PageCache, FP8IndexKCache)):
        return IndexKDtype.FP8 if isinstance(cache, FP8IndexKCache) else IndexKDtype.MXFP4
    fp8 = isinstance(cache, torch.Tensor) and cache.dim() == 3 and cache.shape[2] == FP8_RECORD_BYTES
    return IndexKDtype.FP8 if fp8 else IndexKDtype.MXFP4


def index_records(cache, dtype: "IndexKDtype | str", name: str = "index_k_cache") -> torch.Tensor:
    """Accept an index-K cache object (``MXFP4PageCache`` / ``FP8IndexKCache``) or its records tensor; check the
    record layout of ``dtype`` (``[pages, 1, record_bytes]`` uint8, dense) and a cache object's own dtype."""
    dtype = IndexKDtype.parse(dtype)
    if isinstance(cache, (MXFP4PageCache, FP8IndexKCache)):
        own = index_k_dtype_of(cache)
        if own is not dtype:
            fail(f"{name} (a {type(cache).__name__})", f"an index-K cache of index_k_dtype {dtype.value!r}",
                 f"one of {own.value!r}")
        records = cache.records
    else:
        records = cache
    if dtype is IndexKDtype.MXFP4:
        return as_records(records, name)
    return _dense_records(records, name, FP8_RECORD_BYTES, " (index_k_dtype 'fp8')",
                          "an FP8IndexKCache or a uint8 tensor")


class FP8IndexKCache(_PageRecords):
    """Zero-filled fp8 index-K records ``[pages, 1, 16896]`` uint8 of one sparse layer (views: ``data [pages, 1,
    128, 128]`` e4m3, ``scale [pages, 1, 128, 4]`` e8m0; page stride 16896 B)."""

    dtype = IndexKDtype.FP8

    def __init__(self, num_pages: int | None = None, device: torch.device | str = "cpu",
                 records: torch.Tensor | None = None):
        if records is None:
            expect(isinstance(num_pages, int) and not isinstance(num_pages, bool) and num_pages > 0, "num_pages",
                   "a positive int", repr(num_pages))
            records = torch.zeros(num_pages, 1, FP8_RECORD_BYTES, dtype=torch.uint8, device=device)
        self.records = index_records(records, IndexKDtype.FP8, "records")
        expect(self.records.shape[1] == 1, "records heads", "1 (one shared index-K head)", self.records.shape[1])

    _data_view, _scale_view = staticmethod(fp8_data_view), staticmethod(fp8_scale_view)

    def __repr__(self) -> str:
        return f"FP8IndexKCache(pages={self.num_pages}, device={self.device}, {self.nbytes / 2**20:.1f} MiB)"


def allocate_index_k(dtype: "IndexKDtype | str", num_pages: int, device="cpu"):
    """A zero-filled index-K cache of ``dtype``: ``MXFP4PageCache(num_pages, 1)`` or ``FP8IndexKCache(num_pages)``."""
    dtype = IndexKDtype.parse(dtype)
    return MXFP4PageCache(num_pages, 1, device) if dtype is IndexKDtype.MXFP4 else FP8IndexKCache(num_pages, device)
