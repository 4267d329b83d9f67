"""Bounds on the sizes that the kernels compile in (shape-valued constexprs): validated by ``atom_mxfp4.ops`` with
check=True and re-checked by the Triton launchers on the host (no sync), so no input compiles forever."""

MAX_GROUP = 16  # query heads per KV head (GQA group): the decode kernels pad it to 16
MAX_INDEX_HEADS = 16  # index heads per row of index_topk (the Triton kernel's padded dot)
MAX_TOPK = 256  # top-k blocks per row (index_topk output width, build_sparse_tables input width)
MAX_PAGES_PER_BLOCK = 16  # pages per sparse block (2048-token blocks)
MAX_INDEX_BLOCKS = 1 << 14  # block-table width of index_topk (2M tokens per request): one program holds a row's blocks
