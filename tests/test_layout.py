"""The ground floor (atom_mxfp4.layout) against DESIGN §2-4's literal values, and RoPE (atom_mxfp4.rope) against the
oracle's own angles: a wrong RoPE must show up as a layer-vs-oracle mismatch."""


import pytest
import torch

from atom_mxfp4 import layout, reference, rope
from atom_mxfp4.layer import LayerConfig


def test_geometry_is_designs():
    assert (layout.HEAD_DIM, layout.PAGE_SIZE, layout.BLOCK, layout.MAX_GROUP) == (128, 128, 32, 16)
    assert (layout.DATA_BYTES, layout.SCALE_BYTES, layout.TOKEN_BYTES) == (64, 4, 68)
    assert (layout.SCALE_OFFSET, layout.RECORD_BYTES) == (8192, 8704) and layout.RECORD_BYTES % 16 == 0
    assert (layout.NO_SLOT, layout.NO_BLOCK, layout.UNUSED_PAGE) == (-1, -1, 0)
    assert layout.INIT_KEY > layout.LOCAL_KEY > layout.POS_INF_KEY == 0x7F800000


@pytest.mark.parametrize("nq,nkv,niq", [(16, 1, 1), (64, 4, 4), (8, 2, 0), (3, 3, 2)])
def test_qkv_row_map(nq, nkv, niq):
    rows = layout.qkv_rows(nq, nkv, niq)
    # [q (nq) | k (nkv) | v (nkv) | idx_q (niq) | idx_k (1 if niq)]
    want = [("q", nq), ("k", nkv), ("v", nkv), ("idx_q", niq), ("idx_k", 1 if niq else 0)]
    start = 0
    for name, count in want:
        assert getattr(rows, name) == slice(start, start + count), name
        start += count
    assert layout.qkv_width(nq, nkv, niq) == (nq + 2 * nkv + niq + (niq > 0)) * 128 == rows.width


def test_views_share_storage():
    records = torch.arange(2 * 3 * 8704, dtype=torch.int64).remainder(251).to(torch.uint8).view(2, 3, 8704)
    assert layout.data_view(records)[1, 2, 5, 7] == records[1, 2, 5 * 64 + 7]
    assert layout.scale_view(records)[1, 2, 5, 3] == records[1, 2, 8192 + 5 * 4 + 3]


@pytest.mark.parametrize("rotary_dim,theta", [(64, 5e6), (32, 1e4), (128, 10.0)])
def test_rope_table_matches_the_oracles_angles(rotary_dim, theta):
    table = rope.rope_cos_sin(4096, rotary_dim, theta, dtype=torch.float64)
    angles = reference._angles(torch.arange(4096), rotary_dim, theta)
    assert torch.allclose(table, torch.cat((angles.cos(), angles.sin()), -1), atol=1e-9, rtol=0)


def test_rope_apply_matches_the_oracle():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(37, 3, 128, generator=gen, dtype=torch.float64)
    positions = torch.randint(0, 4096, (37,), generator=gen)
    table = rope.rope_cos_sin(4096, 64, 5e6, dtype=torch.float64)
    got = rope.apply_rope_neox(x, table[positions], 64)
    assert torch.allclose(got, reference._rope(x, positions, 64, 5e6), atol=1e-9, rtol=0)


def test_a_wrong_rope_fails_the_layer_vs_oracle_check(monkeypatch):
    """The layer's RoPE table built with a wrong theta: the layer-vs-oracle check of tests/test_layer.py fails."""
    import test_layer as TL

    from atom_mxfp4 import layer as layer_module

    config = LayerConfig(**TL.CONFIGS["dense_tp4"], max_position=512)
    reqs, weights = TL.make_requests(config, [300], seed=31)
    run = TL.Run(config, reqs, weights, seed=32)
    out, topk, spans = run.step([300])
    TL.check_step(run, weights, out, topk, spans, config.scale_mode)  # the right RoPE passes

    right = rope.rope_cos_sin
    monkeypatch.setattr(layer_module, "rope_cos_sin", lambda n, dim, theta, **kw: right(n, dim, theta * 1.01, **kw))
    run = TL.Run(config, reqs, weights, seed=32)
    out, topk, spans = run.step([300])
    with pytest.raises(AssertionError, match="rel-L2"):
        TL.check_step(run, weights, out, topk, spans, config.scale_mode)
