"""The Hopper backend's host side on the CPU: the launcher's checks (argument, expected and actual value in every
message), the early return, and the split plan (graph-stable, covering the table). No kernel is launched here."""

from __future__ import annotations

import importlib

import pytest
import torch

pytest.importorskip("triton.experimental.gluon", reason="needs triton >= 3.6 (Gluon)")

import atom_mxfp4.kernels.hopper as hopper  # noqa: E402
from atom_mxfp4.kernels.hopper import layout as L  # noqa: E402
from atom_mxfp4.plan import sm_count, split_pages  # noqa: E402

P = importlib.import_module("atom_mxfp4.kernels.hopper.pa_decode")


def _args(rows=3, group=16, width=4, q_dtype=torch.bfloat16):
    pages = rows * width
    q = torch.zeros(rows, group, L.HEAD_DIM, dtype=q_dtype)
    out = torch.empty(rows, group, L.HEAD_DIM, dtype=torch.bfloat16)
    cache = torch.zeros(pages, 1, L.RECORD_BYTES, dtype=torch.uint8)
    tables = torch.arange(pages, dtype=torch.int32).view(rows, width)
    lens = torch.full((rows,), width * L.PAGE_SIZE, dtype=torch.int32)
    return dict(out=out, q=q, k_cache=cache, v_cache=cache.clone(), tables=tables, context_lens=lens)


def _call(args, plan=None, query_scale=None):
    return hopper.pa_decode(args["out"], args["q"], args["k_cache"], args["v_cache"], args["tables"],
                            args["context_lens"], softmax_scale=0.1, query_scale=query_scale, plan=plan)


def _message(excinfo, *names):
    text = str(excinfo.value)
    for name in names:
        assert name in text, text
    assert "got" in text, text
    return text


def test_group_above_16_is_refused():
    with pytest.raises(ValueError) as excinfo:
        _call(_args(group=17))
    _message(excinfo, "q.shape[1]", "<= 16", "17")


def test_query_dtype_is_checked():
    with pytest.raises(TypeError) as excinfo:
        _call(_args(q_dtype=torch.float32))
    _message(excinfo, "q.dtype", "torch.float32")


@pytest.mark.parametrize("name", ["q", "out", "tables", "context_lens"])
def test_tensors_read_by_pointer_must_be_contiguous(name):
    args = _args()
    tensor = args[name]
    args[name] = tensor.transpose(0, -1).contiguous().transpose(0, -1) if tensor.dim() > 1 else \
        torch.stack([tensor, tensor], 1)[:, 0]
    assert not args[name].is_contiguous()
    with pytest.raises(ValueError) as excinfo:
        _call(args)
    _message(excinfo, name, "contiguous", "strides")


@pytest.mark.parametrize("name", ["tables", "context_lens"])
def test_index_tensors_must_be_int32_even_unchecked(name):
    """The launcher reads them as int32 words: an int64 tensor (what positions often are) is refused, not misread."""
    args = _args()
    args[name] = args[name].long()
    with pytest.raises(TypeError) as excinfo:
        _call(args)
    _message(excinfo, f"{name}.dtype", "torch.int32", "torch.int64")


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.int32])
def test_query_scale_tensor_must_be_fp32_even_unchecked(dtype):
    """The kernel multiplies the logits by the row's query_scale as loaded: fp64 would turn that arithmetic fp64 (ops
    refuses it under check=True; the launcher under check=False too)."""
    args = _args()
    with pytest.raises(TypeError) as excinfo:
        _call(args, query_scale=torch.ones(3, dtype=dtype))
    _message(excinfo, "query_scale.dtype", "torch.float32", str(dtype))


def test_query_scale_tensor_must_be_contiguous():
    scale = torch.ones(3, 2)[:, 0]
    with pytest.raises(ValueError) as excinfo:
        _call(_args(), query_scale=scale)
    _message(excinfo, "query_scale", "contiguous")


@pytest.mark.parametrize("bad", ["width", "misaligned", "strided"])
def test_cache_layout_is_checked(bad):
    args = _args()
    if bad == "width":
        args["k_cache"] = torch.zeros(12, 1, L.RECORD_BYTES - 16, dtype=torch.uint8)
    elif bad == "misaligned":
        args["k_cache"] = torch.zeros(12 * L.RECORD_BYTES + 4, dtype=torch.uint8)[4:].view(12, 1, L.RECORD_BYTES)
    else:
        args["k_cache"] = torch.zeros(12, 2, L.RECORD_BYTES, dtype=torch.uint8)[:, :1]
    with pytest.raises(ValueError) as excinfo:
        _call(args)
    _message(excinfo, "k_cache layout", "8704")


def test_plan_must_cover_the_call_and_be_a_hopper_plan():
    args = _args()  # 3 rows, tables 4 wide
    with pytest.raises(ValueError) as excinfo:
        _call(args, plan=hopper.make_plan(2, 4, 16, "cpu"))
    _message(excinfo, "plan.num_rows", ">= q.shape[0] = 3", "2")
    with pytest.raises(ValueError) as excinfo:
        _call(args, plan=hopper.make_plan(3, 3, 16, "cpu"))
    _message(excinfo, "plan.max_table_width", ">= tables.shape[1] = 4", "3")
    from atom_mxfp4.kernels.triton.pa_decode import make_plan as triton_plan
    with pytest.raises(TypeError) as excinfo:
        _call(args, plan=triton_plan(3, 4, 16, "cpu"))
    _message(excinfo, "plan", "HopperDecodePlan", "TritonDecodePlan")


@pytest.mark.parametrize("rows,width", [(0, 4), (3, 0)])
def test_empty_input_writes_zeros_without_a_launch(rows, width):
    args = _args(rows=rows, width=width)
    args["out"].fill_(float("nan"))
    _call(args)
    assert torch.equal(args["out"], torch.zeros_like(args["out"]))


@pytest.mark.parametrize("rows,width", [(1, 1), (1, 64), (1, 1024), (8, 1024), (64, 256), (200, 16), (395, 3),
                                        (396, 64), (512, 64), (600, 4), (4096, 16), (17, 33)])
def test_split_plan_covers_the_table_and_depends_only_on_rows_and_width(rows, width):
    plan = hopper.make_plan(rows, width, 16, "cpu")
    assert plan.pages_per_split * plan.num_splits >= width > plan.pages_per_split * (plan.num_splits - 1)
    wave = P.DEFAULT_CONFIG.programs_per_sm * 132  # the CPU plan counts an H200's 132 SMs
    one_page = width <= P.ONE_PAGE_SPLIT_WIDTH and rows * width <= 132  # narrow tables: a page per program
    clustered = P.cluster_for(plan.config, rows, plan.num_splits, plan.device) > 1  # clustered: a page or more
    assert plan.num_splits == 1 or plan.pages_per_split >= (1 if one_page or clustered else P.MIN_PAGES_PER_SPLIT)
    assert rows * plan.num_splits <= max(wave, rows) and plan.num_splits <= P.MAX_SPLITS
    wanted = max(132 // rows, min(wave // rows, width // P.FILL_PAGES_PER_SPLIT))  # the policy, as docs/hopper.md says
    most = width if one_page else min(P.MAX_SPLITS, width // P.MIN_PAGES_PER_SPLIT)
    wanted = max(1, min(wanted, most))
    # clustered: the most of 64 / 48 / 32 / 16 splits, all non-empty, within half the SMs, if at least as many or
    # <= 4 pages each (docs/hopper.md "The split merge over a cluster")
    clustered = next((c for c in (64, 48, 32, 16) if rows * c <= 132 // 2 and split_pages(width, c)[0] == c), 0)
    if clustered and (clustered >= split_pages(width, wanted)[0] or width <= clustered * P.CLUSTER_PAGES_PER_SPLIT):
        wanted = clustered
    assert plan.num_splits == split_pages(width, wanted)[0]
    if width <= 1:  # no launch the plan covers splits: no workspace, no merge
        assert plan.part_out is None and plan.part_lse is None
    if plan.num_splits > 1:
        assert plan.part_out.shape[0] >= rows * plan.num_splits and plan.part_out.shape[1:] == (L.BLOCK_H, L.HEAD_DIM)
        assert plan.part_lse.shape == (plan.part_out.shape[0], L.BLOCK_H)
    assert plan.splits_for(rows, width) == (plan.num_splits, plan.pages_per_split)
    again = hopper.make_plan(rows, width, 16, "cpu")
    assert (again.num_splits, again.pages_per_split) == (plan.num_splits, plan.pages_per_split)


@pytest.mark.parametrize("rows,width,splits", [(1, 16, 16), (4, 16, 16), (8, 16, 16), (16, 16, 8), (32, 16, 4),
                                               (64, 16, 2), (128, 16, 2), (256, 16, 1), (1, 64, 64), (512, 64, 1),
                                               (64, 256, 6), (1, 1024, 64), (8, 1024, 49), (4, 256, 32), (1, 32, 32),
                                               (2, 32, 32), (1, 128, 64), (4, 64, 16)])
def test_split_policy_picks_the_sweeps_choices(rows, width, splits):
    """The H200 sweep's best (or within 4% of it) for these shapes (docs/hopper.md "Split policy", and "The split
    merge over a cluster": 1 x 64 pages at 64 clustered splits 7.83 us, at 32 9.29, at 16 10.64, at 32 through L2
    11.17; 1 x 32 and 2 x 32 at 32 clustered 7.73 / 7.77 against 7.91 / 8.38 at 16; 4 x 64 at 16 clustered 11.5
    against 12.8 at 32 through L2)."""
    assert hopper.make_plan(rows, width, 16, "cpu").num_splits == splits


def test_explicit_split_counts_are_clamped_to_the_table():
    plan = hopper.make_plan(2, 5, 16, "cpu", num_splits=64)
    assert plan.num_splits == 5 and plan.pages_per_split == 1
    assert hopper.make_plan(2, 5, 16, "cpu", num_splits=1).part_out is None


@pytest.mark.parametrize("rows,width", [(8, 64), (395, 64), (396, 64), (512, 64), (1000, 33), (4096, 16), (3, 7),
                                        (1, 2), (2, 3), (9, 16), (40, 20)])
def test_workspace_fits_every_launch_the_plan_covers(rows, width):
    """Every (rows', width') <= (rows, width) launch's rows' x splits fits the plan's workspace (brute force over the
    covered shapes, a stride through the larger ranges)."""
    plan = hopper.make_plan(rows, width, 16, "cpu")
    slots = 0 if plan.part_out is None else plan.part_out.shape[0]
    assert (plan.counters is None) == (plan.part_out is None)  # one arrival counter per row (the fused merge)
    if plan.counters is not None:
        assert plan.counters.shape == (rows * L.BLOCK_H,) and plan.counters.dtype == torch.int32
        assert not plan.counters.any()
    for r in sorted(set(range(1, min(rows, 64) + 1)) | set(range(1, rows + 1, 7)) | {rows}):
        for w in range(1, width + 1):
            splits, _ = plan.splits_for(r, w)
            assert splits == 1 or r * splits <= slots, (r, w, splits, slots)


def test_a_cuda_device_without_cuda_is_refused_with_the_reason(monkeypatch):
    """``usable`` names why it cannot run instead of raising from torch.cuda (a CUDA device named on a CPU build)."""
    from atom_mxfp4.kernels import hopper as backend
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "torch.cuda.is_available() is False" in backend.usable(torch.device("cuda", 0))
    assert "got device cpu" in backend.usable(torch.device("cpu"))


def test_split_policy_on_a_cuda_device_reads_its_sm_count(monkeypatch):
    """The policy on a CUDA device counts that device's SMs (a CPU plan assumes an H200's 132): exercised here with
    a stand-in device property, so the cuda branch runs without a GPU."""
    sm_count.cache_clear()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: type("P", (), {"multi_processor_count": 66}))
    try:
        cuda = torch.device("cuda", 0)
        assert P.num_splits_for(1, 16, cuda, 3) == 16 and P.num_splits_for(33, 16, cuda, 3) == 2  # 66 // 33
        assert P.num_splits_for(5, 16, cuda, 3) == 8  # 5 x 16 > 66 SMs: no one-page splits
        assert P.partial_slots(512, 64, cuda, P.DEFAULT_CONFIG, None) == 3 * 66
    finally:
        sm_count.cache_clear()


@pytest.mark.parametrize("rows,fused", [(1, True), (8, True), (32, True), (64, True), (128, False), (512, False)])
def test_sparse_attend_fuses_while_its_programs_fit_one_per_sm(rows, fused):
    """The H200 crossover (docs/hopper.md "One launch per layer"): run_bench's sparse shape (16 pages per row) runs
    as one launch up to batch 64 (rows x splits <= 132 SMs) and as tables + decode from batch 128; a plan gives the
    same answer as the policy."""
    cpu = torch.device("cpu")
    assert P.fuses_sparse(rows, 16, cpu) is fused
    assert P.fuses_sparse(rows, 16, cpu, hopper.make_plan(rows, 16, 16, cpu)) is fused


def test_sparse_attend_declines_where_it_does_not_fuse_and_checks_the_id_width():
    """Declining happens before any launch (None: atom_mxfp4.ops composes); index tensors the kernel offsets into in
    32 bits are bounded."""
    rows, topk = 512, 16
    q = torch.zeros(rows, 16, L.HEAD_DIM, dtype=torch.bfloat16)
    cache = torch.zeros(8, 1, L.RECORD_BYTES, dtype=torch.uint8)
    index = torch.zeros(rows, dtype=torch.int32)
    ids = torch.zeros(1, rows, topk, dtype=torch.int32)
    table = torch.zeros(1, 16, dtype=torch.int32)
    kw = dict(num_kv_heads=1, topk_blocks=ids, pages_per_block=1, softmax_scale=0.1, query_scale=None, plan=None)
    assert P.attend(torch.empty_like(q), q, cache, cache.clone(), table, index, index, **kw) is None
    with pytest.raises(ValueError) as e:
        P.attend(torch.empty_like(q), q, cache, cache.clone(), table, index, index,
                 **{**kw, "topk_blocks": ids[:, :256].contiguous()})
    _message(e, "topk_blocks.shape[:2]")


@pytest.mark.parametrize("sparse", [False, True])
def test_attend_over_an_empty_block_table_writes_zeros_without_a_launch(sparse):
    """No request holds a page (only reachable unchecked): zeros, and no read clamped to a row that has no entry."""
    rows = 3
    q = torch.zeros(rows, 16, L.HEAD_DIM, dtype=torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    cache = torch.zeros(2, 1, L.RECORD_BYTES, dtype=torch.uint8)
    index = torch.zeros(rows, dtype=torch.int32)
    ids = torch.full((1, rows, 4), -1, dtype=torch.int32) if sparse else None
    ran = P.attend(out, q, cache, cache.clone(), torch.zeros(1, 0, dtype=torch.int32), index, index, num_kv_heads=1,
                   topk_blocks=ids, pages_per_block=1, softmax_scale=0.1, query_scale=None, plan=None)
    assert ran is out and torch.equal(out, torch.zeros_like(out))


# ---- index_topk (atom_mxfp4/kernels/hopper/index_topk.py): which calls the Gluon scorer takes, its own checks --------
def test_index_scorer_takes_bf16_up_to_8_heads_only():
    from atom_mxfp4.kernels.hopper.index_topk import native
    q = torch.zeros(3, 1, 128, dtype=torch.bfloat16)  # either index-K dtype: the call's idx_q decides
    assert native(q)
    assert native(torch.zeros(3, 8, 128, dtype=torch.bfloat16))
    assert not native(torch.zeros(3, 9, 128, dtype=torch.bfloat16))  # 9..16 heads: Triton
    assert not native(q.float()) and not native(q.half())  # an fp32 dot: Triton


def test_index_scorer_checks_its_chunk_size_before_any_launch():
    from atom_mxfp4.index_k import FP8_RECORD_BYTES
    q = torch.zeros(2, 1, 128, dtype=torch.bfloat16)
    cache = torch.zeros(4, 1, FP8_RECORD_BYTES, dtype=torch.uint8)
    table = torch.arange(4, dtype=torch.int32).view(1, 4)
    rows = torch.zeros(2, dtype=torch.int32)
    for bad in (0, 65):
        with pytest.raises(ValueError) as excinfo:
            hopper.index_topk(q, cache, table, rows, rows, topk=2, init_blocks=0, local_blocks=1,
                              index_k_dtype="fp8", config=hopper.IndexConfig(blocks_per_program=bad))
        _message(excinfo, "config.blocks_per_program", "[1, 64]", str(bad))
    for bad in (1, 9):
        with pytest.raises(ValueError) as excinfo:
            hopper.index_topk(q, cache, table, rows, rows, topk=2, init_blocks=0, local_blocks=1,
                              index_k_dtype="fp8", config=hopper.IndexConfig(stages=bad))
        _message(excinfo, "config.stages", "[2, 8]", str(bad))
    with pytest.raises(ValueError) as excinfo:  # the shared launch invariants (the Triton scorer's checks)
        hopper.index_topk(q, cache[:, :, :100], table, rows, rows, topk=2, init_blocks=0, local_blocks=1,
                          index_k_dtype="fp8")
    _message(excinfo, "index_k_cache", "16896")


def test_index_scorer_refuses_a_cache_off_16_byte_alignment_even_unchecked():
    """The scorer copies records with 16-byte cp.async from the cache's int32 view: a cache view at another offset
    (possible under ops' check=False, and accepted by the Triton scorer, which reads bytes) is refused by name before
    any launch (a 1-byte offset used to fail in torch's int32 view without naming it, a 4-byte one to reach the
    copies), as the Hopper pa_decode refuses its caches (tests/test_layout_sweep.py runs every layout on the GPU)."""
    from atom_mxfp4.index_k import FP8_RECORD_BYTES
    q = torch.zeros(2, 1, 128, dtype=torch.bfloat16)
    table = torch.arange(4, dtype=torch.int32).view(1, 4)
    rows = torch.zeros(2, dtype=torch.int32)
    flat = torch.zeros(4 * FP8_RECORD_BYTES + 16, dtype=torch.uint8)
    for shift in (1, 4, 8):
        cache = flat[shift:shift + 4 * FP8_RECORD_BYTES].view(4, 1, FP8_RECORD_BYTES)
        assert cache.is_contiguous()
        with pytest.raises(ValueError) as excinfo:
            hopper.index_topk(q, cache, table, rows, rows, topk=2, init_blocks=0, local_blocks=1, index_k_dtype="fp8")
        _message(excinfo, "index_k_cache", "16-byte aligned", f"storage offset {shift}")


def test_index_scorer_stage_policy():
    from atom_mxfp4.kernels.hopper.index_topk import stages_for
    assert stages_for(4, 256) == 2 and stages_for(64, 64) == 2 and stages_for(1, 1024) == 2  # measured faster at 2
    assert stages_for(256, 256) == 3 and stages_for(64, 256) == 3 and stages_for(16, 1024) == 3  # ... at 3
    from atom_mxfp4.index_k import IndexKDtype
    assert all(stages_for(r, b, IndexKDtype.MXFP4) == 2 for r, b in ((1, 64), (256, 256), (256, 1024)))


def test_index_launchers_refuse_index_tensors_that_are_not_int32_even_unchecked():
    """Both scorers read block_table / row_request / row_position as int32 words; an int64 tensor (possible under
    ops' check=False) would be misread, so the launchers' own host-side checks refuse it (TypeError, naming it)."""
    import importlib
    from atom_mxfp4.index_k import FP8_RECORD_BYTES
    triton_index = importlib.import_module("atom_mxfp4.kernels.triton.index_topk")
    q = torch.zeros(2, 1, 128, dtype=torch.bfloat16)
    cache = torch.zeros(4, 1, FP8_RECORD_BYTES, dtype=torch.uint8)
    table = torch.arange(4, dtype=torch.int32).view(1, 4)
    rows = torch.zeros(2, dtype=torch.int32)
    for name, args in (("block_table", (table.long(), rows, rows)), ("row_request", (table, rows.long(), rows)),
                       ("row_position", (table, rows, rows.long()))):
        for scorer in (hopper.index_topk, triton_index.index_topk):
            with pytest.raises(TypeError) as excinfo:
                scorer(q, cache, *args, topk=2, init_blocks=0, local_blocks=1, index_k_dtype="fp8")
            _message(excinfo, f"{name}.dtype", "torch.int32", "torch.int64")


def test_index_scorer_early_returns_without_a_launch():
    """No rows: an empty result; a zero-width block table: every id -1 (as the Triton scorer), on the CPU (no
    launch)."""
    from atom_mxfp4.index_k import FP8_RECORD_BYTES
    cache = torch.zeros(4, 1, FP8_RECORD_BYTES, dtype=torch.uint8)
    none = torch.zeros(0, dtype=torch.int32)
    out = hopper.index_topk(torch.zeros(0, 1, 128, dtype=torch.bfloat16), cache, torch.zeros(1, 4, dtype=torch.int32),
                            none, none, topk=3, init_blocks=0, local_blocks=1, index_k_dtype="fp8")
    assert out.shape == (1, 0, 3)
    rows = torch.zeros(2, dtype=torch.int32)
    out = hopper.index_topk(torch.zeros(2, 1, 128, dtype=torch.bfloat16), cache, torch.zeros(1, 0, dtype=torch.int32),
                            rows, rows, topk=3, init_blocks=0, local_blocks=1, index_k_dtype="fp8")
    assert out.shape == (1, 2, 3) and bool((out == -1).all())


def test_the_policy_picks_8_warps_for_long_programs_one_per_sm():
    """The launch's warp count (``warps_for``, planned off-GPU for the H200's 132 SMs): 8 while rows x splits <= SMs
    and each split keeps >= EIGHT_WARP_MIN_PAGES pages, 4 otherwise; a forced count wins. The policy's own launches:
    1 x 1024 pages (64 splits of 16) and 16 x 64 (8 splits of 8) run 8 warps, 1 x 64 (32 splits of 2) and 128 x 16
    (2 splits, 256 programs) run 4."""
    cpu = torch.device("cpu")
    sms, pages = P.H200_SMS, P.EIGHT_WARP_MIN_PAGES
    assert P.warps_for(P.DEFAULT_CONFIG, sms, pages, cpu) == 8
    assert P.warps_for(P.DEFAULT_CONFIG, sms + 1, pages, cpu) == 4
    assert P.warps_for(P.DEFAULT_CONFIG, 1, pages - 1, cpu) == 4
    assert P.warps_for(P.HopperConfig(warps=4), 1, pages, cpu) == 4
    assert P.warps_for(P.HopperConfig(warps=8), sms + 1, 1, cpu) == 8
    for rows, width, want in ((1, 1024, 8), (16, 64, 8), (1, 64, 4), (128, 16, 4)):
        plan = P.make_plan(rows, width, 16, cpu)
        assert P.warps_for(plan.config, rows * plan.num_splits, plan.pages_per_split, cpu) == want, (rows, width)


@pytest.mark.parametrize("warps", [0, 2, 6, 16, 4.0])
def test_config_refuses_a_warp_count_it_has_no_maps_for(warps):
    with pytest.raises(ValueError, match="HopperConfig.warps"):
        P.HopperConfig(warps=warps)


def test_the_policy_merges_over_clusters_while_the_launch_fills_half_the_sms():
    """``cluster_for`` (planned off-GPU for the H200's 132 SMs): a launch of 4, 8 or 16 splits merges over clusters
    of its split count, one of G x 16 (G <= 4) over G clusters of 16 per row, while rows x splits <= SMs // 2; through
    L2 otherwise and for every other split count (2: measured no faster); a forced config wins wherever the split
    count allows a cluster. The policy's own
    launches: sparse batch 1 (16 one-page splits), 2 x 64 and 1 x 64 pages (16 splits) cluster by 16; sparse batch 8
    (16 splits, 128 programs), 16 x 64 (8 splits, 128 programs), 32 x 16 (4 splits, 128) and 128 x 64 merge through
    L2."""
    cpu, sms = torch.device("cpu"), P.H200_SMS
    assert P.cluster_for(P.DEFAULT_CONFIG, sms // 2 // 16, 16, cpu) == 16
    assert P.cluster_for(P.DEFAULT_CONFIG, sms // 2 // 16 + 1, 16, cpu) == 1
    assert [P.cluster_for(P.DEFAULT_CONFIG, 1, s, cpu) for s in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)] == [
        1, 1, 1, 4, 1, 8, 1, 16, 1, 16, 16, 16]  # 32 / 48 / 64: 2 / 3 / 4 clusters of 16 per row (grouped)
    assert P.cluster_for(P.DEFAULT_CONFIG, 2, 64, cpu) == 1  # 128 programs
    assert P.cluster_for(P.HopperConfig(cluster=True), 1, 80, cpu) == 1  # 5 groups > MAX_GROUPS
    assert P.cluster_for(P.HopperConfig(cluster=True), 1000, 4, cpu) == 4
    assert P.cluster_for(P.HopperConfig(cluster=True), 1, 2, cpu) == 2
    assert P.cluster_for(P.HopperConfig(cluster=True), 1, 3, cpu) == 1
    assert P.cluster_for(P.HopperConfig(cluster=False), 1, 16, cpu) == 1
    for rows, width, want in ((1, 16, 16), (2, 64, 16), (1, 64, 16), (8, 16, 1), (16, 64, 1), (32, 16, 1),
                              (128, 64, 1)):
        plan = P.make_plan(rows, width, 16, cpu)
        assert P.cluster_for(plan.config, rows, plan.num_splits, cpu) == want, (rows, width, plan.num_splits)


@pytest.mark.parametrize("cluster", [0, 1, "yes", 16])
def test_config_refuses_a_cluster_setting_that_is_not_a_bool(cluster):
    with pytest.raises(ValueError, match="HopperConfig.cluster"):
        P.HopperConfig(cluster=cluster)


@pytest.mark.parametrize("tail_splits", [1, 17, -3, True, 3.0, "3", None])
def test_config_refuses_a_tail_split_count_it_cannot_launch(tail_splits):
    with pytest.raises(ValueError) as excinfo:
        P.HopperConfig(tail_splits=tail_splits)
    _message(excinfo, "HopperConfig.tail_splits", "[2, 16]", repr(tail_splits))


TAIL = P.HopperConfig(tail_splits=3)
OFF = P.HopperConfig(tail_splits=0)
WAVE = TAIL.programs_per_sm * P.H200_SMS  # 396 off the GPU (the H200's SM count)


def test_the_default_config_runs_the_split_tail_of_3():
    assert P.DEFAULT_CONFIG.tail_splits == 3 and P.DEFAULT_CONFIG == TAIL


@pytest.mark.parametrize("rows,width,splits,source,want", [
    (512, 64, 1, P.SOURCE_TABLES, (396, 3, 22)),  # 1.29 waves: the last 116 rows as 3 splits of <= 22 pages
    (430, 9, 1, P.SOURCE_DENSE, (396, 3, 3)),
    (850, 2, 1, P.SOURCE_TABLES, (792, 2, 1)),  # a 2-page table splits 2 ways
    (4000, 16, 1, P.SOURCE_TABLES, (3960, 3, 6)),
    (528, 64, 1, P.SOURCE_TABLES, (396, 3, 22)),  # a last wave of 132 rows: one program per SM, the longest tail
    (529, 64, 1, P.SOURCE_TABLES, (529, 0, 0)),  # 133 rows: some SM holds two, the launch stays direct
    (600, 64, 1, P.SOURCE_TABLES, (600, 0, 0)),  # measured slower with the tail (both GPUs)
    (1024, 16, 1, P.SOURCE_TABLES, (1024, 0, 0)),
    (4096, 16, 1, P.SOURCE_TABLES, (4096, 0, 0)),  # a last wave of 136 rows
    (396, 64, 1, P.SOURCE_TABLES, (396, 0, 0)),  # one full wave: no tail
    (792, 64, 1, P.SOURCE_TABLES, (792, 0, 0)),  # two full waves
    (300, 64, 1, P.SOURCE_TABLES, (300, 0, 0)),  # less than a wave
    (512, 64, 2, P.SOURCE_TABLES, (512, 0, 0)),  # a launch the policy splits: no tail
    (512, 16, 1, P.SOURCE_SPARSE, (512, 0, 0)),  # the sparse one launch (fuses only within one program per SM)
    (512, 1, 1, P.SOURCE_TABLES, (512, 0, 0)),  # a one-page table cannot split
])
def test_the_split_tail_takes_a_last_wave_of_at_most_one_program_per_sm(rows, width, splits, source, want):
    assert P.tail_for(TAIL, rows, width, splits, source, torch.device("cpu")) == want
    assert P.tail_for(OFF, rows, width, splits, source, torch.device("cpu")) == (rows, 0, 0)  # off


@pytest.mark.parametrize("rows,width", [(397, 2), (512, 64), (1000, 33), (4096, 16), (800, 3)])
def test_the_split_tail_fits_the_workspace_of_every_launch_the_plan_covers(rows, width):
    """A plan made with the tail on holds every covered launch's tail partials ((rows' - tail_begin) x splits)."""
    plan = hopper.make_plan(rows, width, 16, "cpu", config=TAIL)
    slots = plan.part_out.shape[0]
    assert plan.counters.shape == (rows * L.BLOCK_H,)
    for r in sorted(set(range(WAVE - 2, rows + 1, 5)) | {rows}):
        for w in sorted({1, 2, 3, width // 2, width} - {0}):
            splits, _ = plan.splits_for(r, w)
            begin, tail, _ = P.tail_for(TAIL, r, w, splits, P.SOURCE_TABLES, torch.device("cpu"))
            assert (r - begin) * tail <= slots, (r, w, begin, tail, slots)


def test_the_split_tail_refuses_a_plan_whose_workspace_cannot_hold_it():
    """A plan made with the tail off, switched to it afterwards (``with_config``), may hold too few partial slots:
    refused by name before any launch (its 500 x 3 launch: 104 tail rows x 3 splits against 132 slots)."""
    args = _args(rows=500, width=3, group=16)
    args["k_cache"] = args["k_cache"][:1]  # no page is read: the refusal comes first
    args["v_cache"] = args["v_cache"][:1]
    args["tables"] = torch.zeros_like(args["tables"])
    plan = hopper.make_plan(500, 3, 16, "cpu", config=OFF)
    assert plan.part_out.shape[0] == 132
    with pytest.raises(ValueError) as excinfo:
        _call(args, plan=P.with_config(plan, TAIL))
    _message(excinfo, "plan workspace", ">= 312", "132")


def test_cluster_launch_passes_every_kernel_argument_in_the_kernels_order():
    """``_launch_clusters`` runs the compiled kernel with its arguments listed by the kernel's parameter names (as
    JITFunction.run does): the launcher's own compile signature (SIGNATURE) must name the same parameters in the
    same order, the cluster size among them."""
    assert list(P._pa_decode_kernel.arg_names) == list(P.SIGNATURE)
    assert "CLUSTER" in P.SIGNATURE


def test_the_policy_clusters_the_4_warp_program_only():
    """The 8-warp program takes a whole SM (a cluster of 16 needs 16 SMs of one GPC): the policy never clusters it,
    a forced config does."""
    cpu = torch.device("cpu")
    assert P.cluster_for(P.DEFAULT_CONFIG, 1, 16, cpu, warps=L.WARPS) == 16
    assert P.cluster_for(P.DEFAULT_CONFIG, 1, 16, cpu, warps=L.SMALL_BATCH_WARPS) == 1
    assert P.cluster_for(P.HopperConfig(cluster=True), 1, 16, cpu, warps=L.SMALL_BATCH_WARPS) == 16
    plan = P.make_plan(1, 1024, 16, cpu)  # 64 splits of 16 pages: 8 warps, merged through L2
    warps = P.warps_for(plan.config, plan.num_splits, plan.pages_per_split, cpu)
    assert (plan.num_splits, warps, P.cluster_for(plan.config, 1, plan.num_splits, cpu, warps)) == (64, 8, 1)


class _FakeKernel:
    """Stands in for the Gluon kernel on the CPU: records the launches ``_launch`` makes through it."""

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append((grid, args, kwargs))


@pytest.mark.parametrize("fits", [True, False])
def test_a_cluster_the_device_cannot_hold_falls_back_to_the_l2_merge(monkeypatch, fits):
    """``_launch``: a launch the policy clusters goes to ``_launch_clusters``; when that finds the device cannot hold
    the cluster (False, nothing launched), the same launch runs merged through L2: SPLIT, no cluster, the plan's
    workspace (1 row x 16 one-page splits here)."""
    fake, asked = _FakeKernel(), []
    monkeypatch.setattr(P, "_pa_decode_kernel", fake)
    monkeypatch.setattr(P, "_launch_clusters", lambda *a: asked.append(a) or fits)
    args = _args(rows=1, width=16)
    plan = hopper.make_plan(1, 16, 16, "cpu")
    _call(args, plan)
    clusters, cluster, _, constexprs, _ = asked[0]
    assert (clusters, cluster, constexprs["CLUSTER"], constexprs["SPLIT"]) == (1, 16, 16, False)
    if fits:
        assert fake.launches == []
        return
    (grid, launched, kwargs), = fake.launches
    assert grid == (1, 16) and kwargs["CLUSTER"] == 1 and kwargs["SPLIT"] is True
    names = list(P.SIGNATURE)
    for name, tensor in (("part_out_ptr", plan.part_out), ("part_lse_ptr", plan.part_lse),
                         ("counters_ptr", plan.counters)):
        assert launched[names.index(name)] is tensor, name


@pytest.mark.parametrize("rows,width,begin,tail,pages", [(512, 8, 396, 3, 3), (850, 2, 792, 2, 1)])
def test_the_split_tail_launch(monkeypatch, rows, width, begin, tail, pages):
    """``_launch`` with the tail on: one grid dimension of begin + (rows - begin) x tail programs, SPLIT with the
    TAIL constexpr, no cluster, the tail's split count and pages a split as num_splits / pages_per_split, tail_begin
    last, the plan's workspace; with the tail off the same call launches direct, (rows, 1) with TAIL 0 and
    tail_begin 0 (whatever the rows: an int argument of 1 or a multiple of 16 would be another JIT specialisation)."""
    fake = _FakeKernel()
    monkeypatch.setattr(P, "_pa_decode_kernel", fake)
    args = _args(rows=rows, width=width)
    names = list(P.SIGNATURE)
    for config in (TAIL, OFF):
        plan = hopper.make_plan(rows, width, 16, "cpu", config=config)
        _call(args, plan)
        grid, launched, kwargs = fake.launches.pop()
        value = dict(zip(names, launched))
        if config is TAIL:
            assert grid == (begin + (rows - begin) * tail, 1)
            assert (kwargs["TAIL"], kwargs["SPLIT"], kwargs["CLUSTER"], kwargs["num_warps"]) == (tail, True, 1, 4)
            assert (value["num_splits"], value["pages_per_split"], value["tail_begin"]) == (tail, pages, begin)
            assert value["part_out_ptr"] is plan.part_out and value["counters_ptr"] is plan.counters
        else:
            assert grid == (rows, 1) and (kwargs["TAIL"], kwargs["SPLIT"]) == (0, False)
            assert (value["num_splits"], value["tail_begin"]) == (1, 0)


@pytest.mark.parametrize("overlap", [0, 1, "k", "true", None, 1.0])
def test_config_refuses_an_overlap_setting_that_is_not_a_bool(overlap):
    with pytest.raises(ValueError) as excinfo:
        P.HopperConfig(overlap=overlap)
    _message(excinfo, "HopperConfig.overlap", "True or False", repr(overlap))


def test_config_refuses_the_overlap_on_a_ring_of_two_stages():
    """The in-warp page overlap reads page i + 1's slot during page i's trip: a 2-stage ring has no slot for it."""
    with pytest.raises(ValueError) as excinfo:
        P.HopperConfig(stages=2, overlap=True)
    _message(excinfo, "HopperConfig.overlap", "stages < 3", "True with stages 2")
    assert P.HopperConfig(stages=3, overlap=True).overlap and not P.HopperConfig(stages=2).overlap


def test_the_overlap_reaches_the_kernel_as_a_constexpr_except_in_the_sparse_one_launch(monkeypatch):
    """``HopperConfig.overlap`` is the kernel's OVERLAP constexpr (``overlap_for``): False by default, True when on for
    pa_decode's tables and the dense attend, False for the sparse attend's one launch (its loop spilled with it on)."""
    on = P.HopperConfig(overlap=True)
    assert P.DEFAULT_CONFIG.overlap is False
    for source in (P.SOURCE_TABLES, P.SOURCE_DENSE, P.SOURCE_SPARSE):
        assert P.overlap_for(P.DEFAULT_CONFIG, source) is False
        assert P.overlap_for(on, source) is (source != P.SOURCE_SPARSE)
    fake = _FakeKernel()
    monkeypatch.setattr(P, "_pa_decode_kernel", fake)
    args = _args(rows=600, width=8)  # a direct launch (its last wave of 204 rows takes no split tail)
    for config in (on, P.DEFAULT_CONFIG):
        _call(args, hopper.make_plan(600, 8, 16, "cpu", config=config))
        grid, _, kwargs = fake.launches.pop()
        assert grid == (600, 1) and kwargs["OVERLAP"] is config.overlap, (config, kwargs)
    assert "OVERLAP" in P.SIGNATURE


def test_cluster_occupancy_is_asked_once_and_a_failed_query_means_no_cluster(monkeypatch):
    """``_clusters_fit``: the driver's answer (max active clusters > 0) cached per (kernel, cluster, shared); a query
    that raises counts as no cluster, with one warning."""
    calls = []

    def query(function, shared, cluster):
        calls.append((function, shared, cluster))
        if function == 3:
            raise RuntimeError("no such query")
        return {1: 2, 2: 0}[function]

    monkeypatch.setattr(P, "_CLUSTERS_FIT", {})
    monkeypatch.setattr(P, "_max_active_clusters", query)
    assert P._clusters_fit(1, 16, 82000) and P._clusters_fit(1, 16, 82000)
    assert not P._clusters_fit(2, 16, 82000)
    with pytest.warns(RuntimeWarning, match="cluster of 16 CTAs"):
        assert not P._clusters_fit(3, 16, 82000)
    assert not P._clusters_fit(3, 16, 82000)
    assert calls == [(1, 82000, 16), (2, 82000, 16), (3, 82000, 16)]


def test_hopper_bench_variants_parse_into_hopper_configs_and_refuse_by_name():
    """atom_mxfp4/evals/bench/hopper_bench.py --variant FIELD=VALUE,...: the overrides of a same-run kernel variant."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "atom_mxfp4" / "evals" / "bench"))
    import hopper_bench as hb
    assert hb.parse_variant("warps=8,maxnreg=128") == {"warps": 8, "maxnreg": 128}
    assert hb.parse_variant("maxnreg=none,cluster=false") == {"maxnreg": None, "cluster": False}
    assert hb.parse_variant("overlap=true") == {"overlap": True}
    assert hb.variant_name({"warps": 8, "maxnreg": 128}) == "hopper_v_warps8_maxnreg128"
    for bad, named in (("warps=5", "HopperConfig.warps"), ("foo=1", "foo=1"), ("warps", "'warps'"),
                       ("stages=two", "'two'")):
        with pytest.raises(ValueError) as ei:
            hb.parse_variant(bad)
        assert named in str(ei.value), (bad, str(ei.value))
