"""The wgmma decision probe (issue 42, item 1: atom_mxfp4/evals/bench/wgmma_probe.py) on the CPU.

- the e2m1 -> e4m3 bit placement is bit-exact for all 16 codes (decoded both ways through torch.float8_e4m3fn), and
  the word form the kernel computes (8 nibbles -> even / odd e4m3 words) agrees with it;
- Q as two e4m3 terms (hi + lo) keeps bf16-level error (rel-L2 <= SPLIT_TOLERANCE = 4e-3), one term does not;
- the float64 oracle matches a direct computation, argument parsing;
- the probe compiles for sm_90 without spills (a subprocess without TRITON_INTERPRET; skipped only when Triton's ptxas
  is absent), its page loop is counted (> 0 instructions; QGMMA, HGMMA and the decode's opcodes present). No speed is
  asserted: the GPU side is ``wgmma_probe.py --run``.
"""

from __future__ import annotations

import pytest
import torch

from atom_mxfp4.evals.bench import _wgmma_probe_bits as B
from atom_mxfp4.evals.bench import wgmma_probe as W
from atom_mxfp4.format import E2M1_VALUES

import _helpers as H


def test_e4m3_placement_is_bit_exact():
    for code in range(16):
        byte = B.e4m3_byte(code)
        value = torch.tensor([byte], dtype=torch.uint8).view(torch.float8_e4m3fn).double().item()
        want = E2M1_VALUES[code] * 2.0 ** B.PLACEMENT_EXPONENT
        assert value == want and (value != 0 or (byte >> 7) == (code >> 3)), (code, hex(byte), value, want)
        back = torch.tensor([want], dtype=torch.float64).to(torch.float8_e4m3fn).view(torch.uint8).item()
        assert back == byte or (want == 0 and back & 0x7F == 0), (code, hex(back), hex(byte))


def test_e4m3_words_place_every_nibble():
    gen = torch.Generator().manual_seed(0)
    words = [0, 0xFFFFFFFF, 0x12345678, 0x89ABCDEF] + torch.randint(0, 2 ** 31, (200,), generator=gen).tolist()
    for word in words:
        even, odd = B.e4m3_words(word)
        for i in range(4):
            byte = (word >> (8 * i)) & 0xFF
            assert (even >> (8 * i)) & 0xFF == B.e4m3_byte(byte & 0xF)
            assert (odd >> (8 * i)) & 0xFF == B.e4m3_byte(byte >> 4)


def test_operand_orders_are_permutations():
    assert sorted(B.qk_dim(k) for k in range(32)) == list(range(32))
    assert sorted(B.pv_dim(m) for m in range(128)) == list(range(128))


def test_q_hi_lo_split_error():
    q = torch.randn(64, 16, 128, generator=torch.Generator().manual_seed(0)).bfloat16()
    two, one = W.split_error(q, 2), W.split_error(q, 1)
    print(f"hi + lo rel-L2 {two:.2e}, hi alone {one:.2e}")
    assert two <= W.SPLIT_TOLERANCE, two
    assert one > 5 * two  # the second term is what buys bf16-level error
    hi, lo, shift = W.q_split(q)
    assert hi.float().abs().amax() <= 256 and (shift == shift.round()).all()


def test_oracle_matches_a_direct_computation():
    k_cache, v_cache = W.make_pages(6, seed=3)
    tables = torch.tensor([[0, 4], [5, 2]], dtype=torch.int32)
    q = torch.randn(2, 16, 128, generator=torch.Generator().manual_seed(1)).bfloat16()
    got = W.oracle(q, k_cache, v_cache, tables, 0.125)
    k, v = W.decode_pages(k_cache), W.decode_pages(v_cache)
    for p in range(2):
        kk = torch.cat([k[i] for i in tables[p].tolist()])
        vv = torch.cat([v[i] for i in tables[p].tolist()])
        want = torch.softmax(q[p].double() @ kk.T * 0.125, dim=-1) @ vv
        assert torch.allclose(got[p], want, rtol=1e-12, atol=1e-12)
    assert W.rel_l2(got.float(), got) < 1e-6


def test_parse_args():
    args = W.parse_args([])
    assert not args.run and args.variants == list(W.Variant)
    args = W.parse_args(["--run", "--out", "/tmp/x", "--variants", "REGS_HILO"])
    assert args.run and args.variants == [W.Variant.REGS_HILO]
    with pytest.raises(SystemExit):
        W.parse_args(["--run"])  # --out is required


def test_probe_compiles_for_sm90_without_spills():
    found = H.sm90_compile_report("wgmma_probe.py", "--json")
    rows = {row["variant"]: row for row in found["variants"]}
    for variant in W.Variant:
        row = rows[variant.name]
        assert "error" not in row, row.get("error")
        assert row["local"] == 0 and row["stack"] == 0 and row["kernel_spill_ops"] == 0, row
        ops = row["loop_ops"]
        assert row["loop_instructions"] > 0
        assert ops.get("QGMMA", 0) > 0 and ops.get("HGMMA", 0) > 0, ops  # e4m3 QK, bf16 PV
        assert ops.get("LOP3", 0) > 0 and ops.get("PRMT", 0) > 0 and ops.get("HMUL2", 0) > 0, ops  # the decodes
        assert ops.get("LDGSTS", 0) > 0, ops  # the ring's copies
        print(f"{variant.name}: {row['registers']} registers, {row['loop_instructions']} loop instructions a page and "
              f"thread, {row['per_element']:.2f} per element")
    shipped = next(row for row in found["variants"] if row["variant"].startswith("shipped"))
    print(f"shipped: {shipped['loop_instructions']} ({shipped['per_element']:.2f} per element)")
