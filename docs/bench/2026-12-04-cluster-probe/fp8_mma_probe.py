"""Compile-only probe (CPU, triton 3.6.0): Gluon's mma_v2 with e4m3 operands on sm_90. Run from this folder:
``python3 fp8_mma_probe.py``. Seen (fp8_mma_probe_output.txt): with DotOperandLayout k_width 4 it compiles to
``mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32``; k_width 2 fails in ConvertTritonGPUToLLVM."""
import os
os.environ.pop("TRITON_INTERPRET", None)
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource


@gluon.jit
def probe(a_ptr, b_ptr, c_ptr, KW: gl.constexpr):
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[4, 1], instr_shape=[16, 8])
    A: gl.constexpr = gl.DotOperandLayout(0, MMA, KW)
    B: gl.constexpr = gl.DotOperandLayout(1, MMA, KW)
    m = gl.arange(0, 64, layout=gl.SliceLayout(1, A))
    k = gl.arange(0, 32, layout=gl.SliceLayout(0, A))
    a = gl.load(a_ptr + m[:, None] * 32 + k[None, :])
    kb = gl.arange(0, 32, layout=gl.SliceLayout(1, B))
    n = gl.arange(0, 8, layout=gl.SliceLayout(0, B))
    b = gl.load(b_ptr + kb[:, None] * 8 + n[None, :])
    c = mma_v2(a, b, gl.zeros([64, 8], gl.float32, MMA))
    mc = gl.arange(0, 64, layout=gl.SliceLayout(1, MMA))
    nc = gl.arange(0, 8, layout=gl.SliceLayout(0, MMA))
    gl.store(c_ptr + mc[:, None] * 8 + nc[None, :], c)


for kw in (4, 2):
    sig = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*fp32", "KW": "constexpr"}
    try:
        k = triton.compile(GluonASTSource(probe, sig, {"KW": kw}, {}), target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": 4})
        ptx = k.asm["ptx"]
        print(kw, "compiled:", sorted({t.strip().split()[0] for t in ptx.splitlines() if "mma" in t}))
    except Exception as e:
        print(kw, "failed:", type(e).__name__, str(e).splitlines()[-1][:300])
