"""The MXFP4 codec (DESIGN §3, docs/api.md "Codec arithmetic") against the scalar codec of tests/_helpers.py.

Bit-exactness first (codes, scale bytes, ties, specials, shapes, modes); round-trip accuracy last and looser.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import _helpers as H

from atom_mxfp4.format import E2M1_VALUES, ScaleMode, dequantize_mxfp4, quantize_mxfp4

MODES = [ScaleMode.CEIL, ScaleMode.FLOOR, ScaleMode.MSE]


def quant(x, mode=ScaleMode.CEIL):
    return quantize_mxfp4(x, mode)


def codes_of(data: torch.Tensor) -> list[int]:
    """data uint8 [..., n] -> flat list of 2n codes, low nibble (even element) first."""
    out = []
    for b in data.reshape(-1).tolist():
        out += [b & 0xF, b >> 4]
    return out


def block_with(values, fill=0.0, n=32) -> torch.Tensor:
    """One fp32 32-block starting with ``values``."""
    x = torch.full((n,), fill, dtype=torch.float32)
    x[:len(values)] = torch.tensor(values, dtype=torch.float32)
    return x


# ---- constants and enum -----------------------------------------------------------------------------------------
def test_e2m1_table_matches_design():
    assert len(E2M1_VALUES) == 16
    for code in range(16):
        assert float(E2M1_VALUES[code]) == H.E2M1[code], code
    assert ScaleMode.CEIL is not ScaleMode.FLOOR  # three distinct modes
    assert len({ScaleMode.CEIL, ScaleMode.FLOOR, ScaleMode.MSE}) == 3


def test_default_mode_is_ceil():
    x = torch.randn(4, 128) * 3
    x[0, 0] = 1.7  # amax 1.75-ish blocks make CEIL and FLOOR differ; random data makes them differ too
    d0, s0 = quantize_mxfp4(x)
    d1, s1 = quantize_mxfp4(x, ScaleMode.CEIL)
    assert torch.equal(d0, d1) and torch.equal(s0, s1)


# ---- all 16 codes, every scale byte ------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_all_16_codes_encode_exactly(mode):
    # block: the 16 code values (incl. -0.0) twice at scale 2**-3; amax = 6 * 2**-3 fixes e = 124 in every mode
    s = 2.0 ** -3
    vals = [H.E2M1[c] * s for c in range(16)] * 2
    data, scale = quant(torch.tensor(vals, dtype=torch.float32), mode)
    assert scale.tolist() == [124]
    expected = [c if c != 8 else 0 for c in range(16)] * 2  # -0.0 is written as code 0
    assert codes_of(data) == expected
    # low nibble = even element: byte 0 holds code 0 (low) and 1 (high) -> 0x10
    assert data[0].item() == 0x10 and data[1].item() == 0x32


def test_dequantize_every_code_and_scale_byte():
    # every (code pair, scale byte): bytes 0..255 cover all 16x16 nibble pairs; 256 bytes = 16 blocks of 32 elements
    data = torch.arange(256, dtype=torch.int32).to(torch.uint8).repeat(256, 1)  # [256 scale bytes, 256] -> D = 512
    scale = torch.arange(256, dtype=torch.int32).to(torch.uint8)[:, None].repeat(1, 16)  # [256, 16]
    got = dequantize_mxfp4(data, scale).double().numpy()
    assert got.shape == (256, 512)
    want = H.np_dequantize(data, scale)
    # scale bytes 1..254: exact (every value is representable in fp32: 6 * 2**127 is not -> see below)
    for e in range(0, 255):
        row_want = want[e]
        row_got = got[e]
        with np.errstate(over="ignore"):
            want32 = row_want.astype(np.float32)  # 2 * 2**127 and up overflow fp32: expect +-Inf there
        assert np.array_equal(row_got, want32.astype(np.float64)), f"scale byte {e}"
    # e == 0 is 2**-127 (a subnormal fp32), e == 255 is NaN (OCP), whatever the code
    assert got[0, 14] == 6.0 * 2.0 ** -127  # byte 7 -> element 14 is code 7
    assert np.isnan(got[255]).all(), "scale byte 255 must dequantize to NaN"


def test_dequantize_output_dtype():
    data, scale = quant(torch.randn(3, 128))
    for dt in (torch.float32, torch.bfloat16, torch.float64):
        y = dequantize_mxfp4(data, scale, dtype=dt)
        assert y.dtype == dt and y.shape == (3, 128)
    y32 = dequantize_mxfp4(data, scale)
    assert y32.dtype == torch.float32
    assert torch.equal(dequantize_mxfp4(data, scale, dtype=torch.bfloat16), y32.to(torch.bfloat16))


@pytest.mark.parametrize("mode", MODES)
def test_every_reachable_scale_byte_bit_exact(mode):
    # one 32-block per target exponent; amax = m * 2**k for mantissas that straddle the CEIL/FLOOR boundary
    gen = torch.Generator().manual_seed(11)
    rows = []
    for k in range(-149, 128):  # fp32 binades from the smallest subnormal to the largest finite
        for m in (1.0, 1.5, 1.5 + 2 ** -23, 1.75, 2.0 - 2 ** -23):
            amax = m * 2.0 ** k
            if not math.isfinite(H.f32(amax)) or amax > 3.4028234663852886e38:
                continue
            x = (torch.rand(32, generator=gen, dtype=torch.float64) * 2 - 1) * amax
            x[int(torch.randint(0, 32, (1,), generator=gen))] = -amax if k % 2 else amax
            rows.append(x.float())
    x = torch.stack(rows)
    data, scale = quant(x, mode)
    rdata, rscale = H.scalar_quantize(x, mode.value)
    assert torch.equal(scale, rscale), _first_mismatch(x, scale, rscale)
    assert torch.equal(data, rdata)
    # both ends of [1, 254] are reached and never left
    assert scale.min().item() == 1 and 250 <= scale.max().item() <= 254
    present = set(scale.reshape(-1).tolist())
    assert set(range(1, 253)) <= present, sorted(set(range(1, 254)) - present)


def _first_mismatch(x, got, want):
    idx = (got != want).nonzero()
    if len(idx) == 0:
        return "ok"
    r = idx[0, 0].item()
    amax = x[r].abs().max().item()
    return f"row {r} amax {amax!r} (fields {H.f32_fields(amax)}): got e={got[r].tolist()}, want {want[r].tolist()}"


# ---- rounding: ties to even, saturation --------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_ties_to_even_code(mode):
    s = 2.0 ** -1  # element scale; 6*s fixes e = 126 in every mode (amax mantissa 1.5)
    v = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]  # exact midpoints between neighbouring magnitudes
    want = [0, 2, 2, 4, 4, 6, 6]  # 0|0.5 -> 0, 0.5|1 -> 1.0, 1|1.5 -> 1.0, 1.5|2 -> 2, 2|3 -> 2, 3|4 -> 4, 4|6 -> 4
    vals = [6.0 * s] + [t * s for t in v] + [-t * s for t in v]
    data, scale = quant(block_with(vals), mode)
    assert scale.tolist() == [126]
    codes = codes_of(data)
    assert codes[1:8] == want
    assert codes[8:15] == [w | 8 if w else 0 for w in want]  # -0.25*s rounds to zero: code 0, not 8
    # just above the midpoints: the upper neighbour; just below: the lower one
    up = [t * (1 + 2 ** -20) for t in v]
    data, _ = quant(block_with([6.0 * s] + [t * s for t in up]), mode)
    assert codes_of(data)[1:8] == [1, 2, 3, 4, 5, 6, 7]
    down = [t * (1 - 2 ** -20) for t in v]
    data, _ = quant(block_with([6.0 * s] + [t * s for t in down]), mode)
    assert codes_of(data)[1:8] == [0, 1, 2, 3, 4, 5, 6]


def test_floor_clips_to_six_and_ceil_never_clips():
    x = block_with([7.5, -7.0, 1.0])  # amax 7.5: FLOOR e = 2-2+127 = 127 -> 7.5/1 clips to 6; CEIL e = 128
    d, s = quant(x, ScaleMode.FLOOR)
    assert s.tolist() == [127] and codes_of(d)[:3] == [7, 15, 2]
    d, s = quant(x, ScaleMode.CEIL)
    # scale 2: 3.75 -> 4 (code 6); -3.5 is a tie 3|4 -> even code 6 (+sign = 14); 0.5 -> code 1
    assert s.tolist() == [128] and codes_of(d)[:3] == [6, 14, 1]


# ---- non-finite input, zero blocks -------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_non_finite_inputs(mode):
    inf, nan = math.inf, math.nan
    # amax over the finite values is 3.0 = 1.5 * 2**1 -> every mode gives e = 126 (scale 0.5): 3.0 is code 7
    x = block_with([nan, inf, -inf, 3.0, -nan, 1.0])
    data, scale = quant(x, mode)
    assert scale.tolist() == [126]
    assert codes_of(data)[:6] == [0, 7, 15, 7, 0, 4]
    deq = dequantize_mxfp4(data, scale)
    assert deq[:6].tolist() == [0.0, 3.0, -3.0, 3.0, 0.0, 1.0]  # +-Inf -> +-6 * scale


@pytest.mark.parametrize("mode", MODES)
def test_all_non_finite_block_and_zero_blocks(mode):
    x = torch.stack([
        block_with([math.nan, math.inf, -math.inf], fill=math.nan),  # no finite value: amax 0 -> e = 1
        torch.zeros(32),
        torch.full((32,), -0.0),
        block_with([1e-45, -2e-45]),  # subnormal amax -> E = 0 -> e = 1
    ])
    data, scale = quant(x, mode)
    assert scale.reshape(-1).tolist() == [1, 1, 1, 1]
    codes = codes_of(data)
    # block 0: NaN -> 0, +Inf -> 7, -Inf -> 15, then NaN fill -> 0
    assert codes[:32] == [0, 7, 15] + [0] * 29
    assert codes[32:96] == [0] * 64  # zeros and -0.0 are code 0 (never -0)
    # 1e-45 / 2**-126 is tiny: rounds to 0
    assert codes[96:128] == [0] * 32


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(0, 128), (1, 32), (3, 5, 64), (2, 1, 3, 128), (7, 96), (128,)])
def test_odd_shapes(mode, shape):
    gen = torch.Generator().manual_seed(hash(shape) % 1000)
    x = torch.randn(shape, generator=gen) * torch.exp(torch.randn(shape[:-1] + (1,), generator=gen) * 3)
    data, scale = quant(x, mode)
    assert data.dtype == torch.uint8 and scale.dtype == torch.uint8
    assert data.shape == shape[:-1] + (shape[-1] // 2,)
    assert scale.shape == shape[:-1] + (shape[-1] // 32,)
    rdata, rscale = H.scalar_quantize(x, mode.value)
    assert torch.equal(data, rdata) and torch.equal(scale, rscale)
    y = dequantize_mxfp4(data, scale)
    assert y.shape == shape


def test_non_contiguous_input_same_as_contiguous():
    x = torch.randn(64, 256)[:, ::2]  # [64, 128], stride 2
    d0, s0 = quant(x)
    d1, s1 = quant(x.contiguous())
    assert torch.equal(d0, d1) and torch.equal(s0, s1)


def test_bf16_input_same_as_its_fp32():
    x = (torch.randn(33, 128) * 10).bfloat16()
    d0, s0 = quant(x)
    d1, s1 = quant(x.float())
    assert torch.equal(d0, d1) and torch.equal(s0, s1)


# ---- the three ScaleModes, hand-computed cases --------------------------------------------------------------------
@pytest.mark.parametrize(
    "values, floor, ceil, mse",
    [
        # amax = 1.5 * 2**0 exactly: CEIL = FLOOR (6 * 2**-2 = 1.5), e = 125
        ([1.5, 0.5], 125, 125, 125),
        # amax = 1.5 + 2**-23: CEIL moves up one (never clips), FLOOR stays (clips 1.5000001 to 1.5)
        ([1.5 + 2 ** -23], 125, 126, 126),
        # amax = 1.625: single element -> FLOOR err (1.625 - 1.5)**2 == CEIL err (1.625 - 1.5)**2: tie -> CEIL
        ([1.625], 125, 126, 126),
        # plus 2**-3: exact in FLOOR (0.5 * 2**-2), rounds to 0 under CEIL (0.25 * 2**-1, tie to even 0): FLOOR wins
        ([1.625, 0.125], 125, 126, 125),
        # amax 1.9: FLOOR clips to 1.5 (err .4), CEIL rounds to 2.0 (err .1): CEIL
        ([1.9], 125, 126, 126),
        # amax = 2**-126 * 1.75 (smallest normal binade): E = 1 -> both clamp to 1
        ([1.75 * 2.0 ** -126], 1, 1, 1),
        # largest finite fp32: E = 254 -> FLOOR 252, CEIL 253 (6 * 2**126 >= 3.4e38)
        ([3.4028234663852886e38], 252, 253, 253),
    ],
)
def test_scale_modes_hand_computed(values, floor, ceil, mse):
    x = block_with(values)
    got = {m.value: quant(x, m)[1].item() for m in MODES}
    assert got == {"floor": floor, "ceil": ceil, "mse": mse}
    assert H.scalar_exponents(x.tolist()) == got  # the test oracle agrees with the hand computation


@pytest.mark.parametrize("mode", MODES)
def test_mode_accepts_string(mode):
    x = torch.randn(5, 128) * 4
    d0, s0 = quantize_mxfp4(x, mode)
    d1, s1 = quantize_mxfp4(x, mode.value)
    assert torch.equal(d0, d1) and torch.equal(s0, s1)


# ---- random blocks, bit-exact against the scalar codec; the numpy oracle against the scalar codec ---------------
def _random_blocks(seed: int, n: int) -> torch.Tensor:
    """[n, 128] fp32: gaussian rows over many magnitudes, outlier channels, exact grid values, specials."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 128, generator=gen) * torch.exp2(torch.randint(-20, 20, (n, 1), generator=gen).float())
    x[:, 7] *= 30  # a per-channel outlier
    grid = torch.tensor(H.E2M1, dtype=torch.float32)[torch.randint(0, 16, (n, 32), generator=gen)]
    x[:, 32:64] = grid * torch.exp2(torch.randint(-5, 5, (n, 1), generator=gen).float())  # values on the grid
    special = torch.rand(n, 128, generator=gen) < 0.02
    pick = torch.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0])[torch.randint(0, 5, (n, 128), generator=gen)]
    return torch.where(special, pick, x)


@pytest.mark.parametrize("mode", MODES)
def test_random_blocks_bit_exact(mode):
    x = _random_blocks(100 + MODES.index(mode), 96)
    data, scale = quant(x, mode)
    rdata, rscale = H.scalar_quantize(x, mode.value)
    assert torch.equal(scale, rscale), _first_mismatch(x, scale, rscale)
    assert torch.equal(data, rdata)


@pytest.mark.parametrize("mode", MODES)
def test_numpy_oracle_matches_scalar_oracle(mode):
    x = _random_blocks(7, 48)
    d0, s0 = H.scalar_quantize(x, mode.value)
    d1, s1 = H.np_quantize(x, mode.value)
    assert torch.equal(s0, s1) and torch.equal(d0, d1)


# ---- round-trip accuracy ----------------------------------------------------------------------------------------
def _half_step(v: torch.Tensor) -> torch.Tensor:
    """Half the distance between the two codes around |x| / scale = v (v in [0, 6]): 0.25, 0.5 or 1."""
    return torch.where(v <= 2, 0.25, torch.where(v <= 4, 0.5, 1.0))


@pytest.mark.parametrize("mode", MODES)
def test_round_trip_error_bound_per_element(mode):
    x = _random_blocks(3, 256)
    x = torch.where(torch.isfinite(x), x, torch.zeros(()))
    data, scale = quant(x, mode)
    y = dequantize_mxfp4(data, scale).double()
    s = torch.exp2(scale.double() - 127).repeat_interleave(32, dim=-1)
    v = x.double().abs() / s
    err = (y - x.double()).abs()
    clipped = v > 6
    if mode == ScaleMode.CEIL:
        assert not clipped.any(), "CEIL never clips"
    bound = _half_step(v.clamp(max=6)) * s
    assert (err[~clipped] <= bound[~clipped]).all()
    # clipped elements (FLOOR / MSE) decode to exactly +-6 * scale
    assert torch.equal(y[clipped], torch.sign(x.double()[clipped]) * 6 * s[clipped])


def test_round_trip_rel_l2_on_gaussian():
    # the relative RMS error of MXFP4 on N(0, 1) blocks of 32 (CEIL) is ~0.12 in published numbers; allow 0.16
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(4096, 128, generator=gen)
    rel = {}
    for mode in MODES:
        y = dequantize_mxfp4(*quant(x, mode))
        rel[mode.value] = ((y - x).norm() / x.norm()).item()
    assert 0.03 < rel["ceil"] < 0.16, rel
    assert rel["mse"] <= min(rel["ceil"], rel["floor"]) + 1e-9, rel  # MSE picks the better of the two per block


@pytest.mark.parametrize("mode", MODES)
def test_scale_exponent_matches_the_scale_bytes(mode):
    from atom_mxfp4.format import scale_exponent

    x = _random_blocks(21, 16).reshape(-1, 32)  # [64 blocks, 32]
    e = scale_exponent(x, mode)
    want = [H.scalar_exponents(row)[mode.value] for row in x.tolist()]
    assert [int(v) for v in e.reshape(-1).tolist()] == want
    assert torch.equal(e.reshape(-1).to(torch.int64), quant(x, mode)[1].reshape(-1).to(torch.int64))
