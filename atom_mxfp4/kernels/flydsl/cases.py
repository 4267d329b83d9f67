"""Test cases for the FlyDSL decode kernel (self-check on first use, gfx950 tests, host emulation tests).

Caches are random bytes everywhere (so unowned tokens hold garbage: any code, scale 255 = NaN, NaN-producing
scales), then the tokens below each row's context length get finite scales. ``kernel_query`` is the query the
kernel effectively multiplies with: e4m3 as is, bf16 quantized to e4m3 per head row exactly as the kernel does
(``scale = amax / 448`` (1 when amax == 0), ``e4m3(x * (1 / scale)) * scale``), so the torch backend fed with it
must agree with the kernel up to bf16 rounding of P and of ``out``.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from atom_mxfp4.format import dequantize_mxfp4

from . import layout as L


@dataclasses.dataclass
class DecodeCase:
    name: str
    out: torch.Tensor  # [R, G, 128] bf16, poisoned with NaN
    q: torch.Tensor  # [R, G, 128] bf16 | e4m3
    k_cache: torch.Tensor  # [pages, heads, 8704] u8
    v_cache: torch.Tensor
    tables: torch.Tensor  # [R, W] i32 folded ids
    context_lens: torch.Tensor  # [R] i32
    softmax_scale: float
    query_scale: object  # None | float | f32 [R]


def kernel_query(q: torch.Tensor) -> torch.Tensor:
    """q [R, G, 128] -> the fp32 query the kernel computes with (see module doc)."""
    if q.dtype != torch.bfloat16:
        return q.float()
    x = q.float()
    amax = x.abs().amax(dim=-1, keepdim=True)
    scale = torch.where(amax > 0, amax * torch.tensor(1.0 / L.E4M3_MAX, dtype=torch.float32), torch.ones_like(amax))
    inv = 1.0 / scale
    return (x * inv).to(torch.float8_e4m3fn).float() * scale


def make_case(name: str, *, group: int, context_lens: list[int], q_dtype=torch.bfloat16, kv_heads: int = 2,
              query_scale="none", seed: int = 0, device="cpu", extra_width: int = 1) -> DecodeCase:
    """One batch: row r reads ``context_lens[r]`` tokens of KV head ``r % kv_heads`` through shuffled pages."""
    gen = torch.Generator().manual_seed(seed)
    rows = len(context_lens)
    pages_per_row = [max(1, math.ceil(n / L.PAGE_SIZE)) for n in context_lens]
    width = max(pages_per_row) + extra_width
    num_pages = sum(pages_per_row) + 3
    records = torch.randint(0, 256, (2, num_pages, kv_heads, L.RECORD_BYTES), generator=gen, dtype=torch.uint8)
    records[..., L.SCALE_OFFSET::7] = 255  # NaN scales sprinkled everywhere; valid tokens are rewritten below
    order = torch.randperm(num_pages, generator=gen).tolist()
    tables = torch.zeros(rows, width, dtype=torch.int32)  # unused entries 0 (never read)
    for r, n in enumerate(context_lens):
        head = r % kv_heads
        for p in range(pages_per_row[r]):
            page = order.pop()
            tables[r, p] = page * kv_heads + head
            used = min(L.PAGE_SIZE, max(0, n - p * L.PAGE_SIZE))
            scales = torch.randint(119, 128, (2, used, L.SCALE_BYTES), generator=gen, dtype=torch.uint8)
            records[:, page, head, L.SCALE_OFFSET:L.SCALE_OFFSET + used * L.SCALE_BYTES] = scales.reshape(2, -1)
    q = torch.randn(rows, group, L.HEAD_DIM, generator=gen) * 2
    if q_dtype == torch.float8_e4m3fn:
        q = q.to(torch.float8_e4m3fn)
    else:
        q = q.to(q_dtype)
    if query_scale == "tensor":
        qs = torch.rand(rows, generator=gen) + 0.5
    elif query_scale == "float":
        qs = 0.75
    else:
        qs = None
    out = torch.full((rows, group, L.HEAD_DIM), float("nan"), dtype=torch.bfloat16)
    to = lambda t: t.to(device)  # noqa: E731
    return DecodeCase(name, to(out), to(q), to(records[0].contiguous()), to(records[1].contiguous()), to(tables),
                      to(torch.tensor(context_lens, dtype=torch.int32)), 1.0 / math.sqrt(L.HEAD_DIM),
                      to(qs) if isinstance(qs, torch.Tensor) else qs)


def reference(case: DecodeCase) -> torch.Tensor:
    """The torch backend on the kernel's effective query: [R, G, 128] fp32."""
    # the reference backend, looked up by name in the registry: backends never import each other
    from atom_mxfp4.registry import REFERENCE_BACKEND, registered

    out = torch.empty(case.out.shape, dtype=torch.float32, device=case.out.device)
    registered()[REFERENCE_BACKEND].load().pa_decode(out, kernel_query(case.q), case.k_cache, case.v_cache,
                                                     case.tables, case.context_lens, softmax_scale=case.softmax_scale,
                                                     query_scale=case.query_scale, plan=None)
    return out


def tolerance(case: DecodeCase, ref: torch.Tensor) -> torch.Tensor:
    """Per-element bound: P rounded to bf16 (2**-9 relative each, so <= 2**-9 max|V| on the weighted mean),
    ``out`` rounded to bf16 (2**-9 |out|), fp32 accumulation order; doubled as a band."""
    bound = torch.zeros(ref.shape[0], 1, 1, device=ref.device)
    for r in range(ref.shape[0]):
        n = int(case.context_lens[r])
        if n:
            pages = case.tables[r, : math.ceil(n / L.PAGE_SIZE)].long()
            records = case.v_cache.reshape(-1, 1, L.RECORD_BYTES)[pages]  # [pages, 1, 8704]
            v = dequantize_mxfp4(L.data_view(records), L.scale_view(records)).flatten(0, 2)[:n]
            bound[r] = v.abs().max()
    return 2 * (2.0 ** -9 * bound + 2.0 ** -9 * ref.abs()) + 1e-6


FORCED_SPLITS = 8  # the self-check's third launch of every case: this many splits (forced), whatever the batch


def standard_cases(device="cpu") -> list[DecodeCase]:
    """Irregular shapes: empty rows, partial pages, contexts across splits, every specialization we ship."""
    return [
        make_case("g16-bf16-direct", group=16, context_lens=[97, 0, 1, 300], device=device, seed=1),
        make_case("g8-e4m3-qscale", group=8, context_lens=[128, 129, 5], q_dtype=torch.float8_e4m3fn,
                  query_scale="tensor", device=device, seed=2),
        make_case("g1-bf16-long", group=1, context_lens=[2049, 17, 640], query_scale="float", device=device, seed=3),
        make_case("g5-bf16-odd-group", group=5, context_lens=[255, 257], device=device, seed=4),
        # short rows in a wide table (a dense layer's whole block table): at FORCED_SPLITS each row's own tokens
        # divide over the splits (layout.row_tokens), not the width's 1280-token partitions
        make_case("g8-bf16-short-rows-wide-table", group=8, context_lens=[1000, 1, 300, 0, 2049], device=device,
                  seed=5, extra_width=60),
    ]
