"""Independent test oracles, written from DESIGN.md §3-§5 and docs/api.md, never from the implementation.

- ``scalar_*``: the MXFP4 codec one element / one 32-block at a time in plain Python (the yardstick).
- ``np_quantize`` / ``np_dequantize``: the same rules vectorised in numpy (checked against the scalar codec in
  test_format.py), fast enough for the op tests.
- cache helpers: read / write one token of a raw record tensor ``[pages, heads, 8704]`` by byte offsets.
- ``attention_rows``: dense fp64 softmax attention per row over dequantized cache tokens.
- test set-up shared by several files: ``compiled_backends_resolvable`` (the Hopper and Triton host paths on the
  CPU) and ``usable_or_skip`` (a GPU test's backend).
- ``run_ptx``: a numpy interpreter of the five PTX instructions of the MXFP4 decodes (mov, prmt, and, mul.lo.u32,
  mul.rn.bf16x2), to run the shipped asm text of the Triton and Hopper kernels on the CPU.
"""

from __future__ import annotations

import math
import re
import struct

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

# ---- geometry (DESIGN §2, §4): from the ground floor, whose values tests/test_layout.py pins to DESIGN's literals
from atom_mxfp4.layout import BLOCK  # noqa: E402,F401  (elements per e8m0 scale)
from atom_mxfp4.layout import DATA_BYTES as DATA_B  # noqa: E402  (e2m1 bytes per token-head)
from atom_mxfp4.layout import HEAD_DIM as D  # noqa: E402
from atom_mxfp4.layout import PAGE_SIZE as PAGE  # noqa: E402  (tokens per page = tokens per sparse block)
from atom_mxfp4.layout import RECORD_BYTES as RECORD  # noqa: E402  (bytes per (page, head))
from atom_mxfp4.layout import SCALE_BYTES as SCALE_B  # noqa: E402  (e8m0 bytes per token-head)

E2M1_MAG = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # magnitude of codes 0..7; bit 3 is the sign
E2M1 = tuple(E2M1_MAG) + tuple(-m for m in E2M1_MAG)  # value of codes 0..15 (code 8 is -0.0)

MODES = ("ceil", "floor", "mse")

# Attention tolerance, ||out - ref64|| / ||ref64||: the bf16 rounding of the output (2**-9 relative, ~1.1e-3 rms
# of a uniform rounding error is 2**-9/sqrt(3) ~ 1.1e-3 worst, ~6e-4 typical) plus bf16 rounding of the
# probabilities fed to the P.V product (same order), measured on the torch backend at ~7e-4; band x3.
ATTN_REL_TOL = 3e-3


# ---- scalar codec ---------------------------------------------------------------------------------------------
def f32(x: float) -> float:
    """Round a Python float to fp32."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_fields(a: float) -> tuple[int, int]:
    """(biased exponent E, 23-bit mantissa M) of the fp32 value a."""
    bits = struct.unpack("<I", struct.pack("<f", a))[0]
    return (bits >> 23) & 0xFF, bits & 0x7FFFFF


def scalar_code(x: float, e: int) -> int:
    """e2m1 code (0..15) of one element under scale byte e: nearest, ties to even code, saturate at 6."""
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return 7 if x > 0 else 15
    v = abs(x) / 2.0 ** (e - 127)  # exact: a power-of-two division of an fp32 value, in fp64
    # nearest magnitude; on a tie (v exactly halfway) take the even code
    best = 0
    for c in range(1, 8):
        d_new, d_best = abs(v - E2M1_MAG[c]), abs(v - E2M1_MAG[best])
        if d_new < d_best or (d_new == d_best and c % 2 == 0):
            best = c
    if best != 0 and x < 0:
        best |= 8
    return best


def scalar_deq(code: int, e: int) -> float:
    """value = e2m1(code) * 2**(e - 127); e == 255 is NaN."""
    if e == 255:
        return math.nan
    return E2M1[code] * 2.0 ** (e - 127)


def scalar_block_error(block: list[float], e: int) -> float:
    """fp64 sum of squared errors over the finite elements of a block encoded with scale byte e."""
    return sum((x - scalar_deq(scalar_code(x, e), e)) ** 2 for x in block if math.isfinite(x))


def scalar_exponents(block: list[float]) -> dict[str, int]:
    """Scale byte of one 32-block (fp32 values) under each ScaleMode, from the text of DESIGN §3 / api.md."""
    finite = [abs(x) for x in block if math.isfinite(x)]
    amax = max(finite, default=0.0)
    E, M = f32_fields(amax)
    if E == 0:  # zero or subnormal amax
        return {m: 1 for m in MODES}
    clamp = lambda e: min(254, max(1, e))  # noqa: E731
    floor = clamp(E - 2)
    ceil = clamp(E - 2 + (1 if M > 0x400000 else 0))
    ef, ec = scalar_block_error(block, floor), scalar_block_error(block, ceil)
    return {"floor": floor, "ceil": ceil, "mse": floor if ef < ec else ceil}


def scalar_quantize(x: torch.Tensor, mode: str = "ceil") -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] float -> (data uint8 [..., D//2], scale uint8 [..., D//32]); slow, for small inputs."""
    xs = x.detach().float().cpu()
    lead, d = tuple(xs.shape[:-1]), xs.shape[-1]
    flat = xs.reshape(-1, d).tolist()
    data, scale = [], []
    for row in flat:
        codes, es = [], []
        for b in range(0, d, BLOCK):
            block = row[b:b + BLOCK]
            e = scalar_exponents(block)[mode]
            es.append(e)
            codes += [scalar_code(v, e) for v in block]
        data.append([codes[i] | (codes[i + 1] << 4) for i in range(0, d, 2)])
        scale.append(es)
    data_t = torch.tensor(data, dtype=torch.uint8).reshape(*lead, d // 2)
    scale_t = torch.tensor(scale, dtype=torch.uint8).reshape(*lead, d // BLOCK)
    return data_t, scale_t


# ---- vectorised numpy codec (same rules; cross-checked against the scalar one) --------------------------------
_MAG = np.array(E2M1_MAG, dtype=np.float64)
_VAL = np.array(E2M1, dtype=np.float64)


def _np_codes(x: np.ndarray, e: np.ndarray) -> np.ndarray:
    """x fp32 [N, 32], e int [N] -> codes uint8 [N, 32]."""
    v = np.abs(x.astype(np.float64)) / np.exp2(e.astype(np.float64) - 127)[:, None]
    with np.errstate(invalid="ignore"):
        mag = ((v > 0.25).astype(np.int64) + (v >= 0.75) + (v > 1.25) + (v >= 1.75) + (v > 2.5) + (v >= 3.5)
               + (v > 5.0))
    mag = np.where(np.isnan(x), 0, mag)
    mag = np.where(np.isinf(x), 7, mag)
    sign = (x < 0) & (mag != 0)
    return (mag | (sign.astype(np.int64) << 3)).astype(np.uint8)


def _np_sq_err(x: np.ndarray, codes: np.ndarray, e: np.ndarray) -> np.ndarray:
    deq = _VAL[codes] * np.exp2(e.astype(np.float64) - 127)[:, None]
    fin = np.isfinite(x)
    with np.errstate(invalid="ignore"):
        err = np.where(fin, (x.astype(np.float64) - deq) ** 2, 0.0)
    return err.sum(axis=1)


def np_quantize(x, mode: str = "ceil") -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] (torch or numpy, any float) -> (data uint8 [..., D//2], scale uint8 [..., D//32]) as torch."""
    if isinstance(x, torch.Tensor):
        x = x.detach().float().cpu().numpy()
    x = np.ascontiguousarray(x, dtype=np.float32)
    lead, d = x.shape[:-1], x.shape[-1]
    xb = x.reshape(-1, BLOCK)
    a = np.where(np.isfinite(xb), np.abs(xb), np.float32(0))
    amax = a.max(axis=1) if xb.shape[0] else np.zeros(0, np.float32)
    bits = amax.astype(np.float32).view(np.uint32).astype(np.int64)
    E, M = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    floor = np.clip(E - 2, 1, 254)
    ceil = np.clip(E - 2 + (M > 0x400000), 1, 254)
    if mode == "floor":
        e = floor
    elif mode == "ceil":
        e = ceil
    else:
        ef = _np_sq_err(xb, _np_codes(xb, floor), floor)
        ec = _np_sq_err(xb, _np_codes(xb, ceil), ceil)
        e = np.where(ef < ec, floor, ceil)
    codes = _np_codes(xb, e).reshape(-1, d)
    data = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return (torch.from_numpy(data.reshape(*lead, d // 2).copy()),
            torch.from_numpy(e.astype(np.uint8).reshape(*lead, d // BLOCK).copy()))


def np_dequantize(data, scale) -> np.ndarray:
    """(data uint8 [..., D//2], scale uint8 [..., D//32]) -> fp64 [..., D]; scale 255 gives NaN."""
    data = np.asarray(data.cpu() if isinstance(data, torch.Tensor) else data, dtype=np.uint8)
    scale = np.asarray(scale.cpu() if isinstance(scale, torch.Tensor) else scale, dtype=np.uint8)
    codes = np.stack([data & 0xF, data >> 4], axis=-1).reshape(*data.shape[:-1], data.shape[-1] * 2)
    s = np.exp2(scale.astype(np.float64) - 127)
    s = np.where(scale == 255, np.nan, s)
    return _VAL[codes] * np.repeat(s, BLOCK, axis=-1)


# ---- raw cache records [pages, heads, 8704] -------------------------------------------------------------------
def token_bytes(records: torch.Tensor, page: int, head: int, offset: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(data [64], scale [4]) uint8 of one token-head, located by byte offsets of DESIGN §4."""
    rec = records[page, head]
    return rec[offset * DATA_B:(offset + 1) * DATA_B], rec[PAGE * DATA_B + offset * SCALE_B:
                                                          PAGE * DATA_B + (offset + 1) * SCALE_B]


def put_token(records: torch.Tensor, page: int, head: int, offset: int, data: torch.Tensor,
              scale: torch.Tensor) -> None:
    d, s = token_bytes(records, page, head, offset)
    d.copy_(data)
    s.copy_(scale)


def records_from_values(values: torch.Tensor, mode: str = "ceil") -> torch.Tensor:
    """values [pages, 128 tokens, 128] float -> one-head records [pages, 1, 8704] (np_quantize of every token)."""
    pages = values.shape[0]
    data, scale = np_quantize(values.reshape(pages * PAGE, D), mode)
    records = torch.zeros(pages, 1, RECORD, dtype=torch.uint8)
    records[:, 0, :PAGE * DATA_B] = data.view(pages, PAGE * DATA_B)
    records[:, 0, PAGE * DATA_B:] = scale.view(pages, PAGE * SCALE_B)
    return records


def folded_tokens(records: torch.Tensor, folded_page: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(data [128, 64], scale [128, 4]) of folded page id ``page*heads + head`` (record index in memory order)."""
    rec = records.reshape(-1, RECORD)[folded_page]
    return rec[:PAGE * DATA_B].reshape(PAGE, DATA_B), rec[PAGE * DATA_B:].reshape(PAGE, SCALE_B)


def random_codes(gen: torch.Generator, n: int, lo: int = 122, hi: int = 132) -> tuple[torch.Tensor, torch.Tensor]:
    """n valid token-heads: every data byte random (all 16 codes), scales in [lo, hi]."""
    data = torch.randint(0, 256, (n, DATA_B), generator=gen, dtype=torch.int32).to(torch.uint8)
    scale = torch.randint(lo, hi + 1, (n, SCALE_B), generator=gen, dtype=torch.int32).to(torch.uint8)
    return data, scale


def garbage_records(gen: torch.Generator, pages: int, heads: int) -> torch.Tensor:
    """Records full of poison: random codes with scales 255 (NaN), 254 (6*2**127 = Inf in fp32) and 0."""
    rec = torch.randint(0, 256, (pages, heads, RECORD), generator=gen, dtype=torch.int32).to(torch.uint8)
    sc = rec[:, :, PAGE * DATA_B:]
    choice = torch.randint(0, 3, sc.shape, generator=gen)
    sc.copy_(torch.where(choice == 0, 255, torch.where(choice == 1, 254, 0)).to(torch.uint8))
    return rec


# ---- attention oracle on dequantized cache tokens -------------------------------------------------------------
def gather_row_tokens(records: torch.Tensor, table_row: list[int], length: int) -> np.ndarray:
    """fp64 [length, 128]: token t at folded page table_row[t // 128], offset t % 128."""
    out = np.zeros((length, D), dtype=np.float64)
    for blk in range((length + PAGE - 1) // PAGE):
        data, scale = folded_tokens(records, table_row[blk])
        n = min(PAGE, length - blk * PAGE)
        out[blk * PAGE:blk * PAGE + n] = np_dequantize(data[:n], scale[:n])
    return out


def attention_rows(q: np.ndarray, k_records, v_records, tables, lens, softmax_scale: float) -> np.ndarray:
    """q fp64 [R, G, D]; tables [R, W]; lens [R] -> fp64 [R, G, D]; rows with length 0 are zeros."""
    tables = [list(map(int, row)) for row in torch.as_tensor(tables).tolist()]
    lens = [int(x) for x in torch.as_tensor(lens).tolist()]
    out = np.zeros(q.shape, dtype=np.float64)
    for r, (row, n) in enumerate(zip(tables, lens)):
        if n == 0:
            continue
        k = gather_row_tokens(k_records, row, n)
        v = gather_row_tokens(v_records, row, n)
        s = (q[r] @ k.T) * softmax_scale  # [G, n]
        s -= s.max(axis=1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=1, keepdims=True)
        out[r] = p @ v
    return out


# ---- sparse tables rule (DESIGN §5) --------------------------------------------------------------------------
def reference_tables(topk_blocks, block_table, row_request, row_position, nkv):
    """ppb = 1: (tables [R*nkv, topk] i32, context_lens [R*nkv] i32) by the rule, one row at a time."""
    tk = topk_blocks.tolist()
    bt = block_table.tolist()
    R, topk = len(row_request), topk_blocks.shape[2]
    tables = np.zeros((R * nkv, topk), dtype=np.int32)
    lens = np.zeros(R * nkv, dtype=np.int32)
    for r in range(R):
        req, pos = int(row_request[r]), int(row_position[r])
        own = pos // 128
        for h in range(nkv):
            sel = [b for b in tk[h][r] if b >= 0]
            full = sorted(b for b in sel if b != own)
            order = full + ([own] if own in sel else [])
            for i, b in enumerate(order):
                tables[r * nkv + h, i] = bt[req][b] * nkv + h
            lens[r * nkv + h] = len(full) * 128 + ((pos - own * 128 + 1) if own in sel else 0)
    return tables, lens


def attend_case(gen: torch.Generator, lens: list[int], nkv: int, group: int, topk: int | None = None, ppb: int = 1,
                rows_per_request: int = 2, spare_pages: int = 3) -> dict:
    """An ``ops.attend`` problem: requests of ``lens`` tokens over a shuffled block table (width a multiple of ppb,
    entries past a request's pages point at garbage pages), rows at random positions of each request plus its last
    token, q [T * nkv, group, 128]; with ``topk`` the rows' top-k blocks [nkv, T, topk] as index_topk returns them
    (ascending, none past the own block, -1 padded; some rows without their own block, row 0 of head 0 empty).
    Caches: garbage records (NaN / Inf scales) everywhere but the tokens the requests hold."""
    block_tokens = PAGE * ppb
    blocks = max(-(-n // block_tokens) for n in lens) + 1
    width = blocks * ppb
    pages = len(lens) * width + spare_pages
    block_table = torch.randperm(pages, generator=gen)[:len(lens) * width].to(torch.int32).reshape(len(lens), width)
    k, v = garbage_records(gen, pages, nkv), garbage_records(gen, pages, nkv)
    for r, n in enumerate(lens):
        for rec in (k, v):
            data, scale = random_codes(gen, n * nkv)
            for t in range(n):
                page = int(block_table[r, t // PAGE])
                rec[page, :, (t % PAGE) * DATA_B:(t % PAGE + 1) * DATA_B] = data[t * nkv:(t + 1) * nkv]
                at = PAGE * DATA_B + (t % PAGE) * SCALE_B
                rec[page, :, at:at + SCALE_B] = scale[t * nkv:(t + 1) * nkv]
    request, position = [], []
    for r, n in enumerate(lens):
        chosen = torch.randint(0, n, (rows_per_request,), generator=gen).tolist() + [n - 1]
        request += [r] * len(chosen)
        position += chosen
    case = dict(k=k, v=v, block_table=block_table, row_request=torch.tensor(request, dtype=torch.int32),
                row_position=torch.tensor(position, dtype=torch.int32), topk_blocks=None, pages_per_block=1,
                q=torch.randn(len(request) * nkv, group, D, generator=gen).bfloat16(), num_kv_heads=nkv)
    if topk is not None:
        ids = torch.full((nkv, len(request), topk), -1, dtype=torch.int32)
        for t, pos in enumerate(position):
            own = pos // block_tokens
            for h in range(nkv):
                if t == 0 and h == 0:
                    continue  # nothing selected: context 0, zeros
                chosen = sorted(torch.randperm(own + 1, generator=gen)[:topk].tolist())
                if own not in chosen and len(chosen) < topk and (t + h) % 3:
                    chosen = sorted(chosen + [own])
                ids[h, t, :len(chosen)] = torch.tensor(chosen, dtype=torch.int32)
        case.update(topk_blocks=ids, pages_per_block=ppb)
    return case


def records_of(cache) -> torch.Tensor:
    """The raw uint8 records of an MXFP4PageCache or a records tensor."""
    return cache.records if hasattr(cache, "records") else cache


def to_device(t: torch.Tensor, device) -> torch.Tensor:
    """``t`` on ``device`` with its strides kept (``t`` itself when already there). A plain ``t.to(device)`` of a
    strided (non-dense) tensor is contiguous on the other device, so a contract test of strided inputs would test
    nothing on the GPU (the 2026-12-04 H200 runs: 4, then 17 refusal tests "DID NOT RAISE"). Stride-0 dimensions stay
    expanded views of one element."""
    device = torch.device(device)
    if t.device.type == device.type and device.index in (None, t.device.index):
        return t
    expanded = [d for d, (n, s) in enumerate(zip(t.shape, t.stride())) if s == 0 and n > 1]
    if expanded:
        base = t
        for d in expanded:
            base = base.narrow(d, 0, 1)
        return to_device(base, device).expand(t.shape)
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device).copy_(t)


def err_names(excinfo, *names: str) -> str:
    """The exception message; asserts it names every one of ``names`` and reads '... got ...'."""
    msg = str(excinfo.value)
    for n in names:
        assert n in msg, f"error message does not name {n!r}: {msg!r}"
    assert "got" in msg, f"error message does not give the actual value: {msg!r}"
    return msg


# ---- backends under test ------------------------------------------------------------------------------------------
def backends_here(device="cpu", large_shapes: bool = False) -> list[str]:
    """Every registered backend that can run on ``device`` now (atom_mxfp4.backends.available_backends): the oracle
    tests parametrize over these, so a new backend folder is tested as soon as it registers. On the CPU Triton runs
    under the interpreter (tests/conftest.py turns it on), FlyDSL only on a gfx950 device.

    ``large_shapes``: leave out what runs under the Triton interpreter (one 677-token layer prefill there takes over
    5 minutes); those tests have small-shape twins that cover every backend."""
    import os

    from atom_mxfp4.backends import available_backends

    names = available_backends(device)
    if large_shapes and torch.device(device).type != "cuda" and os.environ.get("TRITON_INTERPRET") == "1":
        names = [n for n in names if n != "triton"]
    return names


def query_rows(lens, rows_at, niq, gen) -> dict:
    """Query rows of index_topk problems: row_request / row_position [R] i32 at positions ``rows_at(req, len)`` of
    each request, idx_q [R, niq, D] bf16 of small integers (exact scores)."""
    req, pos = [], []
    for r, n in enumerate(lens):
        for p in rows_at(r, n):
            req.append(r)
            pos.append(p)
    idx_q = torch.randint(-3, 4, (len(req), niq, D), generator=gen).to(torch.bfloat16)
    return dict(row_request=torch.tensor(req, dtype=torch.int32), row_position=torch.tensor(pos, dtype=torch.int32),
                idx_q=idx_q)


def capture_then_replay(step, refill) -> None:
    """The CUDA-graph contract of a decode step (GPU tests): run ``step`` once eagerly (compile, warm-up), capture it
    in a graph, let ``refill`` put new contents into the same input buffers (as the next decode step would), replay.
    The caller then compares what the replay left in its output buffers with an eager call."""
    step()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    refill()
    graph.replay()
    torch.cuda.synchronize()


# The triton series compiled beside the installed one (scripts/install.d/45-triton-series.sh): 3.8 (torch 2.14.1's pin,
# SGLang 0.5.23's) and 3.9 (torch 2.15's pin); the Hopper backend accepts both (their GPU tests ran on the H200).
TRITON_SERIES = ("installed", "3.8", "3.9")


def triton_series_dir(series: str):
    """The folder holding triton ``series`` ("3.8", "3.9"; None for "installed"), checked to hold that series; skips
    when the install script has not put it there."""
    import pytest
    from pathlib import Path

    if series == "installed":
        return None
    folder = Path(__file__).resolve().parents[1] / f".triton{series.replace('.', '')}"
    version = folder / ".version"
    if not (folder / "triton").is_dir() or not version.is_file():
        pytest.skip(f"triton {series} is not installed in {folder} (bash scripts/install.d/45-triton-series.sh)")
    assert version.read_text().startswith(series + "."), (folder, version.read_text())
    return folder


def sm90_compile_report(script: str, *args: str, triton_dir=None) -> dict:
    """Run ``atom_mxfp4/evals/bench/<script>`` (or ``script`` given as an absolute path; a compile-for-sm_90 report,
    ``args`` select its JSON mode) in a subprocess without the TRITON_INTERPRET=1 the CPU test session sets, and return
    the JSON of its last stdout line. Skips when Triton's ptxas is absent (no sm_90 compile possible). ``triton_dir``: a
    folder holding another triton package (``triton_series_dir``), put first on the subprocess's PYTHONPATH."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    import pytest
    import triton
    package = Path(triton.__file__).parent if triton_dir is None else Path(triton_dir) / "triton"
    ptxas = package / "backends" / "nvidia" / "bin" / "ptxas"
    if not ptxas.exists():
        pytest.skip(f"Triton's ptxas is not at {ptxas}")
    root = Path(__file__).resolve().parents[1]
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    if triton_dir is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(triton_dir)] + [p for p in [env.get("PYTHONPATH")] if p])
    done = subprocess.run([sys.executable, str(root / "atom_mxfp4" / "evals" / "bench" / script), *args],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def index_k_round(index_k_dtype):
    """The oracle's ``index_k_round`` for a layer whose index-K cache is of ``index_k_dtype``: None for mxfp4 (the
    oracle's ``kv_round`` applies to the index-K too), the fp8 codec's round trip (atom_mxfp4.index_k) for fp8."""
    from atom_mxfp4.index_k import IndexKDtype, dequantize_fp8, quantize_fp8
    if IndexKDtype.parse(index_k_dtype) is IndexKDtype.MXFP4:
        return None
    return lambda t: dequantize_fp8(*quantize_fp8(t.float()), dtype=torch.float64).to(t.dtype)


# ---- PTX of the MXFP4 decodes, interpreted on the CPU ------------------------------------------------------------
U32 = np.uint64(0xFFFFFFFF)


def _bf16_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """bf16 x bf16 -> bf16 (round to nearest even), on bit patterns in uint32 (low 16 bits)."""
    fa = (a.astype(np.uint32) << 16).view(np.float32)
    fb = (b.astype(np.uint32) << 16).view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        prod = fa * fb  # exact: two 8-bit significands, and fp32 spans every bf16 exponent (subnormals included)
    bits = prod.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    rounded = np.where(np.isnan(prod), 0x7FC0, rounded)
    return rounded & 0xFFFF


def _prmt(a, b, selector):
    source = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    out = np.zeros_like(a)
    for i in range(4):
        nibble = (selector >> (4 * i)) & 0xF
        byte = source[nibble & 7]
        if nibble & 8:  # sign-replicate mode
            byte = np.where(byte & 0x80, 0xFF, 0)
        out |= byte << (8 * i)
    return out


def run_ptx(text: str, operands: dict) -> dict:
    """Execute the asm text on uint64 arrays holding 32-bit values; ``operands`` maps "$k" -> array (in and out)."""
    regs = dict(operands)

    def value(token):
        token = token.strip()
        return regs[token] if not re.fullmatch(r"0x[0-9A-Fa-f]+|\d+", token) else np.uint64(int(token, 0))

    for line in text.splitlines():
        line = line.strip().rstrip(";")
        if not line or line in "{}" or line.startswith(".reg"):
            continue
        op, args = line.split(None, 1)
        dst, *src = [a.strip() for a in args.split(",")]
        x = [value(s) for s in src]
        if op == "mov.b32":
            regs[dst] = x[0] + np.zeros_like(next(iter(operands.values())))
        elif op == "prmt.b32":
            regs[dst] = _prmt(x[0], x[1], int(src[2], 0))
        elif op == "and.b32":
            regs[dst] = x[0] & x[1]
        elif op == "mul.lo.u32":
            regs[dst] = (x[0] * x[1]) & U32
        elif op == "mul.rn.bf16x2":
            lo = _bf16_mul(x[0] & 0xFFFF, x[1] & 0xFFFF)
            hi = _bf16_mul(x[0] >> 16, x[1] >> 16)
            regs[dst] = lo | (hi << 16)
        else:
            raise AssertionError(f"instruction not modelled: {op}")
    return regs


def index_case(gen, rows, max_blocks, requests=4, index_k_dtype="mxfp4", heads=1):
    """index_topk inputs with exact dyadic scores (keys k/4, |k| <= 8; idx_q j/2, |j| <= 4) in records of either
    index-K dtype, random bytes (NaN codes, scale 255 ...) in every page no request owns."""
    from atom_mxfp4.format import quantize_mxfp4
    from atom_mxfp4.index_k import FP8_RECORD_BYTES, quantize_fp8
    pages = requests * max_blocks + 5
    keys = torch.randint(-8, 9, (pages * 128, 128), generator=gen).float() / 4  # exact dyadic scores
    if index_k_dtype == "fp8":
        records = torch.randint(0, 256, (pages, 1, FP8_RECORD_BYTES), generator=gen, dtype=torch.int32).to(torch.uint8)
        data, scale = quantize_fp8(keys)
        split = 128 * 128
    else:
        records = torch.zeros(pages, 1, RECORD, dtype=torch.uint8)
        data, scale = quantize_mxfp4(keys)
        split = 8192
    block_table = torch.randperm(pages, generator=gen)[:requests * max_blocks].view(requests, max_blocks).int()
    owned = block_table.flatten().long()
    records[owned, 0, :split] = data.view(pages, split)[owned]
    records[owned, 0, split:] = scale.view(pages, -1)[owned]
    row_request = torch.randint(0, requests, (rows,), generator=gen, dtype=torch.int32)
    row_position = torch.randint(0, max_blocks * 128, (rows,), generator=gen, dtype=torch.int32)
    idx_q = (torch.randint(-4, 5, (rows, heads, 128), generator=gen).float() / 2).bfloat16()
    return idx_q, records, block_table.contiguous(), row_request, row_position


def refill_index_case(gen, idx_q, row_position, max_blocks):
    """New contents for ``index_case``'s idx_q and row positions, written into the same (device) buffers: what the
    next decode step would leave there before a CUDA-graph replay."""
    idx_q.copy_((torch.randint(-4, 5, idx_q.shape, generator=gen).float() / 2).bfloat16().to(idx_q.device))
    row_position.copy_(torch.randint(0, max_blocks * 128, row_position.shape, generator=gen,
                                     dtype=torch.int32).to(row_position.device))


# ---- test set-up ------------------------------------------------------------------------------------------------
def compiled_backends_resolvable(monkeypatch) -> None:
    """Make the Hopper and Triton backends resolvable on the CPU (their host paths run to their launches, which the
    caller records with ``atom_mxfp4.launch.recording``), with no backend resolved and no value check remembered yet.
    The caller clears ``atom_mxfp4.backends._resolve`` again when it is done."""
    import atom_mxfp4.kernels.hopper as hopper
    import atom_mxfp4.kernels.triton as triton_backend
    from atom_mxfp4 import backends, checked

    for backend in (hopper.HopperBackend, triton_backend.TritonBackend):
        monkeypatch.setattr(backend, "unavailable", classmethod(lambda cls, device: None))
    backends._resolve.cache_clear()
    checked.clear()


def usable_or_skip(backend: str, device) -> str:
    """``backend``, or skip the test naming why ``device`` cannot run it (the Hopper kernels need sm_90)."""
    if backend == "hopper":
        from atom_mxfp4.kernels import hopper
        why = hopper.usable(device)
        if why is not None:
            import pytest

            pytest.skip(why)
    return backend


class HostReads(TorchFunctionMode):
    """Records every tensor method that reads data on the host (a device sync on a GPU)."""

    READS = {"item", "tolist", "__bool__", "__int__", "__float__", "__index__", "cpu", "numpy"}

    def __init__(self):
        super().__init__()
        self.reads = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in self.READS:
            self.reads.append(name)
        return func(*args, **(kwargs or {}))
