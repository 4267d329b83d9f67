"""Compile-only probe (CPU, triton 3.6.0): a Gluon kernel compiled with num_ctas=2 (a 2-CTA cluster per program)
whose CTAs work on different data (rank from %cluster_ctarank): does the PTX store from both CTAs, or mask the
CTA-replicated tensor to one? Run from this folder: ``python3 cta_probe.py`` (writes probe_1.ptx / probe_2.ptx here).

Seen (probe_output.txt, probe_2.ptx): with num_ctas=2 the kernel is declared ``.explicitcluster .reqnctapercluster 2``,
``gl.program_id(0)`` reads ``%clusterid.x``, every layout must name 2 CTAs (``cga_layout``), and the store of a
tensor whose layout replicates it over the CTAs (``cga_layout=[[0]]``) is predicated on ``%cluster_ctarank & 1 == 0``:
only CTA 0 writes, although here the CTAs loaded different data."""
import os
os.environ.pop("TRITON_INTERPRET", None)
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource


@gluon.jit
def probe(x_ptr, y_ptr, CGA: gl.constexpr):
    L: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0], CGA.value)
    rank = gl.inline_asm_elementwise("mov.u32 $0, %cluster_ctarank;", "=r,r", [gl.program_id(0)], dtype=gl.int32,
                                     is_pure=True, pack=1)
    i = gl.arange(0, 128, layout=L)
    v = gl.load(x_ptr + rank * 128 + i)
    gl.store(y_ptr + rank * 128 + i, v * 2.0)


sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "CGA": "constexpr"}
for ctas in (1, 2):
    try:
        constants = {"CGA": [] if ctas == 1 else [[0]]}  # 2 CTAs: the tensor replicated over them
        k = triton.compile(GluonASTSource(probe, sig, constants, {}), target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": 4, "num_ctas": ctas})
        ptx = k.asm["ptx"]
        print(ctas, "compiled; st.global:", ptx.count("st.global"), "| cluster refs:",
              [t.strip() for t in ptx.splitlines() if ("cluster" in t or "ctaid" in t) and ".file" not in t])
        open(f"probe_{ctas}.ptx", "w").write(ptx)
    except Exception as e:
        print(ctas, "failed:", type(e).__name__, str(e)[:400])
