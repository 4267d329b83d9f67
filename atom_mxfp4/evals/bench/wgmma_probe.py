"""The wgmma decision probe (issue 42, item 1): the swap-AB wgmma page loop with the real K decode, compiled and run.

The kernel (``_wgmma_probe_kernels.py``) extends the 2026-12-04 skeleton (``git show 7666128:docs/bench/
2026-12-04-wgmma-probe/probe.py``) with the MXFP4 K decode feeding an e4m3 wgmma (e2m1 -> e4m3 by bit placement, the
e8m0 scale per 32-dim group on the score side), Q as two e4m3 terms (hi + lo), V decoded to bf16 and the cp.async
ring of the page records from global memory. Keep the wgmma path only if it streams >= KEEP_PAGES_PER_US_SM on the
H200 (80% of copy: 0.8 x 4.25 TB/s / 17,408 B a page / 132 SMs).

    python3 atom_mxfp4/evals/bench/wgmma_probe.py          # sm_90 SASS per variant (CPU), beside the shipped kernel
    python3 atom_mxfp4/evals/bench/wgmma_probe.py --json   # the same as one JSON line
    python3 atom_mxfp4/evals/bench/wgmma_probe.py --run --out DIR   # GPU: pages/us/SM at 1/2/3 programs per SM,
                                                                    # checked against a float64 oracle; DIR/*.json|md

What triton 3.6 refused while building it (compile errors, verbatim):
- e4m3 operands under NVMMADistributedLayout instr_shape [16, 16, 16]: ptxas-side assertion "WGMMA type or shape is
  not supported" (NVGPUToLLVM getPtxAsm); the fp8 accumulator needs instr_shape [16, 16, 32] (ACC8).
- the e4m3 register A operands as warpgroup_mma_wait deps: "LLVM ERROR: Unexpected bitwidth in WGMMAWaitGroupOp: 8".
- max_num_imprecise_acc=32 with hi and lo chained into one accumulator: triton's fp8 promotion adds FADDs on the
  accumulators, ptxas C7514 "wgmma.mma_async instructions are serialized due to non wgmma instructions reading
  accumulator registers": 1071 loop instructions, a wait after every wgmma. The default (None) keeps them async.
- index() of a rank-3 NVMMASharedLayout buffer / of a permuted rank-4 reinterpreted view: "rank must be equal to or
  one less than the shape size. Got 3 and 2" (4 and 3); buffers are rank 2 and sliced instead.
e4m3 A from registers itself compiles (QGMMA.64x16x32.F32.E4M3.E4M3 with register A): no fallback was needed;
SHARED_HILO is kept as the comparison.

The CPU parts (argument parsing, the e2m1 -> e4m3 mapping, the Q hi/lo split, the oracle) import no triton:
tests/test_wgmma_probe.py runs them in the test process; the compile runs in a subprocess (TRITON_INTERPRET unset).
"""

from __future__ import annotations

import argparse
import enum
import json
import os
import sys
from pathlib import Path

from atom_mxfp4.evals.bench._wgmma_probe_bits import K_REGISTERS, K_SHARED

KEEP_PAGES_PER_US_SM = 1.48
PAGE_ELEMENTS = 128 * 256  # a page: 128 tokens x (128 K + 128 V) elements of one head
THREADS = 128  # one warpgroup
TOLERANCE = 5e-3  # rel-L2 of the probe's output vs the float64 oracle (bf16 P, e4m3 hi+lo Q; today's kernel: 2e-3)
SPLIT_TOLERANCE = 4e-3  # rel-L2 of hi + lo against Q (bf16 rounding of random data alone: ~2e-3)
SHOWN = ("QGMMA", "HGMMA", "WARPGROUP", "BAR", "LDS", "STS", "LDGSTS", "F2FP", "I2F", "F2I", "PRMT", "LOP3", "SHF",
         "IMAD", "HMUL2", "FMUL", "FFMA", "FMNMX", "MUFU", "SHFL")


class Variant(enum.Enum):
    """(what it is, K_SOURCE, Q terms)."""
    REGS_HILO = ("K e4m3 from registers (A), Q hi + lo", K_REGISTERS, 2)
    REGS_HI = ("K e4m3 from registers (A), Q hi only", K_REGISTERS, 1)
    SHARED_HILO = ("K e4m3 through shared memory (A), Q hi + lo", K_SHARED, 2)

    @property
    def label(self) -> str:
        return self.value[0]

    @property
    def k_source(self) -> int:
        return self.value[1]

    @property
    def q_terms(self) -> int:
        return self.value[2]


# ---- Q as two e4m3 terms (the kernel's _query, in torch) -----------------------------------------------------------
def q_split(q):
    """q [..., 16, 128] -> (hi, lo, shift) per [16, 128] block: x = q x 2**shift with max |x| in [128, 256),
    hi = e4m3(x), lo = e4m3(x - hi) (round to nearest even, as cvt.rn.satfinite)."""
    import torch
    x = q.float()
    amax = x.abs().amax(dim=(-1, -2), keepdim=True)
    shift = 7 - torch.floor(torch.log2(amax))
    x = x * torch.exp2(shift)
    hi = x.to(torch.float8_e4m3fn)
    lo = (x - hi.float()).to(torch.float8_e4m3fn)
    return hi, lo, shift


def split_error(q, terms: int = 2) -> float:
    """rel-L2 of hi (+ lo) x 2**-shift against q."""
    hi, lo, shift = q_split(q)
    back = (hi.double() + (lo.double() if terms == 2 else 0)) * (-shift.double()).exp2()
    return float((back - q.double()).norm() / q.double().norm())


# ---- pages and the float64 oracle ----------------------------------------------------------------------------------
def make_pages(num_pages: int, seed: int = 0, device="cpu"):
    """K and V caches [num_pages, 1, 8704] u8 of random codes, scale bytes in [120, 132] (inside the one-multiply
    window)."""
    import torch
    from atom_mxfp4.layout import RECORD_BYTES, SCALE_OFFSET
    gen = torch.Generator(device="cpu").manual_seed(seed)
    caches = []
    for _ in range(2):
        rec = torch.randint(0, 256, (num_pages, 1, RECORD_BYTES), dtype=torch.uint8, generator=gen)
        rec[..., SCALE_OFFSET:] = torch.randint(120, 133, (num_pages, 1, RECORD_BYTES - SCALE_OFFSET),
                                                dtype=torch.uint8, generator=gen)
        caches.append(rec.to(device))
    return caches


def decode_pages(cache):
    """[n, 1, 8704] u8 -> float64 [n, 128 tokens, 128 dims] through the reference codec (atom_mxfp4.format)."""
    import torch
    from atom_mxfp4.format import dequantize_mxfp4
    from atom_mxfp4.layout import SCALE_OFFSET
    data = cache[:, 0, :SCALE_OFFSET].reshape(-1, 128, 64)
    scale = cache[:, 0, SCALE_OFFSET:].reshape(-1, 128, 4)
    return dequantize_mxfp4(data, scale, torch.float64)


def oracle(q, k_cache, v_cache, tables, softmax_scale: float):
    """float64 attention of q [P, 16, 128] (bf16 values as they are) over the pages tables[p] of each program."""
    ids = tables.long().flatten()
    k = decode_pages(k_cache[ids]).view(tables.shape[0], -1, 128)  # [P, pages x 128, 128]
    v = decode_pages(v_cache[ids]).view(tables.shape[0], -1, 128)
    logits = q.double() @ k.transpose(1, 2) * softmax_scale
    return logits.softmax(dim=-1) @ v


def rel_l2(out, ref) -> float:
    return float((out.double() - ref).norm() / ref.norm())


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--run", action="store_true", help="on a GPU: pages/us/SM and the oracle check")
    parser.add_argument("--out", type=Path, help="--run: folder for results.json and results.md")
    parser.add_argument("--pages", type=int, default=64, help="--run: pages a program streams (default 64)")
    parser.add_argument("--stages", type=int, default=3, help="ring slots (default 3)")
    parser.add_argument("--variants", nargs="+", choices=[v.name for v in Variant], default=[v.name for v in Variant])
    args = parser.parse_args(argv)
    if args.run and args.out is None:
        parser.error("--run needs --out DIR")
    if args.pages < 1 or args.stages < 2:
        parser.error("--pages >= 1 and --stages >= 2")
    args.variants = [Variant[name] for name in args.variants]
    return args


# ---- compile-only (CPU) --------------------------------------------------------------------------------------------
SIGNATURE = {"q_ptr": "*bf16", "k_ptr": "*i32", "v_ptr": "*i32", "tables_ptr": "*i32", "out_ptr": "*bf16",
             "pages": "i32", "scale_log2e": "fp32"}


def compile_variant(variant: Variant, stages: int = 3):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from atom_mxfp4.evals.bench._wgmma_probe_kernels import wgmma_probe_kernel
    constants = {"K_SOURCE": variant.k_source, "Q_TERMS": variant.q_terms, "STAGES": stages}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(5)}
    return triton.compile(GluonASTSource(wgmma_probe_kernel, SIGNATURE, constants, attrs),
                          target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "enable_fp_fusion": True})


def sass_report(variant: Variant, stages: int = 3) -> dict:
    sys.path.insert(0, str(Path(__file__).parent))
    from sass_counts import cubin_sass, instructions, loops, opcodes, resource_usage
    try:
        kernel = compile_variant(variant, stages)
    except Exception as exc:  # a probe: what Gluon / ptxas refused, verbatim
        return {"variant": variant.name, "label": variant.label, "error": f"{type(exc).__name__}: {exc}"[:3000]}
    sass = cubin_sass(kernel.asm["cubin"])
    page_loops = [body for body in loops(sass) if any("HGMMA" in text for text in body)]
    body = max(page_loops, key=len)
    ops = opcodes(body)
    all_ops = opcodes(text for _, text in instructions(sass))
    return {"variant": variant.name, "label": variant.label, **resource_usage(kernel.asm["cubin"]),
            "dynamic_shared": kernel.metadata.shared, "loop_instructions": len(body),
            "per_element": len(body) / (PAGE_ELEMENTS // THREADS), "loop_ops": dict(ops),
            "kernel_spill_ops": all_ops.get("LDL", 0) + all_ops.get("STL", 0)}


def shipped_report() -> dict:
    """The shipped Hopper pa_decode's default variant (hopper_sass.py's first row), compiled in this run."""
    sys.path.insert(0, str(Path(__file__).parent))
    import hopper_sass
    name, variant = next(iter(hopper_sass.VARIANTS.items()))
    found = hopper_sass.report(variant)
    found.pop("_asm")
    return {"variant": f"shipped pa_decode, {name}", **found}


def _table(rows: list[dict]) -> str:
    head = ("| variant | registers | spill (local B) | shared B | loop SASS / page / thread | per element | "
            + " | ".join(SHOWN) + " |\n|---|---:|---:|---:|---:|---:|" + "---:|" * len(SHOWN))
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['variant']}: {r['label']} | failed: {r['error'].splitlines()[0][:200]} |")
            continue
        lines.append(f"| {r['variant']}{': ' + r['label'] if 'label' in r else ''} | {r['registers']} | {r['local']} | "
                     f"{r['dynamic_shared']} | {r['loop_instructions']} | {r['per_element']:.2f} | "
                     + " | ".join(str(r["loop_ops"].get(op, 0)) for op in SHOWN) + " |")
    return "\n".join(lines)


def compile_main(args) -> None:
    import triton
    rows = [sass_report(v, args.stages) for v in args.variants] + [shipped_report()]
    if args.json:
        print(json.dumps({"triton": triton.__version__, "stages": args.stages, "variants": rows}))
        return
    print(f"triton {triton.__version__}, sm_90, 4 warps, one loop trip = one 128-token page = {PAGE_ELEMENTS} K+V "
          f"elements, {PAGE_ELEMENTS // THREADS} per thread; ring of {args.stages} stages\n")
    print(_table(rows))
    for r in rows:
        if "error" in r:
            print(f"\n{r['variant']} failed:\n{r['error']}")


# ---- GPU (--run) ---------------------------------------------------------------------------------------------------
def run_main(args) -> None:
    import math
    import torch
    import triton
    from atom_mxfp4.evals.bench._timing import eager_time_ms
    from atom_mxfp4.evals.bench._wgmma_probe_kernels import wgmma_probe_kernel
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    softmax_scale = 1 / math.sqrt(128)
    pages = args.pages
    k_cache, v_cache = make_pages(3 * sms * pages, seed=0, device=dev)
    k_words, v_words = k_cache.view(torch.int32), v_cache.view(torch.int32)  # the kernel reads int32 words
    gen = torch.Generator(device="cpu").manual_seed(1)
    rows, check = [], []
    header = {"device": torch.cuda.get_device_name(dev), "sms": sms, "torch": torch.__version__,
              "triton": triton.__version__, "pages_per_program": pages, "stages": args.stages,
              "keep_threshold_pages_per_us_sm": KEEP_PAGES_PER_US_SM, "tolerance_rel_l2": TOLERANCE}
    for per_sm in (1, 2, 3):
        programs = per_sm * sms
        tables = torch.randperm(k_cache.shape[0], generator=gen)[:programs * pages].view(programs, pages)
        tables = tables.to(torch.int32).to(dev)
        q = torch.randn(programs, 16, 128, generator=gen).bfloat16().to(dev)
        ref = oracle(q[:8], k_cache, v_cache, tables[:8], softmax_scale)  # 8 programs' worth of float64
        for variant in args.variants:
            out = torch.full_like(q, float("nan"))

            def launch():
                wgmma_probe_kernel[(programs,)](q, k_words, v_words, tables, out, pages,
                                                softmax_scale * 1.4426950408889634, K_SOURCE=variant.k_source,
                                                Q_TERMS=variant.q_terms, STAGES=args.stages, num_warps=4)
            try:
                us = eager_time_ms(launch, reps=20) * 1e3  # median of event-timed launches
            except Exception as exc:  # a probe: report and go on
                rows.append({"variant": variant.name, "programs_per_sm": per_sm, "error": f"{exc}"[:2000]})
                continue
            err = rel_l2(out[:8], ref)
            rows.append({"variant": variant.name, "programs_per_sm": per_sm, "us": us,
                         "pages_per_us_sm": programs * pages / us / sms, "rel_l2": err, "ok": err <= TOLERANCE,
                         "tb_per_s": programs * pages * 2 * 8704 / us / 1e6})
            print(rows[-1], flush=True)
    try:  # the shipped kernel in the same run, the same pages (3 programs' worth a SM as rows)
        from atom_mxfp4 import ops
        programs = 3 * sms
        tables = torch.arange(programs * pages, dtype=torch.int32, device=dev).view(programs, pages)
        lens = torch.full((programs,), pages * 128, dtype=torch.int32, device=dev)
        q = torch.randn(programs, 16, 128, generator=gen).bfloat16().to(dev)
        out = torch.empty_like(q)
        plan = ops.plan_pa_decode(programs, pages, 16, dev)
        us = eager_time_ms(lambda: ops.pa_decode(out, q, k_cache, v_cache, tables, lens, softmax_scale=softmax_scale,
                                                 plan=plan, check=False), reps=20) * 1e3
        check.append({"variant": "shipped pa_decode", "rows": programs, "us": us,
                      "pages_per_us_sm": programs * pages / us / sms,
                      "tb_per_s": programs * pages * 2 * 8704 / us / 1e6,
                      "rel_l2": rel_l2(out[:8], oracle(q[:8], k_cache, v_cache, tables[:8], softmax_scale))})
    except Exception as exc:
        check.append({"variant": "shipped pa_decode", "error": f"{type(exc).__name__}: {exc}"[:2000]})
    print(check[-1], flush=True)
    best = max((r for r in rows if r.get("ok")), key=lambda r: r["pages_per_us_sm"], default=None)
    decision = {"best": best, "keep": bool(best and best["pages_per_us_sm"] >= KEEP_PAGES_PER_US_SM)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({**header, "rows": rows, "shipped": check,
                                                       "decision": decision}, indent=1))
    lines = [f"{header['device']}, {sms} SMs, {pages} pages a program, ring of {args.stages}; keep if >= "
             f"{KEEP_PAGES_PER_US_SM} pages/us/SM with rel-L2 <= {TOLERANCE}\n",
             "| variant | programs / SM | us | pages / us / SM | TB/s | rel-L2 vs fp64 |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows + check:
        if "error" in r:
            lines.append(f"| {r['variant']} | {r.get('programs_per_sm', '')} | failed: {r['error'][:150]} | | | |")
        else:
            lines.append(f"| {r['variant']} | {r.get('programs_per_sm', 3)} | {r['us']:.1f} | "
                         f"{r['pages_per_us_sm']:.2f} | {r['tb_per_s']:.2f} | {r['rel_l2']:.2e} |")
    lines.append(f"\ndecision: {'KEEP' if decision['keep'] else 'STOP'} (best: {best})")
    (args.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv=None) -> None:
    args = parse_args(argv)
    os.environ.pop("TRITON_INTERPRET", None)  # compile / run for the GPU target, not the interpreter
    run_main(args) if args.run else compile_main(args)


if __name__ == "__main__":
    main()
