"""pa_decode on inputs that pass validation but sit at the edges of its contract (issue 11), on every backend:
query_scale 0 / numbers / tensors (valid values, layout), and non-finite or huge q (docs/api.md "Non-finite
logits"). The Triton backend runs both its direct and its split-KV paths.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import numpy as np
import pytest

from atom_mxfp4 import ops

import _helpers as H

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# (backend, Triton split count): torch; Triton direct (one program per row); Triton split-KV (one page per split)
VARIANTS = [("torch", None), ("triton", 1), ("triton", 3)]
VARIANT_IDS = ["torch", "triton-direct", "triton-split"]
SCALE = 128 ** -0.5
HUGE = 1e38  # a finite bf16 whose product with any key of magnitude >= 4 overflows fp32


def run_decode(variant, q, k, v, tables, lens, query_scale=None, check=True):
    backend, splits = variant
    plan = None
    if backend == "triton":
        from atom_mxfp4.kernels.triton.pa_decode import make_plan
        plan = make_plan(q.shape[0], tables.shape[1], q.shape[1], DEVICE, num_splits=splits)
    out = torch.full(q.shape, 7.0, dtype=torch.bfloat16, device=DEVICE)  # poisoned
    if isinstance(query_scale, torch.Tensor):
        query_scale = H.to_device(query_scale, DEVICE)
    q, k, v, tables, lens = (H.to_device(t, DEVICE) for t in (q, k, v, tables, lens))
    ops.pa_decode(out, q, k, v, tables, lens,
                  softmax_scale=SCALE, query_scale=query_scale, plan=plan, backend=backend, check=check)
    return out.float().cpu()


def test_the_device_copy_keeps_strides():
    """The contract tests move their inputs with H.to_device: a strided input must stay strided on the GPU (a plain
    .to() copies a non-dense tensor contiguously there, and the refusal tests then pass nothing: checked here on the
    meta device, where .to() does the same)."""
    for t in (torch.ones(2, 2, 256)[:, :, ::2], torch.ones(4, 300)[:, 10:110], torch.ones(6)[::2]):
        assert t.to("meta").is_contiguous()  # the trap
        moved = H.to_device(t, "meta")
        assert moved.device.type == "meta" and moved.shape == t.shape and moved.stride() == t.stride()
    expanded = H.to_device(torch.ones(3, 1).expand(3, 4), "meta")
    assert expanded.shape == (3, 4) and expanded.stride() == (1, 0)
    here = torch.ones(6)[::2]
    assert H.to_device(here, "cpu") is here


def three_page_rows(gen, rows=3):
    """Each row its own 3 pages. K page 0 of every row has dim 0 = -6, pages 1-2 dim 0 = 0; values random."""
    keys = torch.randint(-4, 5, (rows * 3, 128, 128), generator=gen).float() / 2
    keys.view(rows, 3, 128, 128)[:, 0, :, 0] = -6.0
    keys.view(rows, 3, 128, 128)[:, 1:, :, 0] = 0.0
    values = torch.randn(rows * 3, 128, 128, generator=gen)
    k, v = H.records_from_values(keys), H.records_from_values(values)
    tables = torch.arange(rows * 3, dtype=torch.int32).view(rows, 3)
    return k, v, tables


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_query_scale_zero_is_uniform_attention(variant):
    """0 is a valid scale (all logits 0): every head of a row is the mean of V over its tokens, for a number and a
    tensor alike (the Triton backend used to read the number 0.0 as 1.0)."""
    gen = torch.Generator().manual_seed(1)
    k, v, tables = three_page_rows(gen)
    lens = torch.tensor([300, 1, 129], dtype=torch.int32)
    q = torch.randn(3, 4, 128, generator=gen).bfloat16() * 8
    for query_scale in (0.0, 0, torch.zeros(3)):
        got = run_decode(variant, q, k, v, tables, lens, query_scale)
        for r, n in enumerate(lens.tolist()):
            mean = H.gather_row_tokens(v, tables[r].tolist(), n).mean(0)
            assert rel(got[r].numpy(), np.broadcast_to(mean, (4, 128))) < H.ATTN_REL_TOL, (query_scale, r)


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_query_scale_number_and_tensor_agree_with_fp64(variant):
    gen = torch.Generator().manual_seed(2)
    k, v, tables = three_page_rows(gen)
    lens = torch.tensor([384, 77, 200], dtype=torch.int32)
    q = torch.randn(3, 4, 128, generator=gen).bfloat16()
    want = H.attention_rows(q.double().numpy() * 0.37, k, v, tables, lens, SCALE)
    for query_scale in (0.37, torch.full((3,), 0.37)):
        assert rel(run_decode(variant, q, k, v, tables, lens, query_scale).numpy(), want) < H.ATTN_REL_TOL


@pytest.mark.parametrize("bad, exc", [(float("nan"), ValueError), (float("inf"), ValueError), (-0.5, ValueError),
                                      (True, TypeError), ("1", TypeError)])
def test_query_scale_number_refusals(bad, exc):
    gen = torch.Generator().manual_seed(3)
    k, v, tables = three_page_rows(gen)
    with pytest.raises(exc) as ei:
        run_decode(("torch", None), torch.zeros(3, 4, 128).bfloat16(), k, v, tables,
                   torch.ones(3, dtype=torch.int32), bad)
    H.err_names(ei, "query_scale")


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_query_scale_tensor_refusals(variant):
    gen = torch.Generator().manual_seed(4)
    k, v, tables = three_page_rows(gen)
    q, lens = torch.zeros(3, 4, 128).bfloat16(), torch.ones(3, dtype=torch.int32)
    for value, row in ((float("nan"), 1), (float("-inf"), 2), (-1.0, 0)):
        scale = torch.ones(3)
        scale[row] = value
        with pytest.raises(ValueError) as ei:
            run_decode(variant, q, k, v, tables, lens, scale)
        H.err_names(ei, "query_scale", f"row {row}")
    strided = torch.ones(6)[::2]  # run_decode moves it with its stride (H.to_device)
    with pytest.raises(ValueError) as ei:
        run_decode(variant, q, k, v, tables, lens, strided)
    H.err_names(ei, "query_scale", "contiguous")


def test_triton_refuses_a_strided_query_scale_even_unchecked():
    """check=False skips validation, but the Triton launcher never reads a strided tensor as if it were dense."""
    gen = torch.Generator().manual_seed(5)
    k, v, tables = three_page_rows(gen)
    with pytest.raises(ValueError) as ei:
        run_decode(("triton", 1), torch.zeros(3, 4, 128).bfloat16(), k, v, tables, torch.ones(3, dtype=torch.int32),
                   torch.ones(6)[::2], check=False)
    H.err_names(ei, "query_scale")


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_non_finite_and_huge_q_follow_the_contract(variant):
    """docs/api.md: a NaN or +inf logit at an attended token -> that head's row is NaN; -inf logits -> weight 0;
    all logits -inf -> NaN; other heads of the same row are unaffected; context 0 -> zeros."""
    gen = torch.Generator().manual_seed(6)
    k, v, tables = three_page_rows(gen, rows=4)
    lens = torch.tensor([384, 384, 100, 0], dtype=torch.int32)
    q = torch.randn(4, 4, 128, generator=gen).bfloat16()
    q[:, 0] = 0
    q[0, 0, 0] = HUGE  # page 0: 1e38 * -6 = -inf (weight 0); pages 1-2: 1e38 * 0 = 0 -> mean of V there
    q[1, 0, 0] = -HUGE  # page 0: +inf logits -> NaN
    q[2, 0, 0] = HUGE  # only page 0 attended: every logit -inf -> NaN
    q[0, 2, 7] = float("nan")  # NaN q -> NaN logits -> NaN
    q[1, 3, 5] = float("inf")  # inf q: inf * k = +-inf or NaN (k = 0) at every token -> NaN
    got = run_decode(variant, q, k, v, tables, lens)

    mean_of_pages_1_2 = H.gather_row_tokens(v, tables[0].tolist(), 384)[128:].mean(0)
    assert rel(got[0, 0].numpy(), mean_of_pages_1_2) < H.ATTN_REL_TOL
    for r, h in ((1, 0), (2, 0), (0, 2), (1, 3)):
        assert bool(torch.isnan(got[r, h]).all()), f"row {r} head {h} must be NaN"
    assert bool((got[3] == 0).all()), "context 0 writes zeros"
    finite = [(0, 1), (0, 3), (1, 1), (1, 2), (2, 1), (2, 2), (2, 3)]
    want = H.attention_rows(q.double().numpy(), k, v, tables, lens, SCALE)
    for r, h in finite:
        assert rel(got[r, h].numpy(), want[r, h]) < H.ATTN_REL_TOL, f"row {r} head {h}"


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_an_unchecked_length_past_the_table_reads_as_the_whole_table(variant):
    """check=False skips the lengths-inside-the-table check (a device sync). A length past 128 x width must still
    read no table entry past the row and no partial slot past the row's: every backend reads it as the whole table
    (the reference's token mask does), a negative one as 0. Rows of 5 pages over 3 splits of 2 pages: the last split
    would reach entry 5 (the next row's first) and the merge a fourth split (the next row's first slot)."""
    gen = torch.Generator().manual_seed(7)
    rows, width = 3, 5
    k = H.records_from_values(torch.randint(-4, 5, (rows * width, 128, 128), generator=gen).float() / 2)
    v = H.records_from_values(torch.randn(rows * width, 128, 128, generator=gen))
    tables = torch.arange(rows * width, dtype=torch.int32).view(rows, width)
    q = torch.randn(rows, 4, 128, generator=gen).bfloat16()
    past = torch.tensor([(width + 2) * 128, -5, 2 ** 31 - 1], dtype=torch.int32)
    clamped = torch.tensor([width * 128, 0, width * 128], dtype=torch.int32)
    got = run_decode(variant, q, k, v, tables, past, check=False)
    want = run_decode(variant, q, k, v, tables, clamped)
    assert torch.equal(got, want), (got - want).abs().amax(dim=(1, 2))
    assert bool((got[1] == 0).all()), "a negative length attends nothing: zeros"
