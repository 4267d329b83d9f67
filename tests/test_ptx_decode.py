"""The PTX MXFP4 decode of the Triton kernels, checked on the CPU by interpreting the shipped PTX text.

``atom_mxfp4/kernels/triton/_mxfp4.E2M1_BF16X2_ASM`` runs only on NVIDIA GPUs (tests/gpu checks it there); CI has
none, so this file executes that exact string with a small interpreter of the five PTX instructions it uses (mov, prmt,
and, mul.lo.u32, mul.rn.bf16x2; numpy, vectorised over inputs: ``_helpers.run_ptx``) and compares its outputs with
``format.dequantize_mxfp4`` bit for bit: every code byte in every byte position, every scale byte a writer emits
(1..254).
"""


import numpy as np
import pytest
import torch

from atom_mxfp4.format import dequantize_mxfp4
from atom_mxfp4.kernels.triton._mxfp4 import E2M1_BF16X2_ASM

from _helpers import run_ptx  # noqa: E402  (the numpy PTX interpreter, shared with tests/test_hopper_layout.py)


@pytest.mark.parametrize("position", range(4))
def test_shipped_ptx_decodes_every_byte_and_scale_exactly(position):
    codes = np.arange(256, dtype=np.uint64)
    scales = np.arange(1, 255, dtype=np.uint64)
    byte, scale = np.meshgrid(codes, scales, indexing="ij")
    byte, scale = byte.ravel(), scale.ravel()
    other = (byte * 7 + 3) & 0xFF  # the other three bytes of the word carry different codes
    word = np.zeros_like(byte)
    for i in range(4):
        word |= (byte if i == position else (other + i) & 0xFF) << (8 * i)
    pair = (scale << 7) | (scale << 23)  # the scale as bf16 2**(e - 127) in both lanes, as decode_bytes_asm passes it
    regs = run_ptx(str(E2M1_BF16X2_ASM.value), {"$4": word, "$5": pair, "$6": pair,
                                                 "$0": 0 * word, "$1": 0 * word, "$2": 0 * word, "$3": 0 * word})
    # $0 / $1: low nibbles of bytes 0, 1 / 2, 3 (one bf16 per lane); $2 / $3: high nibbles
    low_reg, high_reg = regs["$0" if position < 2 else "$1"], regs["$2" if position < 2 else "$3"]
    shift = 16 * (position % 2)
    got_low = (low_reg >> shift) & 0xFFFF
    got_high = (high_reg >> shift) & 0xFFFF

    data = torch.from_numpy(byte.astype(np.uint8)).view(-1, 1).repeat(1, 16)  # one 32-block per row
    ref = dequantize_mxfp4(data, torch.from_numpy(scale.astype(np.uint8)).view(-1, 1), torch.bfloat16)
    ref_bits = ref.view(torch.int16).numpy().astype(np.uint16)
    assert np.array_equal(got_low.astype(np.uint16), ref_bits[:, 0]), "low nibble (even element) differs"
    assert np.array_equal(got_high.astype(np.uint16), ref_bits[:, 1]), "high nibble (odd element) differs"


def test_interpreter_is_not_vacuous():
    """A broken mask constant must be caught: the same check fails on a corrupted copy of the asm."""
    broken = str(E2M1_BF16X2_ASM.value).replace("0x81C081C0", "0x818081C0", 1)  # drops a mantissa bit
    word = np.arange(256, dtype=np.uint64) * 0x01010101
    pair = np.full_like(word, (127 << 7) | (127 << 23))
    zeros = {f"${k}": 0 * word for k in range(4)}
    good = run_ptx(str(E2M1_BF16X2_ASM.value), {"$4": word, "$5": pair, "$6": pair, **zeros})
    bad = run_ptx(broken, {"$4": word, "$5": pair, "$6": pair, **zeros})
    assert not np.array_equal(good["$0"], bad["$0"])
