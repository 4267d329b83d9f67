"""The FlyDSL kernel's index maps, evaluated on the host, against the DESIGN §4 byte layout and the torch backend.

``atom_mxfp4/kernels/flydsl/layout.py`` holds every lane -> byte / token / dim map; the kernel traces these same
functions. Here they run on Python ints / numpy lanes: against the record views of ``atom_mxfp4.cache`` (§4), as
bijections onto the tokens / dims each MFMA must cover, and end to end through a lane-by-lane numpy emulation of the
kernel's dataflow compared with the torch backend (direct and split paths, garbage past the context).
No GPU and no flydsl needed.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from atom_mxfp4.cache import data_view, scale_view
from atom_mxfp4.kernels.flydsl import cases as C
from atom_mxfp4.kernels.flydsl import emulate as E
from atom_mxfp4.kernels.flydsl import layout as L

LANES = range(L.WAVE)


@pytest.fixture(scope="module")
def record():
    """One [1, 1, 8704] record of distinct-looking random bytes, with its §4 views."""
    gen = torch.Generator().manual_seed(7)
    records = torch.randint(0, 256, (1, 1, L.RECORD_BYTES), generator=gen, dtype=torch.uint8)
    return records, data_view(records)[0, 0], scale_view(records)[0, 0]


def test_constants_are_design_section_4():
    assert (L.PAGE_SIZE, L.HEAD_DIM, L.DATA_BYTES, L.SCALE_BYTES, L.RECORD_BYTES) == (128, 128, 64, 4, 8704)
    assert L.SCALE_OFFSET == 128 * 64


@pytest.mark.parametrize("page_off", [0, 64])
def test_k_operand_bytes_are_the_token_block_of_the_record(record, page_off):
    records, data, scale = record
    flat = records.flatten()
    for j, lane in itertools.product(range(L.QK_SUBTILES), LANES):
        token = page_off + L.k_token(j, lane)
        g = L.lane_g(lane)
        off = L.k_data_offset(token, lane)
        # the lane's A operand = codes of elements 32g .. 32g+31 of the token: bytes 16g .. 16g+15 of its row
        assert torch.equal(flat[off:off + 16], data[token, 16 * g:16 * g + 16])
        assert flat[L.k_scale_offset(token, lane)] == scale[token, g]


@pytest.mark.parametrize("page_off", [0, 64])
def test_v_loads_are_the_token_block_of_the_record(record, page_off):
    records, data, scale = record
    flat = records.flatten()
    for u, lane in itertools.product(range(4), LANES):
        token = page_off + L.v_token(lane, u)
        cb = L.v_block(lane)
        off = L.v_data_offset(token, lane)
        assert torch.equal(flat[off:off + 16], data[token, 16 * cb:16 * cb + 16])
        assert flat[L.v_scale_offset(token, lane)] == scale[token, cb]


def test_qk_covers_every_token_of_the_tile_once_per_head_column():
    for lane_c in range(16):
        tokens = sorted(L.s_token(j, lane, i) for j in range(L.QK_SUBTILES) for i in range(4)
                        for lane in LANES if L.lane_c(lane) == lane_c)
        assert tokens == list(range(L.TILE))
    # and the A rows of sub-tile j are the result rows: tokens 16j .. 16j+15
    for j in range(L.QK_SUBTILES):
        assert sorted({L.k_token(j, lane) for lane in LANES}) == list(range(16 * j, 16 * j + 16))
        assert {L.s_token(j, lane, i) for lane in LANES for i in range(4)} == set(range(16 * j, 16 * j + 16))


def test_q_operand_bytes_are_the_fp8_k_of_the_scaled_mfma_and_cover_each_head_row_once():
    for head in range(16):
        dims = sorted(L.q_chunk_dim0(lane, e >> 4) + (e & 15) for lane in LANES if L.q_head(lane) == head
                      for e in range(32))
        assert dims == list(range(L.HEAD_DIM))
    for lane, e in itertools.product(LANES, range(32)):
        assert L.q_chunk_dim0(lane, e >> 4) + (e & 15) == L.mfma_k_fp8(lane, e)


def test_scaled_mfma_k_maps_are_bijections_and_fp4_lanes_own_their_scale_block():
    for k_of in (L.mfma_k_fp4, L.mfma_k_fp8):
        for c in range(16):
            ks = sorted(k_of(lane, e) for lane in LANES if L.lane_c(lane) == c for e in range(32))
            assert ks == list(range(L.HEAD_DIM))
    for lane in LANES:  # the e8m0 byte a lane supplies (block g) scales exactly the 32 codes it holds
        assert {L.mfma_k_fp4(lane, e) // 32 for e in range(32)} == {L.lane_g(lane)}


def test_v_loads_cover_the_tile_once():
    cells = sorted((L.v_token(lane, u), 32 * L.v_block(lane) + e) for lane in LANES for u in range(4)
                   for e in range(32))
    assert cells == [(t, d) for t in range(L.TILE) for d in range(L.HEAD_DIM)]


def test_pv_slots_are_the_lanes_own_qk_registers_and_cover_each_step():
    for step, lane in itertools.product(range(L.PV_STEPS), LANES):
        for e in range(8):
            j, i = 2 * step + (e >> 2), e & 3
            assert L.pv_token(step, lane, e) == L.s_token(j, lane, i)
    for step in range(L.PV_STEPS):
        tokens = sorted(L.pv_token(step, lane, e) for lane in LANES if L.lane_c(lane) == 0 for e in range(8))
        assert tokens == list(range(32 * step, 32 * step + 32))


def test_vt_lds_region_is_a_bijection_with_aligned_rows():
    offsets = {L.vt_offset(d, t) for d in range(L.HEAD_DIM) for t in range(L.TILE)}
    assert len(offsets) == L.HEAD_DIM * L.TILE
    assert max(offsets) + 2 <= L.WAVE_LDS_BYTES
    for lane, step, dt in itertools.product(LANES, range(L.PV_STEPS), range(L.D_TILES)):
        for e in (0, 4):  # the two 8-byte reads of a PV operand
            assert L.vt_offset(L.pv_dim(dt, lane), L.pv_token(step, lane, e)) % 8 == 0
            assert L.pv_token(step, lane, e + 3) == L.pv_token(step, lane, e) + 3
    for lane in LANES:
        assert L.vt_offset(0, L.v_token(lane, 0)) % 8 == 0
        assert [L.v_token(lane, u) for u in range(4)] == [L.v_token(lane, 0) + u for u in range(4)]


def test_output_registers_cover_each_head_row_once():
    for head in range(16):
        dims = sorted(L.o_dim(dt, lane, i) for dt in range(L.D_TILES) for lane in LANES if L.q_head(lane) == head
                      for i in range(4))
        assert dims == list(range(L.HEAD_DIM))
    cells = sorted((L.epilogue_head(t), L.epilogue_dim0(t) + e) for t in range(L.THREADS) for e in range(8))
    assert cells == [(h, d) for h in range(16) for d in range(L.HEAD_DIM)]


@pytest.mark.parametrize("rows,width", [(1, 1), (1, 16), (17, 33), (64, 256), (512, 16), (3000, 2)])
def test_choose_splits_covers_the_table(rows, width):
    splits, partition = L.choose_splits(rows, width)
    assert partition % (L.WAVES * L.TILE) == 0
    assert splits * partition >= width * L.PAGE_SIZE > (splits - 1) * partition
    if rows >= 512:
        assert splits == 1  # enough rows to fill the GPU: the direct path


@pytest.mark.parametrize("case", C.standard_cases(), ids=lambda case: case.name)
@pytest.mark.parametrize("path", ["direct", "split", "forced split"])
def test_emulated_kernel_matches_torch_backend(case, path):
    """The launches the self-check runs on a gfx950 before first use (check.py): direct, the policy's split, and
    C.FORCED_SPLITS splits (short rows in a wide table take fewer tokens a split than the width's partition)."""
    rows, width = case.tables.shape
    splits, partition = {"direct": (1, width * L.PAGE_SIZE), "split": L.choose_splits(rows, width),
                         "forced split": L.partition(width, C.FORCED_SPLITS)}[path]
    if path == "split":
        assert splits > 1
    got = E.emulate_pa_decode(case.q, case.k_cache, case.v_cache, case.tables, case.context_lens,
                              softmax_scale=case.softmax_scale, query_scale=case.query_scale, num_splits=splits,
                              partition_tokens=partition).to(torch.bfloat16).float()
    ref = C.reference(case)
    assert not torch.isnan(got).any()
    assert torch.all((got - ref).abs() <= C.tolerance(case, ref)), ((got - ref).abs() / C.tolerance(case, ref)).max()
    empty = case.context_lens == 0
    assert torch.all(got[empty] == 0)


def test_a_short_row_in_a_wide_table_spreads_over_every_split(monkeypatch):
    """layout.row_tokens: each row's own tokens over the launch's splits, in workgroup steps, at most the width's
    partition. 16 splits of a 64-page table (512-token partitions): a 1000-token row takes 256 tokens a split, so 4
    splits hold it (by the width: 2); a full row keeps 512; no token: one step, no split used. The emulated kernel
    (decode and merge read the same row_tokens) equals the torch backend on short rows in a wide table."""
    step = L.WAVES * L.TILE
    splits, partition = L.partition(64, 16)
    assert (splits, partition) == (16, 512)
    assert L.row_tokens(1000, splits, partition) == 256 and -(-1000 // 256) == 4
    assert L.row_tokens(64 * L.PAGE_SIZE, splits, partition) == partition
    assert L.row_tokens(0, splits, partition) == step
    for ctx in range(0, 64 * L.PAGE_SIZE + 1, 97):  # the splits cover the row once, each a multiple of the step
        share = L.row_tokens(ctx, splits, partition)
        assert share % step == 0 and step <= share <= partition and splits * share >= ctx
    case = C.make_case("short rows, wide table", group=8, context_lens=[1000, 1, 300, 0, 2049], seed=17,
                       extra_width=60)
    rows, width = case.tables.shape
    splits, partition = L.partition(width, 8)  # 8 splits (the policy's at 64 rows): 1280 tokens each by the width
    assert (splits, partition) == (8, 1280)  # by the width the 1000-token row would sit on split 0 alone
    assert [L.row_tokens(int(n), splits, partition) for n in case.context_lens] == [256, 256, 256, 256, 512]
    spans, wave = [], E._wave

    def recording_wave(ctx, w, start, end, *args):  # the token span each emulated split's waves got
        spans.append((ctx, start, end))
        return wave(ctx, w, start, end, *args)

    monkeypatch.setattr(E, "_wave", recording_wave)
    got = E.emulate_pa_decode(case.q, case.k_cache, case.v_cache, case.tables, case.context_lens,
                              softmax_scale=case.softmax_scale, query_scale=None, num_splits=splits,
                              partition_tokens=partition).to(torch.bfloat16).float()
    assert sorted({(start, end) for ctx, start, end in spans if ctx == 1000 and end > start}) == [
        (0, 256), (256, 512), (512, 768), (768, 1000)]
    ref = C.reference(case)
    assert torch.all((got - ref).abs() <= C.tolerance(case, ref)), ((got - ref).abs() / C.tolerance(case, ref)).max()
    assert torch.all(got[case.context_lens == 0] == 0)


def test_garbage_past_the_context_is_masked_not_just_unlikely():
    """Overwrite every byte past each row's context with NaN-producing garbage: the result must not move."""
    case = C.make_case("garbage", group=4, context_lens=[70, 129], seed=11)
    rows, width = case.tables.shape
    run = lambda: E.emulate_pa_decode(case.q, case.k_cache, case.v_cache, case.tables, case.context_lens,  # noqa
                                      softmax_scale=case.softmax_scale, query_scale=None, num_splits=1,
                                      partition_tokens=width * L.PAGE_SIZE)
    before = run()
    for records in (case.k_cache, case.v_cache):
        flat = records.view(-1, L.RECORD_BYTES)
        for r in range(rows):
            n = int(case.context_lens[r])
            page = int(case.tables[r, (n - 1) // L.PAGE_SIZE])
            first = n % L.PAGE_SIZE
            if first:
                flat[page, first * L.DATA_BYTES:L.SCALE_OFFSET] = 0x77  # codes 7: +6
                flat[page, L.SCALE_OFFSET + first * L.SCALE_BYTES:] = 255  # NaN scales
    after = run()
    assert torch.equal(before, after)


def test_table_entries_past_the_context_are_never_read():
    """Unused entries hold an id far outside the cache: any read of one would raise IndexError here."""
    case = C.make_case("sentinel", group=2, context_lens=[1, 130, 0], seed=13, extra_width=3)
    rows, width = case.tables.shape
    for r in range(rows):
        used = -(-int(case.context_lens[r]) // L.PAGE_SIZE)
        case.tables[r, used:] = 2 ** 30
    for splits, partition in [(1, width * L.PAGE_SIZE), L.choose_splits(rows, width)]:
        got = E.emulate_pa_decode(case.q, case.k_cache, case.v_cache, case.tables, case.context_lens,
                                  softmax_scale=case.softmax_scale, query_scale=None, num_splits=splits,
                                  partition_tokens=partition)
        assert torch.isfinite(got).all()


def test_the_emulation_can_fail(monkeypatch):
    """A one-block slip in the K byte map must be caught by the comparison above."""
    case = C.standard_cases()[0]
    rows, width = case.tables.shape
    monkeypatch.setattr(L, "k_data_offset", lambda token, lane: token * L.DATA_BYTES + 16 * ((L.lane_g(lane) + 1) & 3))
    got = E.emulate_pa_decode(case.q, case.k_cache, case.v_cache, case.tables, case.context_lens,
                              softmax_scale=case.softmax_scale, query_scale=case.query_scale, num_splits=1,
                              partition_tokens=width * L.PAGE_SIZE).to(torch.bfloat16).float()
    ref = C.reference(case)
    assert not torch.all((got - ref).abs() <= C.tolerance(case, ref))


def test_a_query_laid_out_as_32_contiguous_dims_would_be_caught(monkeypatch):
    """The e4m3 B operand is two 16-dim chunks per lane (mfma_k_fp8); the contiguous fp4-like layout is wrong."""
    case = C.standard_cases()[1]
    rows, width = case.tables.shape
    monkeypatch.setattr(L, "q_chunk_dim0", lambda lane, chunk: 32 * L.lane_g(lane) + 16 * chunk)
    got = E.emulate_pa_decode(case.q, case.k_cache, case.v_cache, case.tables, case.context_lens,
                              softmax_scale=case.softmax_scale, query_scale=case.query_scale, num_splits=1,
                              partition_tokens=width * L.PAGE_SIZE).to(torch.bfloat16).float()
    ref = C.reference(case)
    assert not torch.all((got - ref).abs() <= C.tolerance(case, ref))


def test_kernel_query_matches_the_kernel_quantization_rule():
    q = torch.tensor([[[448.0 * 2 ** -5] + [0.3] * 127]], dtype=torch.bfloat16)
    kq = C.kernel_query(q)
    assert kq[0, 0, 0] == 14.0  # the amax maps to 448 exactly, scale 2**-5
    assert np.isclose(kq[0, 0, 1].item(), 0.3, rtol=2 ** -3)  # e4m3: 3 mantissa bits
    zero = C.kernel_query(torch.zeros(1, 1, 128, dtype=torch.bfloat16))
    assert torch.equal(zero, torch.zeros(1, 1, 128))
