"""The Hopper (Gluon) pa_decode compiled for sm_90 on a machine without a GPU: registers, spills, main-loop SASS.

Triton compiles Gluon kernels through the same ``triton.compile`` path as Triton ones (a ``GluonASTSource``, see
``atom_mxfp4.kernels.hopper.pa_decode.compile_for_sm90``) with the ptxas / cuobjdump it ships. The main loop is the
first span closed by a backward branch that holds MMAs (``hot_loop``): with the default one-multiply decode the kernel
holds a second such loop after it, the exact fallback pass (docs/hopper.md "One multiply per pair"), which the
"exact decode only" variant shows alone. One trip decodes one 128-token page of K and V, 128 x 256 elements over 128
threads = 256 elements per thread (128 over the 8-warp variants' 256 threads), so instructions per element = loop
instructions / elements per thread.

    python3 atom_mxfp4/evals/bench/hopper_sass.py            # table, next to the Triton kernel's default
                                                             # (docs/triton.md)
    python3 atom_mxfp4/evals/bench/hopper_sass.py --json     # one JSON object (tests/test_hopper_compile.py reads it)
    python3 atom_mxfp4/evals/bench/hopper_sass.py --dump DIR # also the SASS / PTX / TTGIR of each variant
    python3 atom_mxfp4/evals/bench/hopper_sass.py --index [--json]  # the index scorer (index_topk.py) instead: one
                                                                    # trip = one page (16896 B fp8, 8704 B MXFP4)
                                                                    # over 128 threads
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # compile for the GPU target, not the interpreter

import triton  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from sass_counts import SHOWN, cubin_sass, instructions, loops, opcodes, resource_usage  # noqa: E402

from atom_mxfp4.kernels.hopper import layout as L  # noqa: E402
from atom_mxfp4.kernels.hopper.pa_decode import DEFAULT_CONFIG, HopperConfig, compile_for_sm90  # noqa: E402


def elements_per_thread(warps: int) -> int:
    """One page of K and V per loop trip over the program's threads: 256 at 4 warps, 128 at 8."""
    return L.PAGE_SIZE * 2 * L.HEAD_DIM // (warps * L.LANES)


BUDGET = 4.7  # issue 14: instructions / element the H200 can issue at 80% of copy bandwidth at 1.78 GHz
#               (docs/hopper.md)
VARIANTS = {
    "direct (default)": dict(config=DEFAULT_CONFIG),
    "split": dict(config=DEFAULT_CONFIG, split=True),
    "direct, query_scale tensor": dict(config=DEFAULT_CONFIG, query_scale=True),
    "direct, 3 stages": dict(config=HopperConfig(stages=3)),
    "direct, exact decode only": dict(config=HopperConfig(fast_decode=False)),
    "attend, dense": dict(config=DEFAULT_CONFIG, source="dense"),
    "attend, sparse (16 blocks)": dict(config=DEFAULT_CONFIG, source="sparse", topk=16),
    "attend, sparse, split (64 blocks x 4 pages)": dict(config=DEFAULT_CONFIG, source="sparse", split=True, topk=64,
                                                        pages_per_block=4),
    # the 8-warp program: 8 warps x 16 tokens of each page (docs/hopper.md "8 warps per program")
    "8 warps, split": dict(config=HopperConfig(warps=8), split=True),
    "8 warps, attend, sparse, split (16 blocks)": dict(config=HopperConfig(warps=8), source="sparse", split=True,
                                                       topk=16),
    "8 warps, split, exact decode only": dict(config=HopperConfig(warps=8, fast_decode=False), split=True),
    # the split merge over a thread-block cluster (atom_mxfp4/kernels/hopper/_cluster.py; docs/hopper.md "The split
    # merge over a cluster"): the sparse attend's batch-1 launch (16 one-page splits), a dense one of 4, the 8-warp
    # program's 8
    "attend, sparse, cluster of 16 (16 blocks)": dict(config=DEFAULT_CONFIG, source="sparse", topk=16, cluster=16),
    "split, cluster of 4": dict(config=DEFAULT_CONFIG, cluster=4),
    "8 warps, split, cluster of 8": dict(config=HopperConfig(warps=8), cluster=8),
    # the split tail (policy.tail_for, HopperConfig.tail_splits; 3 by default): rows before the tail direct, the
    # tail rows' splits merged through L2, both epilogues in one kernel
    "split tail of 3": dict(config=HopperConfig(tail_splits=3), tail=3),
    "attend, dense, split tail of 3": dict(config=HopperConfig(tail_splits=3), source="dense", tail=3),
    # 64 splits as 4 clusters of 16 whose merged head slices meet through L2 (grouped)
    "attend, sparse, split, grouped clusters of 16 (64 blocks)": dict(config=DEFAULT_CONFIG, source="sparse", topk=64,
                                                                    split=True, cluster=16),
    # the in-warp page overlap (HopperConfig.overlap, _loop._stream; off by default): each warp loads the next page's
    # K words from shared memory during a page's trip (the policy's dense shapes: direct, split, the 8-warp program)
    "direct, overlap": dict(config=HopperConfig(overlap=True)),
    "split, overlap": dict(config=HopperConfig(overlap=True), split=True),
    "attend, dense, overlap": dict(config=HopperConfig(overlap=True), source="dense"),
    "8 warps, split, overlap": dict(config=HopperConfig(warps=8, overlap=True), split=True),
}
CLUSTER_OPS = ("UCGABAR_ARV", "UCGABAR_WAIT", "MEMBAR", "ATOMG", "LD")  # whole-kernel counts the report keeps
HOPPER_SHOWN = SHOWN + ("SHFL", "MUFU", "LDL", "STL")


def resources(cubin: bytes) -> dict:
    """``cuobjdump -res-usage`` of the kernel (registers, stack, local: bytes per thread, > 0 means spills; static
    shared) and its SASS."""
    return {**resource_usage(cubin), "sass": cubin_sass(cubin)}


def hot_loop(sass: str) -> list[str]:
    """The first loop (in address order) with MMAs: the page loop the kernel runs (the exact fallback comes after)."""
    found = [body for body in loops(sass) if any(" HMMA" in f" {text}" for text in body)]
    if not found:
        raise RuntimeError("no loop with HMMA found in the SASS")
    return found[0]


def _body_start(found: list[tuple[int, str]], body: list[str]) -> int:
    """Index in ``found`` (sass_counts.instructions) where the whole loop body starts (its first instruction's text
    alone, e.g. a BAR.SYNC, may occur earlier)."""
    texts = [text for _, text in found]
    return next(i for i in range(len(texts) - len(body) + 1) if texts[i:i + len(body)] == body)


def outside_loop(found: list[tuple[int, str]], first: int, length: int) -> dict:
    """Instructions and CTA barriers before the hot loop (the prologue) and after it (the epilogue; with the default
    decode also the exact fallback pass and, split, the merge): each runs once per program, so at small batches
    (one or two pages per program) they are most of a program's time. ``found``: the kernel's instructions
    (sass_counts.instructions), the loop ``length`` of them from index ``first`` (``_body_start``)."""
    texts = [text for _, text in found]
    before, after = texts[:first], texts[first + length:]
    return {"before": len(before), "before_bar": opcodes(before).get("BAR", 0),
            "after": len(after), "after_bar": opcodes(after).get("BAR", 0)}


def skippable(found: list[tuple[int, str]], first: int, length: int) -> int:
    """Instructions of the hot loop (``found[first:first + length]``, as ``outside_loop``) that a forward branch
    inside it jumps over: the O rescale's 64 ``FMUL`` per thread, which a warp skips when none of its heads' running
    maxima moved (docs/hopper.md "Rescaling O only when the maximum moves"). Loop instructions minus this = a trip
    that rescales nothing."""
    span = found[first:first + length]
    end = span[-1][0]
    skipped = 0
    for address, text in span:
        branch = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", text)
        if branch and address < int(branch.group(1), 16) <= end:
            skipped += sum(1 for a, _ in span if address < a < int(branch.group(1), 16))
    return skipped


def report(variant: dict) -> dict:
    kernel = compile_for_sm90(**variant)
    warps = kernel.metadata.num_warps  # what compile_for_sm90 compiled for
    found = resources(kernel.asm["cubin"])
    sass = found.pop("sass")
    body = hot_loop(sass)
    ops = opcodes(body)
    found_ins = instructions(sass)  # the whole kernel's, once
    all_ops = opcodes(text for _, text in found_ins)
    first = _body_start(found_ins, body)
    skipped = skippable(found_ins, first, len(body))
    return {**found, "dynamic_shared": kernel.metadata.shared, "loop_instructions": len(body),
            "warps": warps, "elements_per_thread": elements_per_thread(warps),
            "per_element": len(body) / elements_per_thread(warps), "rescale_block": skipped,
            "per_element_no_rescale": (len(body) - skipped) / elements_per_thread(warps),
            "loop_ops": dict(ops), "kernel_spill_ops": all_ops.get("LDL", 0) + all_ops.get("STL", 0),
            "kernel_ops": {op: all_ops.get(op, 0) for op in CLUSTER_OPS},
            "outside_loop": outside_loop(found_ins, first, len(body)),
            "_asm": {"sass": sass, "ptx": kernel.asm["ptx"], "ttgir": kernel.asm["ttgir"]}}


INDEX_PAGE_BYTES = 16896  # one fp8 index-K page record: what one trip of the scorer's loop streams


def index_report() -> dict:
    """The index scorer (fp8 and MXFP4 index-K) at 2 / 3 / 4 ring stages: registers, spills, shared memory, its page
    loop (per byte of the dtype's record: 16896 / 8704 B per page)."""
    from atom_mxfp4.kernels.hopper.index_topk import IndexConfig
    from atom_mxfp4.kernels.hopper.index_topk import compile_for_sm90 as compile_index
    out = {}
    for dtype, stages in [(d, s) for d in ("fp8", "mxfp4") for s in (2, 3, 4)]:
        kernel = compile_index(IndexConfig(stages=stages), dtype)
        found = resources(kernel.asm["cubin"])
        sass = found.pop("sass")
        body = hot_loop(sass)
        all_ops = opcodes(text for _, text in instructions(sass))
        page_bytes = INDEX_PAGE_BYTES if dtype == "fp8" else L.RECORD_BYTES
        out[f"{dtype}, {stages} stages"] = {
            **found, "dtype": dtype, "dynamic_shared": kernel.metadata.shared, "loop_instructions": len(body),
            "per_byte": len(body) * L.THREADS / page_bytes, "loop_ops": dict(opcodes(body)),
            "kernel_spill_ops": all_ops.get("LDL", 0) + all_ops.get("STL", 0)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--dump", type=Path, help="write each variant's SASS / PTX / TTGIR into this folder")
    parser.add_argument("--index", action="store_true", help="the fp8 index-K scorer instead of pa_decode")
    args = parser.parse_args()
    if args.index:
        results = index_report()
        if args.json:
            print(json.dumps({"triton": triton.__version__, "variants": results}))
            return
        shown = ("HMMA", "F2FP", "HADD2", "HMUL2", "FFMA", "LDS", "STS", "LDGSTS", "BAR", "SHFL", "IMAD", "LOP3",
                 "PRMT", "FSEL")
        print(f"triton {triton.__version__}, target sm_90; one trip = one page record over {L.THREADS} threads\n")
        print("| variant | registers | spill (local B) | shared B | loop instructions / thread | per page byte | "
              + " | ".join(shown) + " |\n|---|---:|---:|---:|---:|---:|" + "---:|" * len(shown))
        for name, r in results.items():
            print(f"| {name} | {r['registers']} | {r['local']} | {r['dynamic_shared']} | {r['loop_instructions']} | "
                  f"{r['per_byte']:.2f} | " + " | ".join(str(r["loop_ops"].get(op, 0)) for op in shown) + " |")
        return
    results = {}
    for name, variant in VARIANTS.items():
        result = report(variant)
        asm = result.pop("_asm")
        if args.dump:
            args.dump.mkdir(parents=True, exist_ok=True)
            stem = re.sub(r"\W+", "_", name).strip("_")
            for kind, text in asm.items():
                (args.dump / f"{stem}.{kind}").write_text(text)
        results[name] = result
    if args.json:
        print(json.dumps({"triton": triton.__version__, "budget": BUDGET, "variants": results}))
        return
    print(f"triton {triton.__version__}, target sm_90, budget {BUDGET} instructions / element\n")
    print("| variant | registers | spill (local B) | shared B | loop instructions / thread | elements / thread | "
          "instructions / element | skipped without a rescale | per element then | "
          + " | ".join(HOPPER_SHOWN) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * len(HOPPER_SHOWN))
    for name, r in results.items():
        print(f"| {name} | {r['registers']} | {r['local']} | {r['dynamic_shared']} | {r['loop_instructions']} | "
              f"{r['elements_per_thread']} | {r['per_element']:.2f} | {r['rescale_block']} | "
              f"{r['per_element_no_rescale']:.2f} | "
              + " | ".join(str(r["loop_ops"].get(op, 0)) for op in HOPPER_SHOWN) + " |")
    print("\nOutside the hot loop (once per program): instructions and CTA barriers (BAR)\n")
    print("| variant | before the loop | BAR | after the loop | BAR |\n|---|---:|---:|---:|---:|")
    for name, r in results.items():
        o = r["outside_loop"]
        print(f"| {name} | {o['before']} | {o['before_bar']} | {o['after']} | {o['after_bar']} |")


if __name__ == "__main__":
    main()
