"""Compile the FlyDSL kernels for gfx950 without a GPU and report the final ISA.

``compile_isa(group, split, ...)`` runs one compilation in a subprocess with
``FLYDSL_COMPILE_ONLY=1 ARCH=gfx950 FLYDSL_DUMP_IR=1`` and ``ROCM_PATH`` pointing at a directory whose
``llvm/bin/ld.lld`` runs ``python -m ziglang ld.lld`` (created on demand, see ``ld_lld_shim``). Nothing is
exported into this process's environment. The subprocess isolates the compiler (and the HIP runtime, which
fails to load on a machine without ROCm).

    python -m atom_mxfp4.kernels.flydsl.compile --group 16 --split   # prints the report
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SHIM_DIR = Path(os.environ.get("ATOM_MXFP4_ROCM_SHIM", Path(tempfile.gettempdir()) / "atom_mxfp4_rocm"))

# gfx950 (CDNA4) per-wave / per-workgroup limits
GFX950_MAX_VGPRS = 512  # unified arch VGPR + AGPR file, wave64
GFX950_MAX_SGPRS = 102
GFX950_LDS_BYTES = 160 * 1024


@dataclasses.dataclass(frozen=True)
class IsaReport:
    """The final ISA of one kernel and its resource figures (from the assembler's metadata)."""

    kernel: str
    arch: str
    isa: str
    vgprs: int
    agprs: int
    sgprs: int
    lds_bytes: int
    scratch_bytes: int
    vgpr_spills: int
    sgpr_spills: int
    instructions: dict  # mnemonic -> count over the kernel body

    def count(self, prefix: str) -> int:
        """Instructions whose mnemonic starts with ``prefix``."""
        return sum(n for name, n in self.instructions.items() if name.startswith(prefix))

    def summary(self) -> dict:
        keys = ("v_mfma_scale_f32_16x16x128_f8f6f4", "v_mfma_f32_16x16x32_bf16", "v_cvt_scalef32_pk_bf16_fp4",
                "v_cvt_pk_fp8_f32", "global_load", "ds_write", "ds_read", "v_exp_f32", "s_barrier")
        return {
            "kernel": self.kernel, "arch": self.arch, "vgprs": self.vgprs, "agprs": self.agprs, "sgprs": self.sgprs,
            "lds_bytes": self.lds_bytes, "scratch_bytes": self.scratch_bytes, "vgpr_spills": self.vgpr_spills,
            "sgpr_spills": self.sgpr_spills, "instructions_total": sum(self.instructions.values()),
            **{k: self.count(k) for k in keys},
        }


def ld_lld_shim() -> Path:
    """``$SHIM_DIR`` holding ``llvm/bin/ld.lld`` -> ``python -m ziglang ld.lld`` (idempotent)."""
    path = SHIM_DIR / "llvm" / "bin" / "ld.lld"
    text = f'#!/bin/sh\nexec "{sys.executable}" -m ziglang ld.lld "$@"\n'
    for attempt in range(3):  # another process may be (re)creating or cleaning the folder right now
        try:
            if path.exists() and path.read_text() == text:
                return SHIM_DIR
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(text)
            tmp.chmod(0o755)
            tmp.replace(path)
            return SHIM_DIR
        except FileNotFoundError:
            if attempt == 2:
                raise
    return SHIM_DIR


def compile_env(dump_dir: Path, arch: str = "gfx950") -> dict:
    env = dict(os.environ)
    env.update({
        "ROCM_PATH": str(ld_lld_shim()),
        "FLYDSL_COMPILE_ONLY": "1",
        "ARCH": arch,
        "FLYDSL_DUMP_IR": "1",
        "FLYDSL_DUMP_DIR": str(dump_dir),
        "FLYDSL_RUNTIME_ENABLE_CACHE": "0",
    })
    return env


_META = {
    "vgprs": r"\.vgpr_count:\s+(\d+)",
    "agprs": r"\.agpr_count:\s+(\d+)",
    "sgprs": r"\.sgpr_count:\s+(\d+)",
    "lds_bytes": r"\.group_segment_fixed_size:\s+(\d+)",
    "scratch_bytes": r"\.private_segment_fixed_size:\s+(\d+)",
    "vgpr_spills": r"\.vgpr_spill_count:\s+(\d+)",
    "sgpr_spills": r"\.sgpr_spill_count:\s+(\d+)",
}


def parse_isa(text: str, kernel: str = "", arch: str = "gfx950") -> IsaReport:
    """Figures from a final ISA listing (``*_final_isa.s``)."""
    figures = {}
    for key, pattern in _META.items():
        match = re.search(pattern, text)
        figures[key] = int(match.group(1)) if match else 0
    counts: dict = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in ".;/" or stripped.endswith(":") or not line[:1].isspace():
            continue
        mnemonic = stripped.split()[0]
        if re.fullmatch(r"[a-z][a-z0-9_]*", mnemonic):
            counts[mnemonic] = counts.get(mnemonic, 0) + 1
    return IsaReport(kernel=kernel, arch=arch, isa=text, instructions=counts, **figures)


_DRIVER = r"""
import json, sys
from atom_mxfp4.kernels.flydsl import pa_decode_kernel as K
spec = json.loads(sys.argv[1])
if spec["kind"] == "decode":
    launch = K.build_pa_decode(spec["group"], spec["q_bf16"], spec["split"], spec["qscale_tensor"], spec["arch"])
    args = (0,) * 9 + (4, 256, 2, 1.0, 1.0, 1)
else:
    launch = K.build_merge(spec["group"], spec["arch"])
    args = (0,) * 4 + (4, 256, 2, 1)
launch._compile_only(*args)
print("COMPILED")
"""


def compile_isa(group: int, split: bool, *, q_bf16: bool = True, qscale_tensor: bool = False, merge: bool = False,
                arch: str = "gfx950", timeout: float = 600.0) -> IsaReport:
    """Compile one specialization for ``arch`` in a subprocess; the final ISA and its figures.

    ``merge=True`` compiles the split path's merge kernel for ``group`` instead of the decode kernel.
    """
    from .pa_decode_kernel import check_arch

    check_arch(arch)
    spec = {"kind": "merge" if merge else "decode", "group": group, "split": split, "q_bf16": q_bf16,
            "qscale_tensor": qscale_tensor, "arch": arch}
    with tempfile.TemporaryDirectory(prefix="atom_mxfp4_flydsl_") as tmp:
        dump = Path(tmp) / "dump"
        proc = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(spec)], env=compile_env(dump, arch),
                              capture_output=True, text=True, timeout=timeout)
        isa_files = sorted(dump.rglob("*final_isa.s"))
        if proc.returncode != 0 or not isa_files:
            tail = (proc.stdout + proc.stderr)[-4000:]
            raise RuntimeError(f"FlyDSL compile of {spec} failed (exit {proc.returncode}):\n{tail}")
        text = isa_files[-1].read_text()
        return parse_isa(text, kernel=isa_files[-1].parent.name, arch=arch)


# The specializations pa_decode launches for the shipped groups: (name, compile_isa kwargs).
SHIPPED = [
    *[(f"decode g{g} bf16 {'split' if s else 'direct'}", dict(group=g, split=s)) for g in (1, 8, 16)
      for s in (False, True)],
    ("decode g16 e4m3 direct", dict(group=16, split=False, q_bf16=False)),
    ("decode g16 e4m3 split", dict(group=16, split=True, q_bf16=False)),
    ("decode g8 e4m3 split qscale[R]", dict(group=8, split=True, q_bf16=False, qscale_tensor=True)),
    *[(f"merge g{g}", dict(group=g, split=True, merge=True)) for g in (1, 8, 16)],
]

TABLE_HEADER = ("| specialization | VGPR | AGPR | SGPR | LDS B | scratch B | spills | instructions | scaled MFMA "
                "| bf16 MFMA | fp4->bf16 cvt |\n|---|---|---|---|---|---|---|---|---|---|---|")


def table_row(name: str, report: IsaReport) -> str:
    return (f"| {name} | {report.vgprs} | {report.agprs} | {report.sgprs} | {report.lds_bytes} | "
            f"{report.scratch_bytes} | {report.vgpr_spills + report.sgpr_spills} | {sum(report.instructions.values())} "
            f"| {report.count('v_mfma_scale_f32_16x16x128_f8f6f4')} | {report.count('v_mfma_f32_16x16x32_bf16')} "
            f"| {report.count('v_cvt_scalef32_pk_bf16_fp4')} |")


def compile_shipped(workers: int = 2) -> dict:
    """name -> IsaReport for every shipped specialization (``workers`` compiler subprocesses at a time)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {name: pool.submit(compile_isa, **kwargs) for name, kwargs in SHIPPED}
        return {name: future.result() for name, future in futures.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--group", type=int, default=16)
    parser.add_argument("--split", action="store_true")
    parser.add_argument("--e4m3", action="store_true", help="e4m3 query (default bf16)")
    parser.add_argument("--merge", action="store_true")
    parser.add_argument("--isa", type=Path, help="also write the ISA here")
    parser.add_argument("--table", action="store_true", help="compile every shipped specialization and print the "
                        "markdown table of docs/flydsl.md")
    parser.add_argument("--isa-dir", type=Path, help="with --table: also write each specialization's ISA here")
    args = parser.parse_args(argv)
    if args.table:
        reports = compile_shipped()
        print(TABLE_HEADER)
        for name, report in reports.items():
            print(table_row(name, report))
            if args.isa_dir:
                args.isa_dir.mkdir(parents=True, exist_ok=True)
                (args.isa_dir / (re.sub(r"[^a-z0-9]+", "_", name).strip("_") + ".s")).write_text(report.isa)
        return
    report = compile_isa(args.group, args.split, q_bf16=not args.e4m3, merge=args.merge)
    if args.isa:
        args.isa.write_text(report.isa)
    print(json.dumps(report.summary(), indent=1))


if __name__ == "__main__":
    main()
