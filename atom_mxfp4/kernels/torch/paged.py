"""Reading tokens out of MXFP4 page records (DESIGN §4), shared by the torch ops."""

import torch

from atom_mxfp4.format import dequantize_mxfp4
from atom_mxfp4.layout import DATA_BYTES, PAGE_SIZE, RECORD_BYTES, SCALE_BYTES, SCALE_OFFSET
from atom_mxfp4.index_k import FP8_DATA_BYTES, FP8_RECORD_BYTES, FP8_SCALE_BYTES, dequantize_fp8


def read_pages(records: torch.Tensor, page_ids: torch.Tensor) -> torch.Tensor:
    """Dequantize whole folded pages.

    records [pages, heads, 8704] uint8; page_ids [...] int (folded ids ``page * heads + head``)
    -> values [..., 128 tokens, 128] fp32.
    """
    flat = records.reshape(-1, RECORD_BYTES)[page_ids.long()]  # [..., 8704]
    data = flat[..., :SCALE_OFFSET].reshape(*page_ids.shape, PAGE_SIZE, DATA_BYTES)
    scale = flat[..., SCALE_OFFSET:].reshape(*page_ids.shape, PAGE_SIZE, SCALE_BYTES)
    return dequantize_mxfp4(data, scale)


def read_fp8_pages(records: torch.Tensor, page_ids: torch.Tensor) -> torch.Tensor:
    """Dequantize whole fp8 index-K pages: records [pages, 1, 16896] uint8, page_ids [...] int -> [..., 128, 128]
    fp32 (atom_mxfp4.index_k: e4m3 bytes, one e8m0 scale per 32)."""
    flat = records.reshape(-1, FP8_RECORD_BYTES)[page_ids.long()]  # [..., 16896]
    data = flat[..., : PAGE_SIZE * FP8_DATA_BYTES].reshape(*page_ids.shape, PAGE_SIZE, FP8_DATA_BYTES)
    scale = flat[..., PAGE_SIZE * FP8_DATA_BYTES :].reshape(*page_ids.shape, PAGE_SIZE, FP8_SCALE_BYTES)
    return dequantize_fp8(data, scale)
