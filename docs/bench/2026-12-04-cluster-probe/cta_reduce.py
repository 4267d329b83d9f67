"""Compile-only probe (CPU, triton 3.6.0): with num_ctas=2, a [2, 128] tensor whose CTA c holds row c, summed over
the CTA dimension (what a split merge across a cluster would be in Gluon's own terms). Run from this folder:
``python3 cta_reduce.py``. Seen (cta_reduce_output.txt): it does not compile (a CompilationError, "'list' object has
no attribute 'type'", at the store of the sum), so a cross-CTA merge would go through inline asm (mapa +
ld.shared::cluster, barrier.cluster)."""
import os
os.environ.pop("TRITON_INTERPRET", None)
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource


@gluon.jit
def probe(x_ptr, y_ptr):
    L: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, 4], [1, 0], [[1, 0]])  # CTA c holds row c
    r = gl.arange(0, 2, layout=gl.SliceLayout(1, L))
    i = gl.arange(0, 128, layout=gl.SliceLayout(0, L))
    v = gl.load(x_ptr + r[:, None] * 128 + i[None, :])
    s = gl.sum(v, axis=0)  # across the 2 CTAs
    gl.store(y_ptr + i, s)


sig = {"x_ptr": "*fp32", "y_ptr": "*fp32"}
try:
    k = triton.compile(GluonASTSource(probe, sig, {}, {}), target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": 4, "num_ctas": 2})
    ptx = k.asm["ptx"]
    open("reduce_2.ptx", "w").write(ptx)
    print("compiled", [t.strip() for t in ptx.splitlines() if "cluster" in t or "mapa" in t or "barrier" in t][:20])
except Exception as e:
    print("failed:", type(e).__name__, str(e)[:600])
