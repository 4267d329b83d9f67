"""Compile options the Triton and Hopper backends pass at every launch, rather than take from triton's defaults.

FP fusion (FMA contraction): the decode, index and table kernels are compiled with it, the fused write without it
(its quantizers round each fp32 product as the torch backend does; qknorm_rope_write.py). Triton 3.9 warns that its
default (fusion on, ``TRITON_DEFAULT_FP_FUSION``) turns off in 3.10 and suggests setting the variable to 0 early: a
kernel that took the default would then compile to code its GPU tests never ran (the decode loop's FFMAs split into
FMUL + FADD). Passed explicitly, the choice is the tested one under any triton and any ``TRITON_DEFAULT_FP_FUSION``;
only ``TRITON_FORCE_DISABLE_FP_FUSION`` (a user's deliberate override) still wins.
``atom_mxfp4/evals/bench/sass_counts.py`` and the ``compile_for_sm90`` helpers compile with the same options, so the
SASS they count is the SASS that runs.
"""

FUSED = {"enable_fp_fusion": True}  # pa_decode, its merge, index_topk (score and select), build_sparse_tables
UNFUSED = {"enable_fp_fusion": False}  # the fused write: products rounded one by one (bit-exact with torch)
