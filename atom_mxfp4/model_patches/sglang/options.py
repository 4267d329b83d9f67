"""Plugin options that SGLang has no flag for, read from the environment of every SGLang process.

``ATOM_MXFP4_INDEX_K_DTYPE=mxfp4|fp8``: the index-K cache dtype of sparse layers (atom_mxfp4.index_k; unset: the
layer's default, ``DEFAULT_INDEX_K_DTYPE``). Read by the pool's byte accounting (``--mem-fraction-static``), the pool
and the attention backend, in every scheduler process (the environment survives the ``spawn`` start method).
``atom-mxfp4 serve --index-k-dtype fp8`` sets it. No SGLang import: the commands use this module too.
"""

from __future__ import annotations

from collections.abc import Mapping

from atom_mxfp4.index_k import DEFAULT_INDEX_K_DTYPE, IndexKDtype

INDEX_K_DTYPE_ENV = "ATOM_MXFP4_INDEX_K_DTYPE"


def index_k_dtype(env: Mapping[str, str]) -> IndexKDtype:
    """The index-K dtype asked for by ``env`` (like ``os.environ``); unset or empty: the default. A value other than
    ``mxfp4`` / ``fp8`` is refused, naming the variable."""
    value = env.get(INDEX_K_DTYPE_ENV) or DEFAULT_INDEX_K_DTYPE
    return IndexKDtype.parse(value, f"{INDEX_K_DTYPE_ENV} (the index-K cache dtype)")
