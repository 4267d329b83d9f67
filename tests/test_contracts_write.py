"""fused_qknorm_rope_write on inputs at the edges of its contract (issue 11), on every backend: the layout of every
tensor the kernel reads by pointer (docs/api.md "Input contracts"), eps, and slots written twice.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import pytest

from atom_mxfp4 import ops

import _helpers as H

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
BACKENDS = ["torch", "triton"]
NQ, NKV, NIQ, PAGES = 4, 1, 1, 2
WIDTH = (NQ + 2 * NKV + NIQ + 1) * 128
WEIGHTS = ("q_norm_weight", "k_norm_weight", "idx_q_norm_weight", "idx_k_norm_weight")


def write_inputs(seed, tokens=5):
    gen = torch.Generator().manual_seed(seed)
    angles = torch.rand(16, 32, generator=gen) * 6
    return dict(qkv=(torch.randn(tokens, WIDTH, generator=gen) * 2).bfloat16(),
                positions=torch.randint(0, 16, (tokens,), generator=gen),
                **{name: (torch.randn(128, generator=gen) * 0.3).bfloat16() for name in WEIGHTS},
                cos_sin_cache=torch.cat([angles.cos(), angles.sin()], 1).contiguous(),
                slot_mapping=torch.randperm(PAGES * 128, generator=gen)[:tokens])


def run_write(backend, inputs, check=True, **kwargs):
    """(q, idx_q, k, v, index_k) on the CPU after one write into fresh caches."""
    caches = [torch.zeros(PAGES, h, H.RECORD, dtype=torch.uint8, device=DEVICE) for h in (NKV, NKV, 1)]
    x = {name: H.to_device(t, DEVICE) for name, t in inputs.items()}
    q, idx_q = ops.fused_qknorm_rope_write(
        x["qkv"], x["positions"], *(x[name] for name in WEIGHTS), x["cos_sin_cache"], x["slot_mapping"], *caches,
        num_q_heads=NQ, num_kv_heads=NKV, num_index_heads=NIQ, backend=backend, check=check, **kwargs)
    return [t.cpu() for t in (q, idx_q, *caches)]


def strided(tensor):
    """The same values as a view with stride 2 along the last dimension."""
    wide = torch.zeros(*tensor.shape[:-1], 2 * tensor.shape[-1], dtype=tensor.dtype)
    wide[..., ::2] = tensor
    return wide[..., ::2]


@pytest.mark.parametrize("name", list(WEIGHTS) + ["positions", "slot_mapping", "cos_sin_cache"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_strided_pointer_inputs_are_refused(backend, name):
    """A weight / positions / slots / RoPE table read by pointer: a strided view is refused under check=True, and by
    the Triton launcher under check=False too (it used to be read as if dense: wrong K, index-K and q bytes)."""
    inputs = write_inputs(1)
    inputs[name] = strided(inputs[name])
    with pytest.raises(ValueError) as ei:
        run_write(backend, inputs)
    H.err_names(ei, name, "contiguous")
    if backend == "triton":
        with pytest.raises(ValueError) as ei:
            run_write(backend, inputs, check=False)
        H.err_names(ei, name)


@pytest.mark.parametrize("backend", BACKENDS)
def test_row_strided_qkv_equals_its_contiguous_copy(backend):
    """qkv may be a column slice of a wider projection (row stride > width): same bytes and q as the copy, and the
    Triton results equal the torch ones bit for bit."""
    inputs = write_inputs(2)
    wide = torch.randn(inputs["qkv"].shape[0], WIDTH + 384).bfloat16()
    wide[:, 128:128 + WIDTH] = inputs["qkv"]
    sliced = dict(inputs, qkv=wide[:, 128:128 + WIDTH])
    assert sliced["qkv"].stride(0) == WIDTH + 384
    got, want = run_write(backend, sliced), run_write("torch", inputs)
    for name, a, b in zip(("q", "idx_q", "k_cache", "v_cache", "index_k_cache"), got, want):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("eps", [float("inf"), float("nan"), 0.0, -1e-6, True, "1e-6"])
def test_eps_refusals(eps):
    with pytest.raises(ValueError) as ei:
        run_write("torch", write_inputs(3), eps=eps)
    H.err_names(ei, "eps")


def test_int_eps_is_a_number():
    assert all(torch.equal(a, b) for a, b in zip(run_write("torch", write_inputs(3), eps=1),
                                                 run_write("torch", write_inputs(3), eps=1.0)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_slot_written_twice_is_refused_and_nothing_is_written(backend):
    """Which of two tokens wins one slot differs between backends: refused (slot -1 may repeat)."""
    inputs = write_inputs(4)
    inputs["slot_mapping"] = torch.tensor([7, -1, 130, -1, 7])
    with pytest.raises(ValueError) as ei:
        run_write(backend, inputs)
    H.err_names(ei, "slot_mapping", "slot 7", "[0, 4]")
    inputs["slot_mapping"] = torch.tensor([7, -1, 130, -1, 8])
    run_write(backend, inputs)  # -1 repeats freely
