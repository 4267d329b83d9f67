"""The MXFP4 token-to-KV pool of a MiniMax-M3 sparse model (DESIGN §4), as an SGLang ``KVCache``.

Per model layer on this rank: K and V records ``[pages, kv_heads, 8704]`` uint8; per sparse layer also the index-K
records of ``index_k_dtype``: MXFP4 ``[pages, 1, 8704]`` or fp8 ``[pages, 1, 16896]`` (atom_mxfp4.index_k).
``pages = size // 128 + 1``: SGLang's slot ids run over ``[0, size + page_size)``, page 0
is its padding page (padded CUDA-graph rows write slot 0). Token slot = ``page * 128 + offset``.
True bytes per token: ``2 * kv_heads * layers * 68 + sparse_layers * (68 | 132)`` (68 B per MXFP4 head-token
record, 132 B per fp8 index-K token).
Writes happen inside ``atom_mxfp4.ops.fused_qknorm_rope_write`` (the backend calls it), never through
``set_kv_buffer``.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
from sglang.srt.mem_cache.memory_pool import GPU_MEMORY_TYPE_KV_CACHE, KVCache

from atom_mxfp4.cache import MXFP4PageCache
from atom_mxfp4.layout import PAGE_SIZE, RECORD_BYTES, TOKEN_BYTES, data_view, scale_view
from atom_mxfp4.errors import expect
from atom_mxfp4.cache import FP8IndexKCache
from atom_mxfp4.index_k import DEFAULT_INDEX_K_DTYPE, IndexKDtype, fp8_data_view, fp8_scale_view

RECORD_BYTES_PER_TOKEN = TOKEN_BYTES  # 68: one head-token of K, V or index-K


def bytes_per_token(*, kv_heads: int, num_layers: int, num_sparse_layers: int,
                    index_k_dtype: IndexKDtype | str = DEFAULT_INDEX_K_DTYPE) -> int:
    """True cache bytes per token of this rank: K + V of every layer (68 B per head), index-K (one head) of sparse
    layers (68 B as MXFP4, 132 B as fp8)."""
    index_bytes = IndexKDtype.parse(index_k_dtype).bytes_per_token
    return 2 * kv_heads * num_layers * RECORD_BYTES_PER_TOKEN + num_sparse_layers * index_bytes


class MXFP4MiniMaxKVPool(KVCache):
    def __init__(self, size: int, page_size: int, head_num: int, dense_layer_ids, sparse_layer_ids, device,
                 start_layer: int, end_layer: int, enable_memory_saver: bool = False,
                 index_k_dtype: IndexKDtype | str = DEFAULT_INDEX_K_DTYPE):
        expect(page_size == PAGE_SIZE, "page_size", str(PAGE_SIZE), page_size)
        layers = sorted(i for i in list(dense_layer_ids) + list(sparse_layer_ids) if start_layer <= i < end_layer)
        super().__init__(size, page_size, torch.uint8, len(layers), device, enable_memory_saver, start_layer,
                         end_layer, allocation_label="atom-mxfp4")
        self.head_num, self.head_dim, self.v_head_dim = head_num, 128, 128
        self.num_pages = size // page_size + 1
        self.layer_ids = tuple(layers)
        self.sparse_layer_ids = tuple(i for i in layers if i in set(sparse_layer_ids))
        self.index_k_dtype = IndexKDtype.parse(index_k_dtype)
        with self.memory_saver_adapter.region(GPU_MEMORY_TYPE_KV_CACHE), (
                torch.cuda.use_mem_pool(self.custom_mem_pool) if self.enable_custom_mem_pool else nullcontext()):
            def records(heads, width=RECORD_BYTES):  # [pages, heads, width] uint8, zero-filled
                return torch.zeros(self.num_pages, heads, width, dtype=torch.uint8, device=device)
            self.k_records = {i: records(head_num) for i in layers}
            self.v_records = {i: records(head_num) for i in layers}
            self.index_k_records = {i: records(1, self.index_k_dtype.record_bytes) for i in self.sparse_layer_ids}
        self._finalize_allocation_log(size)

    # ---- what the backend reads ----
    def layer_caches(self, layer_id: int):
        """(K, V, index-K or None) as cache views of this layer's records (no copies): ``MXFP4PageCache``, and
        ``FP8IndexKCache`` for an fp8 index-K."""
        self._wait(layer_id)
        idx = self.index_k_records.get(layer_id)
        index_cache = FP8IndexKCache if self.index_k_dtype is IndexKDtype.FP8 else MXFP4PageCache
        return (MXFP4PageCache(records=self.k_records[layer_id]), MXFP4PageCache(records=self.v_records[layer_id]),
                None if idx is None else index_cache(records=idx))

    def wait_for_layer(self, layer_id: int) -> None:
        """What ``layer_caches`` does before handing a layer's caches out (the attention backend keeps the views)."""
        self._wait(layer_id)

    def _wait(self, layer_id: int) -> None:
        if self.layer_transfer_counter is not None:
            self.layer_transfer_counter.wait_until(layer_id - self.start_layer)

    # ---- KVCache interface ----
    def get_key_buffer(self, layer_id: int) -> torch.Tensor:
        self._wait(layer_id)
        return self.k_records[layer_id]

    def get_value_buffer(self, layer_id: int) -> torch.Tensor:
        self._wait(layer_id)
        return self.v_records[layer_id]

    def get_kv_buffer(self, layer_id: int):
        return self.get_key_buffer(layer_id), self.get_value_buffer(layer_id)

    def get_index_k_buffer(self, layer_id: int) -> torch.Tensor:
        expect(layer_id in self.index_k_records, "layer_id", f"a sparse layer {list(self.sparse_layer_ids)}",
               layer_id)
        return self.index_k_records[layer_id]

    def set_kv_buffer(self, layer, loc, cache_k, cache_v, k_scale=None, v_scale=None, **kwargs) -> None:
        raise NotImplementedError(
            "MXFP4MiniMaxKVPool is written by atom_mxfp4.ops.fused_qknorm_rope_write inside the atom_mxfp4 attention "
            "backend; a caller of set_kv_buffer is running a path the plugin does not cover")

    def get_kv_size_bytes(self):
        k = sum(t.nbytes for t in self.k_records.values()) + sum(t.nbytes for t in self.index_k_records.values())
        return k, sum(t.nbytes for t in self.v_records.values())

    def all_records(self) -> list[torch.Tensor]:
        return list(self.k_records.values()) + list(self.v_records.values()) + list(self.index_k_records.values())

    def get_contiguous_buf_infos(self):
        """Per buffer: data pointer, byte length, bytes per page (PD-disaggregation transfer by page id)."""
        bufs = self.all_records()
        return [b.data_ptr() for b in bufs], [b.nbytes for b in bufs], [b[0].nbytes for b in bufs]

    @torch.no_grad()
    def move_kv_cache(self, tgt_loc: torch.Tensor, src_loc: torch.Tensor) -> None:
        """Copy tokens ``src_loc[i] -> tgt_loc[i]`` (slot ids) in every K, V and index-K cache: 64 data bytes and
        4 scale bytes per MXFP4 head-token, 128 + 4 per fp8 index-K token. Used by SGLang's slot-move paths
        (speculative accept, compaction)."""
        expect(tgt_loc.shape == src_loc.shape, "tgt_loc.shape", f"equal to src_loc.shape {list(src_loc.shape)}",
               list(tgt_loc.shape))
        if tgt_loc.numel() == 0:
            return
        tgt, src = tgt_loc.long(), src_loc.long()
        tp, to, sp, so = tgt // PAGE_SIZE, tgt % PAGE_SIZE, src // PAGE_SIZE, src % PAGE_SIZE
        fp8_index = self.index_k_dtype is IndexKDtype.FP8
        for records in self.all_records():
            views = ((fp8_data_view, fp8_scale_view) if fp8_index and records.shape[2] != RECORD_BYTES
                     else (data_view, scale_view))
            for view in (views[0](records), views[1](records)):  # [pages, heads, 128, bytes]
                view[tp, :, to] = view[sp, :, so]
