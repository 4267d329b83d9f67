"""The paged MXFP4 cache layout (DESIGN §4): records, views, folding, capacity."""

from __future__ import annotations


import pytest
import torch

import _helpers as H

from atom_mxfp4 import cache as C
from atom_mxfp4.cache import MXFP4PageCache
from atom_mxfp4.layout import PAGE_SIZE, RECORD_BYTES


def test_constants():
    assert PAGE_SIZE == 128
    assert RECORD_BYTES == 8704 == 128 * 64 + 128 * 4


@pytest.mark.parametrize("pages, heads", [(1, 1), (3, 4), (5, 2)])
def test_records_zero_filled_and_views_share_storage(pages, heads):
    c = MXFP4PageCache(pages, heads)
    assert c.records.shape == (pages, heads, 8704) and c.records.dtype == torch.uint8
    assert c.records.is_contiguous() and (c.records == 0).all()
    assert c.num_pages == pages and c.num_heads == heads and c.device == torch.device("cpu")
    assert c.nbytes == pages * heads * 8704
    data, scale = c.data, c.scale
    assert data.shape == (pages, heads, 128, 64) and data.dtype == torch.uint8
    assert scale.shape == (pages, heads, 128, 4) and scale.dtype == torch.uint8
    # same page and head strides (in bytes = elements for uint8), page stride 8704 * heads, head stride 8704
    assert data.stride() == (8704 * heads, 8704, 64, 1)
    assert scale.stride() == (8704 * heads, 8704, 4, 1)
    assert (8704 * heads) % 16 == 0 and 8704 % 16 == 0
    base = c.records.data_ptr()
    assert data.data_ptr() == base  # data first
    assert scale.data_ptr() == base + 128 * 64  # then scales
    assert data.untyped_storage().data_ptr() == scale.untyped_storage().data_ptr() == base


def test_views_alias_the_record_bytes():
    pages, heads = 3, 2
    c = MXFP4PageCache(pages, heads)
    gen = torch.Generator().manual_seed(1)
    # write through the views, read back by raw byte offsets (DESIGN §4)
    for p in range(pages):
        for h in range(heads):
            for off in (0, 1, 77, 127):
                d, s = H.random_codes(gen, 1)
                c.data[p, h, off] = d[0]
                c.scale[p, h, off] = s[0]
                rd, rs = H.token_bytes(c.records, p, h, off)
                assert torch.equal(rd, d[0]) and torch.equal(rs, s[0])
    # and the other way round: raw bytes show up in the views
    c.records[2, 1, 8192 + 5 * 4 + 3] = 201
    assert c.scale[2, 1, 5, 3].item() == 201
    c.records[1, 0, 100 * 64 + 63] = 77
    assert c.data[1, 0, 100, 63].item() == 77


def test_fold_heads_page_ids():
    pages, heads = 4, 3
    c = MXFP4PageCache(pages, heads)
    c.records.copy_(torch.randint(0, 256, c.records.shape, dtype=torch.int32).to(torch.uint8))
    f = c.fold_heads()
    assert f.num_pages == pages * heads and f.num_heads == 1
    assert f.records.shape == (pages * heads, 1, 8704)
    assert f.records.data_ptr() == c.records.data_ptr()  # a view, no copy
    assert f.data.shape == (pages * heads, 1, 128, 64) and f.scale.shape == (pages * heads, 1, 128, 4)
    for p in range(pages):
        for h in range(heads):
            fid = p * heads + h
            assert torch.equal(f.data[fid, 0], c.data[p, h])
            assert torch.equal(f.scale[fid, 0], c.scale[p, h])
    f.data[2 * heads + 1, 0, 3, 4] = 9  # writes through
    assert c.data[2, 1, 3, 4].item() == 9


def test_index_k_cache_is_one_head():
    c = MXFP4PageCache(6)
    assert c.num_heads == 1 and c.records.shape == (6, 1, 8704)


def test_for_tokens_rounds_up_to_pages():
    assert MXFP4PageCache.for_tokens(1).num_pages == 1
    assert MXFP4PageCache.for_tokens(128).num_pages == 1
    assert MXFP4PageCache.for_tokens(129, num_heads=2).num_pages == 2
    assert MXFP4PageCache.for_tokens(2049, num_heads=4).records.shape == (17, 4, 8704)


def test_wraps_existing_records_without_copy():
    rec = torch.zeros(2, 3, 8704, dtype=torch.uint8)
    c = MXFP4PageCache(2, 3, records=rec)
    assert c.records.data_ptr() == rec.data_ptr()


@pytest.mark.parametrize("bad, exc", [
    (torch.zeros(2, 3, 4352, dtype=torch.uint8), ValueError),  # page size 64 records
    (torch.zeros(2, 8704, dtype=torch.uint8), ValueError),  # no head dim
    (torch.zeros(2, 3, 8704, dtype=torch.int8), TypeError),  # wrong dtype
])
def test_bad_records_refused(bad, exc):
    with pytest.raises(exc) as ei:
        MXFP4PageCache(2, 3, records=bad)
    H.err_names(ei, "records")


def test_capacity_helpers():
    # K + V bytes per token per KV head: 2 * (64 + 4) = 136; bf16 2 * 256 = 512; fp8 2 * 128 = 256
    assert C.kv_bytes_per_token("mxfp4") == 136
    assert C.kv_bytes_per_token("bf16") == 512
    assert C.kv_bytes_per_token("fp8") == 256
    assert C.kv_bytes_per_token("mxfp4", kv_heads=4) == 544
    assert C.capacity_ratio("bf16") == pytest.approx(512 / 136) and round(C.capacity_ratio("bf16"), 2) == 3.76
    assert C.capacity_ratio("fp8") == pytest.approx(256 / 136)
    gib = 1 << 30
    # mxfp4 whole pages: K and V records of 8704 B per head per page
    pages = gib // (2 * 8704)
    assert C.tokens_that_fit(gib, "mxfp4") == pages * 128
    assert C.tokens_that_fit(gib, "bf16") == gib // 512
    assert C.tokens_that_fit(gib, "fp8", kv_heads=2) == gib // 512
    assert C.tokens_that_fit(2 * 8704 - 1, "mxfp4") == 0
    # the same memory holds ~3.76x the tokens of bf16
    assert C.tokens_that_fit(gib, "mxfp4") / C.tokens_that_fit(gib, "bf16") == pytest.approx(3.76, abs=0.01)
    with pytest.raises(ValueError) as ei:
        C.kv_bytes_per_token("int4")
    H.err_names(ei, "dtype")
