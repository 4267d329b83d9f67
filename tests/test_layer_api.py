"""SparseMXFP4Attention options used by runners: ``check=False`` (CUDA-graph capture) and shared RoPE tables."""

import pytest
import torch

from atom_mxfp4 import checked as checked_values, ops
from atom_mxfp4.layer import AttentionMetadata, LayerCaches, LayerConfig, SparseMXFP4Attention
from atom_mxfp4.synthetic import make_request, make_weights


@pytest.mark.parametrize("sparse", [True, False], ids=["sparse", "dense"])
def test_check_false_skips_validation_and_gives_the_same_output(sparse, monkeypatch):
    config = LayerConfig(sparse=sparse, topk=4, max_position=1024)
    weights = make_weights(config, seed=3)
    request = make_request(config, 300, needles=[40], seek_from=290, seed=3)
    block_table = torch.tensor([[5, 1, 3]], dtype=torch.int32)
    meta = AttentionMetadata.for_requests(block_table, [0], [300])
    layer = SparseMXFP4Attention(config, weights, backend="torch")
    checked = layer(request.qkv, meta, LayerCaches.allocate(config, 8))

    def no_value_checks(*args, **kwargs):
        raise AssertionError("a host-syncing value check ran under check=False")

    monkeypatch.setattr(ops, "_in_range", no_value_checks)
    unchecked = layer(request.qkv, meta, LayerCaches.allocate(config, 8), check=False)
    assert torch.equal(checked, unchecked)
    # check=True with the metadata it checked already (the next layer of the step): attributes only, no value check
    assert torch.equal(layer(request.qkv, meta, LayerCaches.allocate(config, 8)), checked)
    meta.positions.add_(0)  # an in-place write (torch bumps the version): the batch's values are checked again
    with pytest.raises(AssertionError, match="host-syncing"):
        layer(request.qkv, meta, LayerCaches.allocate(config, 8))
    checked_values.clear()
    fresh = AttentionMetadata.for_requests(block_table, [0], [300])  # a new batch: new tensors, checked again
    with pytest.raises(AssertionError, match="host-syncing"):
        layer(request.qkv, fresh, LayerCaches.allocate(config, 8))


def test_layers_share_one_rope_table():
    shared = {}
    sparse, dense = LayerConfig(max_position=512), LayerConfig(sparse=False, max_position=512)
    a = SparseMXFP4Attention(sparse, make_weights(sparse), rope_tables=shared)
    b = SparseMXFP4Attention(dense, make_weights(dense), rope_tables=shared)
    assert a.cos_sin_cache("cpu") is b.cos_sin_cache("cpu")
    key = (torch.device("cpu"), 64, 5e6, 512)  # (device, rotary_dim, rope_theta, max_position)
    assert list(shared) == [key] and shared[key].shape == (512, 64)
    own = SparseMXFP4Attention(sparse, make_weights(sparse))
    assert own.cos_sin_cache("cpu") is not a.cos_sin_cache("cpu")
    assert torch.equal(own.cos_sin_cache("cpu"), a.cos_sin_cache("cpu"))
