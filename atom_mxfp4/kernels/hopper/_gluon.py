"""What moves between the triton series the Hopper kernels compile under (3.6 to 3.9): Gluon's names, a default.

One place for them, so a kernel module never spells a release's name or takes a release's default itself:
- the CTA barrier: ``gl.thread_barrier`` in 3.6, ``gl.barrier`` since 3.7;
- the 16-byte global -> shared copy (``cp.async``): ``async_copy.async_copy_global_to_shared`` in 3.6,
  ``async_copy.async_load`` since 3.8 (3.8 keeps the old name as an alias; 3.9 keeps it only to raise "removed").
  Both pairs lower to the same ops, so the SASS is the same whichever name a release offers (``hopper_sass.py
  --dump`` under 3.6 and 3.8 before and after this module: byte for byte);
- FP fusion (FMA contraction): on by default through 3.9, off by default from 3.10 (3.9 warns so and suggests
  ``TRITON_DEFAULT_FP_FUSION=0`` early). Every launch and ``compile_for_sm90`` pass ``FUSED``, the option the GPU
  tests ran, whatever the release or the variable (the Triton backend does the same:
  atom_mxfp4/kernels/triton/_options.py).
"""

from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy

cta_barrier = getattr(gl, "thread_barrier", None) or gl.barrier
async_load = getattr(async_copy, "async_load", None) or async_copy.async_copy_global_to_shared
FUSED = {"enable_fp_fusion": True}  # atom_mxfp4/kernels/triton/_options.FUSED's twin: a folder imports only itself
