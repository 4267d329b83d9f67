"""A model runner's batch metadata from its own request-to-token map (the SGLang backend builds ours with it).

- ``decode_filler(kernel_backend, device)``: the function that fills a decode batch's ``positions`` / ``slot_mapping``
  / ``block_table`` buffers in place (kernels/triton/decode_metadata.py documents what is filled): one pre-bound
  Triton launch where the layer's kernels are compiled ones (the Triton or Hopper backend) on a GPU, else its torch
  twin (kernels/torch/decode_metadata.py, six torch ops), the same bits. Chosen once, by the caller.
- ``page_table`` (an extend batch's block table) and ``slots`` (the runner's padding slot as NO_SLOT): torch ops.
"""

from __future__ import annotations

import torch

from .backends import resolve_backend
from .kernels.torch.decode_metadata import decode_metadata as _torch_fill
from .kernels.torch.decode_metadata import page_table, slots
from .replay import REPLAYABLE_BACKENDS as COMPILED  # the backends whose every launch goes through atom_mxfp4.launch

__all__ = ["decode_filler", "page_table", "slots"]


def decode_filler(kernel_backend: str | None, device: torch.device, kernel: bool = True):
    """``fill(seq_lens, out_cache_loc, req_pool_indices, req_to_token, positions, slot_mapping, block_table,
    padding_slot)`` for a runner whose layers run on ``kernel_backend`` (a registered name or None: the device's
    best) on ``device``; ``kernel=False``: the torch twin wherever it runs."""
    device = torch.device(device)
    if kernel and device.type == "cuda" and resolve_backend(kernel_backend, device).name in COMPILED:
        from .kernels.triton.decode_metadata import decode_metadata
        return decode_metadata
    return _torch_fill
