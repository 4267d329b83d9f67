"""Reading tokens out of MXFP4 page records (DESIGN §4), shared by the torch ops."""

import torch

from atom_mxfp4.format import dequantize_mxfp4
from atom_mxfp4.layout import DATA_BYTES, PAGE_SIZE, RECORD_BYTES, SCALE_BYTES, SCALE_OFFSET


def read_pages(records: torch.Tensor, page_ids: torch.Tensor) -> torch.Tensor:
    """Dequantize whole folded pages.

    records [pages, heads, 8704] uint8; page_ids [...] int (folded ids ``page * heads + head``)
    -> values [..., 128 tokens, 128] fp32.
    """
    flat = records.reshape(-1, RECORD_BYTES)[page_ids.long()]  # [..., 8704]
    data = flat[..., :SCALE_OFFSET].reshape(*page_ids.shape, PAGE_SIZE, DATA_BYTES)
    scale = flat[..., SCALE_OFFSET:].reshape(*page_ids.shape, PAGE_SIZE, SCALE_BYTES)
    return dequantize_mxfp4(data, scale)
