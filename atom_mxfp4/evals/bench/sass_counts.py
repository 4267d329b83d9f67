"""Static instruction counts of the Triton pa_decode variants for sm_90, compiled on a machine without a GPU.

Triton compiles for a named target with the ptxas and cuobjdump it ships, so the instruction mix of each
``DecodeConfig`` can be read before spending device time. Pointer arguments get the 16-byte divisibility that
Triton's launcher specialises on at run time (without it every record byte would be a separate ``LDG.U8``).

    python3 atom_mxfp4/evals/bench/sass_counts.py            # table of the decode loop per variant
    python3 atom_mxfp4/evals/bench/sass_counts.py --dump DIR # also write each variant's SASS
    python3 atom_mxfp4/evals/bench/sass_counts.py --write-json # fused_qknorm_rope_write: registers, spills, SASS
                                                               # per config

The main loop is the largest span closed by a backward branch; one trip decodes ``block_n`` tokens of K and V
(``block_n * 256`` elements) with ``num_warps * 32`` threads, so instructions per element =
loop instructions / (block_n * 256 / threads). It is a count, not a time: issue rate, latency and memory are not
modelled (docs/triton.md turns it into an issue-rate bound).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import importlib
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # compile for the GPU target, not the interpreter

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

decode = importlib.import_module("atom_mxfp4.kernels.triton.pa_decode")
decode_variant = importlib.import_module("atom_mxfp4.kernels.triton._mxfp4").decode_variant
_options = importlib.import_module("atom_mxfp4.kernels.triton._options")
FUSED, UNFUSED = _options.FUSED, _options.UNFUSED  # the launchers' compile options: the SASS counted is the SASS run

SIGNATURE = {
    "out_ptr": "*bf16", "q_ptr": "*bf16", "k_ptr": "*u8", "v_ptr": "*u8", "tables_ptr": "*i32",
    "context_lens_ptr": "*i32", "query_scale_ptr": "*fp32", "part_out_ptr": "*fp32", "part_lse_ptr": "*fp32",
    "table_stride": "i32", "group": "i32", "pages_per_split": "i32", "num_splits": "i32", "logit_scale": "fp32",
    "HAS_QUERY_SCALE": "constexpr", "SPLIT": "constexpr", "BLOCK_N": "constexpr", "MMA_BF16": "constexpr",
    "DECODE": "constexpr",
}
SHOWN = ("HMMA", "LDGSTS", "LDG", "LDS", "STS", "BAR", "PRMT", "LOP3", "SHF", "IMAD", "FMUL", "HMUL2", "HADD2", "F2FP")
VARIANTS = {  # the counts of removed variants (dot_scaled, prefetch, no-decode ablation): docs/triton.md
    "PTX decode (default)": decode.DecodeConfig(),
    "PTX decode, 2 stages": decode.DecodeConfig(num_stages=2, maxnreg=None, programs_per_sm=3),
    "Triton decode, 2 stages": decode.DecodeConfig(asm=False, num_stages=2, maxnreg=None),
}


@dataclass
class LoopCounts:
    instructions: int
    ops: collections.Counter
    shared_bytes: int
    elements_per_thread: int

    @property
    def per_element(self) -> float:
        return self.instructions / self.elements_per_thread


def compile_sass(config: decode.DecodeConfig, split: bool = False, query_scale: str | None = None) -> tuple[str, int]:
    """``query_scale``: the pointer type of a query_scale tensor ("*fp32", "*fp64", ...); None: a number or none."""
    signature = dict(SIGNATURE, query_scale_ptr=query_scale or SIGNATURE["query_scale_ptr"])
    constants = {"HAS_QUERY_SCALE": query_scale is not None, "SPLIT": split, "BLOCK_N": config.block_n,
                 "MMA_BF16": True, "DECODE": decode_variant(config.asm).value}  # TRITON_INTERPRET is unset: the GPU's
    pointers = [i for i, kind in enumerate(signature.values()) if kind.startswith("*")]
    attrs = {(i,): [["tt.divisibility", 16]] for i in pointers}
    kernel = triton.compile(ASTSource(decode._pa_decode_kernel, signature, constants, attrs),
                            target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": config.num_warps, "num_stages": config.num_stages, **FUSED,
                                     **({"maxnreg": config.maxnreg} if config.maxnreg is not None else {})})
    return cubin_sass(kernel.asm["cubin"]), kernel.metadata.shared


def _cuobjdump(cubin: bytes, flag: str) -> str:
    """``cuobjdump FLAG`` of a cubin, by the cuobjdump Triton ships."""
    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        return subprocess.run([str(cuobjdump), flag, str(path)], capture_output=True, text=True, check=True).stdout


def cubin_sass(cubin: bytes) -> str:
    """The SASS of a cubin."""
    return _cuobjdump(cubin, "-sass")


def resource_usage(cubin: bytes) -> dict:
    """``cuobjdump -res-usage`` of a cubin: registers per thread, stack, local bytes (> 0 means spills) and static
    shared bytes."""
    line = next(line for line in _cuobjdump(cubin, "-res-usage").splitlines() if "REG:" in line)
    fields = {key: int(value) for key, value in re.findall(r"(\w+):(\d+)", line)}
    return {"registers": fields["REG"], "stack": fields["STACK"], "local": fields["LOCAL"],
            "static_shared": fields["SHARED"]}


def instructions(sass: str) -> list[tuple[int, str]]:
    """(address, text) of every SASS instruction."""
    return [(int(m.group(1), 16), m.group(2).strip()) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", sass)]


def opcodes(texts) -> collections.Counter:
    """Instructions by opcode (predicate and modifiers dropped: ``@P0 LDS.128 ...`` counts as LDS)."""
    return collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0] for text in texts)


# ---- index_topk's score kernel: whole-kernel counts per index-K dtype (one 128-token tile per block visited) -------
INDEX_SIGNATURE = {
    "idx_q_ptr": "*bf16", "index_k_ptr": "*u8", "block_table_ptr": "*i32", "row_request_ptr": "*i32",
    "row_position_ptr": "*i32", "keys_ptr": "*i32", "num_rows": "i32", "num_heads": "i32", "table_stride": "i32",
    "max_blocks": "i32", "blocks_per_program": "i32", "init_blocks": "i32", "local_blocks": "i32",
    "BLOCK_N": "constexpr", "MMA_BF16": "constexpr", "DECODE": "constexpr", "Q_FP32": "constexpr",
    "INDEX_FP8": "constexpr", "INDEX_RECORD_BYTES": "constexpr",
}
INDEX_VARIANTS = {  # name: (index-K dtype, IndexConfig.asm)
    "mxfp4 index-K, PTX decode (default)": ("mxfp4", True),
    "fp8 index-K, hardware e4m3 + per-block scale (default)": ("fp8", True),
    "fp8 index-K, bit decode (the interpreter's path; the CUDA path before 2026-12-03)": ("fp8", False),
}


def index_counts(index_k_dtype: str, asm: bool) -> dict:
    """Compile index_topk's score kernel for sm_90 (default IndexConfig tile and warps); its whole SASS counted."""
    from atom_mxfp4.index_k import IndexKDtype
    index = importlib.import_module("atom_mxfp4.kernels.triton.index_topk")
    dtype = IndexKDtype.parse(index_k_dtype)
    cfg = index.DEFAULT_CONFIG
    constants = {"BLOCK_N": cfg.block_n, "MMA_BF16": True, "DECODE": decode_variant(asm).value, "Q_FP32": False,
                 "INDEX_FP8": dtype is IndexKDtype.FP8, "INDEX_RECORD_BYTES": dtype.record_bytes}
    return whole_kernel_counts(_compile_sm90(index._score_kernel, INDEX_SIGNATURE, constants, cfg.score_warps))


def _compile_sm90(kernel, signature: dict, constants: dict, num_warps: int):
    """``kernel`` compiled for sm_90 with every pointer argument 16-byte aligned (as the launches' tensors are)."""
    attrs = {(i,): [["tt.divisibility", 16]] for i, kind in enumerate(signature.values()) if kind[0] == "*"}
    return triton.compile(ASTSource(kernel, signature, constants, attrs), target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": num_warps, **FUSED})


TILED_SIGNATURE = {  # _score_tiled_kernel's arguments, in order
    "idx_q_ptr": "*bf16", "index_k_ptr": "*u8", "block_table_ptr": "*i32", "row_request_ptr": "*i32",
    "row_position_ptr": "*i32", "tile_start_ptr": "*i32", "keys_ptr": "*i32", "num_rows": "i32", "num_heads": "i32",
    "table_stride": "i32", "max_blocks": "i32", "blocks_per_program": "i32", "init_blocks": "i32",
    "local_blocks": "i32", "BLOCK_M": "constexpr", "HEADS": "constexpr", "BLOCK_N": "constexpr",
    "MMA_BF16": "constexpr", "DECODE": "constexpr", "INDEX_FP8": "constexpr", "INDEX_RECORD_BYTES": "constexpr",
}
TILED_VARIANTS = {  # name: (index-K dtype, rows per tile); one index head (a TP4 rank)
    "tiled scorer, mxfp4 index-K, 32 rows": ("mxfp4", 32),
    "tiled scorer, fp8 index-K, 32 rows": ("fp8", 32),
}


def tiled_index_counts(index_k_dtype: str, tile_rows: int) -> dict:
    """Compile the prefill-shaped scorer (``IndexConfig(tile_rows=...)``) for sm_90, one index head, the launch's
    BLOCK_N (<= 64) and warps; its whole SASS counted."""
    from atom_mxfp4.index_k import IndexKDtype
    index = importlib.import_module("atom_mxfp4.kernels.triton.index_topk")
    dtype = IndexKDtype.parse(index_k_dtype)
    cfg = index.DEFAULT_CONFIG
    constants = {"BLOCK_M": tile_rows, "HEADS": 1, "BLOCK_N": min(cfg.block_n, 64), "MMA_BF16": True,
                 "DECODE": decode_variant(cfg.asm).value, "INDEX_FP8": dtype is IndexKDtype.FP8,
                 "INDEX_RECORD_BYTES": dtype.record_bytes}
    return whole_kernel_counts(_compile_sm90(index._score_tiled_kernel, TILED_SIGNATURE, constants, cfg.score_warps))


def whole_kernel_counts(kernel) -> dict:
    """SASS instructions of a compiled kernel (all of it, every branch once), by opcode, and its shared bytes."""
    ops = opcodes(text for _, text in instructions(cubin_sass(kernel.asm["cubin"])))
    return {"instructions": sum(ops.values()), "ops": dict(ops), "shared": kernel.metadata.shared}


# ---- fused_qknorm_rope_write: whole-kernel counts per launch shape (TP4 rank: 16 q, 1 kv, 1 index head) ---------
WRITE_CONSTANTS = {"NUM_Q": 16, "NUM_KV": 1, "NUM_IQ": 1, "K_ROW": 16, "V_ROW": 17, "IQ_ROW": 18, "IK_ROW": 19,
                   "ROTARY_DIM": 64, "SCALE_MODE": 2}  # MSE: the longest quantize path


def write_counts(config, index_fp8: bool = False) -> dict:
    """Compile the fused write for sm_90 with ``WriteConfig`` config. Integer arguments that end in ``stride`` get the
    16-divisibility the launcher specialises on (the cache page strides are 8704 * heads)."""
    import inspect
    write = importlib.import_module("atom_mxfp4.kernels.triton.qknorm_rope_write")
    kinds = {"qkv_ptr": "*bf16", "positions_ptr": "*i64", "slot_ptr": "*i64", "cos_sin_ptr": "*fp32", "eps": "fp32",
             "q_out_ptr": "*bf16", "iq_out_ptr": "*bf16"}
    signature = {name: "constexpr" if name.isupper() else kinds.get(name) or (
        "*fp32" if name.endswith("weight_ptr") else "*u8" if name.endswith("cache_ptr") else "i32")
        for name in inspect.signature(write._qknorm_rope_write_kernel.fn).parameters}
    constants = dict(WRITE_CONSTANTS, INDEX_FP8=index_fp8, TOKENS_PER_PROGRAM=config.tokens_per_program,
                     HEADS_PER_PROGRAM=config.heads_per_program,
                     INDEX_HEADS_PER_PROGRAM=config.index_heads_per_program(WRITE_CONSTANTS["NUM_IQ"]), HW_BF16=True,
                     EARLY_LOADS=config.early_loads)
    attrs = {(i,): [["tt.divisibility", 16]] for i, (name, kind) in enumerate(signature.items())
             if kind[0] == "*" or name.endswith("stride")}
    kernel = triton.compile(ASTSource(write._qknorm_rope_write_kernel, signature, constants, attrs),
                            target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": config.num_warps, **UNFUSED,
                                     **({"maxnreg": config.maxnreg} if config.maxnreg is not None else {})})
    return {**whole_kernel_counts(kernel), **resource_usage(kernel.asm["cubin"]),
            **branch_counts(kernel, config, signature),
            "maxnreg": config.maxnreg}


WRITE_KINDS = ("q", "k", "v", "idx_k", "idx_q")  # the kernel's branches
WRITE_OUTPUTS = {"q": "q_out_ptr", "k": "k_cache_ptr", "v": "v_cache_ptr", "idx_k": "ik_cache_ptr",
                 "idx_q": "iq_out_ptr"}  # the one output pointer each branch writes through
SM90_PARAM_BASE = 0x210  # where the kernel parameters start in constant bank 0 on sm_90


def param_offsets(signature: dict) -> dict:
    """Constant-bank offset of each runtime parameter (``signature``: name -> Triton type, in order; constexprs are
    not parameters): pointers 8 bytes, scalars 4, each aligned to its size."""
    offsets, offset = {}, SM90_PARAM_BASE
    for name, kind in signature.items():
        if kind == "constexpr":
            continue
        size = 8 if kind.startswith("*") or kind.endswith("64") else 4
        offset = -(-offset // size) * size
        offsets[name] = offset
        offset += size
    return offsets


def branch_counts(kernel, config, signature) -> dict:
    """Per row kind (the code between the kernel's unconditional EXITs: one per branch, q's span holding the
    prologue too; a span is the branch whose output pointer it reads from the constant bank, so the attribution does
    not depend on the order the compiler lays the branches out in, which differs between triton 3.6 and 3.8):
    SASS instructions per 128-value head row (the span divided by the rows one warp runs in that branch, rows per
    program / warps), and the global loads issued after the norm's first ``MUFU.RSQ`` (the loads that wait for the
    row's sum of squares: ``WriteConfig.early_loads`` issues them before it). Static counts: every instruction of a
    branch once."""
    sass = [text for _, text in instructions(cubin_sass(kernel.asm["cubin"]))]
    spans, current = [], []
    for text in sass:
        current.append(text)
        if re.search(r"\bEXIT\b", text) and not text.lstrip().startswith("@"):
            spans.append(current)
            current = []
    offsets = param_offsets(signature)
    by_kind = {}
    for span in spans:
        read = {int(c, 16) for c in re.findall(r"c\[0x0\]\[(0x[0-9a-f]+)\]", "\n".join(span))}
        kinds = [kind for kind, name in WRITE_OUTPUTS.items() if offsets[name] in read]
        assert len(kinds) == 1 and kinds[0] not in by_kind, (kinds, sorted(by_kind))
        by_kind[kinds[0]] = span
    assert sorted(by_kind) == sorted(WRITE_KINDS), sorted(by_kind)
    tpp, warps = config.tokens_per_program, config.num_warps
    rows = {"q": tpp * config.heads_per_program, "k": tpp, "v": tpp, "idx_k": tpp,
            "idx_q": tpp * config.index_heads_per_program(WRITE_CONSTANTS["NUM_IQ"])}
    assert len(spans) == len(WRITE_KINDS), [len(span) for span in spans]

    def loads_after_norm(span):
        first = next((i for i, text in enumerate(span) if "MUFU.RSQ" in text), len(span))
        return sum(1 for text in span[first:] if re.search(r"\bLDG\b", text))

    kinds = [(kind, by_kind[kind]) for kind in WRITE_KINDS]
    return {"per_row": {kind: round(len(span) / max(rows[kind] / warps, 1), 1) for kind, span in kinds},
            "loads_after_norm": {kind: loads_after_norm(span) for kind, span in kinds}}


def write_variants() -> dict:
    write = importlib.import_module("atom_mxfp4.kernels.triton.qknorm_rope_write")
    small, medium, large = write.write_config(1), write.write_config(512), write.write_config(8192)
    replace = dataclasses.replace
    return {"small (write_config(1))": write_counts(small), "medium (write_config(512))": write_counts(medium),
            "large (write_config(8192))": write_counts(large),
            "large, fp8 index-K": write_counts(large, index_fp8=True),
            "medium, loads after the norm": write_counts(replace(medium, early_loads=False)),
            "large shape at 64 registers, early loads": write_counts(replace(large, maxnreg=64, early_loads=True))}


def loops(sass: str) -> list[list[str]]:
    """The instructions of every span closed by a backward branch, in address order."""
    found = instructions(sass)
    spans = sorted((int(branch.group(1), 16), address) for address, text in found
                   if (branch := re.search(r"\bBRA\b.*?0x([0-9a-f]+)", text)) and int(branch.group(1), 16) < address)
    return [[text for address, text in found if begin <= address <= end] for begin, end in spans]


def main_loop(sass: str) -> list[str]:
    """Instructions of the largest span closed by a backward branch."""
    found = loops(sass)
    if not found:
        raise RuntimeError("no backward branch found in the SASS")
    return max(found, key=len)


def loop_counts(config: decode.DecodeConfig) -> tuple[LoopCounts, str]:
    sass, shared = compile_sass(config)
    body = main_loop(sass)
    ops = opcodes(body)
    elements = config.block_n * 256 // (config.num_warps * 32)  # K and V, 128 dims each, per thread per trip
    return LoopCounts(len(body), ops, shared, elements), sass


def decode_variants() -> dict:
    """Each decode variant, direct and split: whole-kernel counts (``whole_kernel_counts``' fields), its main loop's
    length and the local loads in it."""
    found = {}
    for name, config in VARIANTS.items():
        for split in (False, True):
            sass, shared = compile_sass(config, split)
            ops = opcodes(text for _, text in instructions(sass))
            loop = main_loop(sass)
            found[name + (", split" if split else "")] = {
                "instructions": sum(ops.values()), "ops": dict(ops), "shared": shared, "loop_instructions": len(loop),
                "loop_spill_loads": opcodes(loop).get("LDL", 0)}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dump", type=Path, help="write each variant's SASS into this folder")
    parser.add_argument("--index-json", action="store_true",
                        help="print index_topk's score-kernel counts per index-K variant as one JSON line, "
                        "nothing else")
    parser.add_argument("--write-json", action="store_true",
                        help="print fused_qknorm_rope_write's counts per tokens per program as one JSON line")
    parser.add_argument("--decode-json", action="store_true",
                        help="print pa_decode's counts per variant (direct and split) as one JSON line")
    args = parser.parse_args()
    if args.decode_json:
        print(json.dumps(decode_variants()))
        return
    if args.write_json:
        print(json.dumps(write_variants()))
        return
    if args.index_json:
        print(json.dumps({**{name: index_counts(*variant) for name, variant in INDEX_VARIANTS.items()},
                          **{name: tiled_index_counts(*variant) for name, variant in TILED_VARIANTS.items()}}))
        return
    print(f"triton {triton.__version__}, target sm_90\n")
    print("| variant | loop instructions / thread | elements / thread | instructions / element | shared B | "
          + " | ".join(SHOWN) + " |")
    print("|---|---:|---:|---:|---:|" + "---:|" * len(SHOWN))
    for name, config in VARIANTS.items():
        try:
            counts, sass = loop_counts(config)
        except Exception as error:  # a variant that does not compile is reported, not hidden
            print(f"| {name} | failed: {type(error).__name__}: {str(error)[:80]} |")
            continue
        if args.dump:
            args.dump.mkdir(parents=True, exist_ok=True)
            (args.dump / (re.sub(r"\W+", "_", name).strip("_") + ".sass")).write_text(sass)
        print(f"| {name} | {counts.instructions} | {counts.elements_per_thread} | {counts.per_element:.1f} | "
              f"{counts.shared_bytes} | " + " | ".join(str(counts.ops.get(op, 0)) for op in SHOWN) + " |")


if __name__ == "__main__":
    main()
