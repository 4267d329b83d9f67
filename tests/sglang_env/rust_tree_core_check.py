"""Does SGLang's prebuilt Rust radix-tree core read torch tensors correctly in this process? Exit 0 if yes.

The binary in the sglang 0.5.23 wheel is built against torch 2.14's C++ ABI. Where another torch is loaded (the H200
image has 2.11), it may load and then misread a tensor's dtype: the first radix insert of a served request fails
with ``insert value must be an int64 tensor, got Uint8`` and the scheduler dies. This inserts one int64 value the way
``RustUnifiedTreeCore.begin_insert`` does; the harness (atom_mxfp4/evals/serve_check.py) switches SGLang to its
Python tree core (``SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND=python``) when this fails, and says so in its report.
"""

import array
import sys

import torch


def insert_once(value: torch.Tensor) -> None:
    """One radix insert of ``value`` (8 slot ids) through SGLang's Rust binding, as RustUnifiedTreeCore does it."""
    from sglang.srt.mem_cache.rust_tree_core.extension import bindings as b
    params = b.TreeCoreInitParamsBinding(
        eviction_policy="lru", slru_protected_threshold=2, tlru_tail_budget=0, tlru_float_config=None,
        page_size=4, is_write_back=False, enable_hicache=False, write_through_threshold=256, device="cpu",
        swa_sliding_window_size=None, swa_req_ring=False, enable_kv_cache_events=False,
        dynamo_kv_event_format=False, mamba_cache_chunk_size=None, mamba_max_states_per_path=None)
    core = b.RustUnifiedTreeCoreBinding(params, [0])  # component 0: FULL
    core.begin_insert(b.InsertParamsBinding(
        key=array.array("q", range(8)), value=value, extra_key=None, cache_salt=None, session_id=None,
        mamba_value=None, prev_prefix_len=0, swa_evicted_seqlen=0, swa_branching_seqlen=None, inserted_len=0,
        priority=0, track_adopted_ranges=False, rotation_base=None))


def main() -> int:
    try:
        insert_once(torch.arange(8, dtype=torch.int64))
    except Exception as error:
        print(f"rust tree core: FAILED with torch {torch.__version__}: {type(error).__name__}: {error}")
        return 1
    print(f"rust tree core: ok with torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
