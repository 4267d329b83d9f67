"""One small case of each Triton kernel, for ``compute-sanitizer --tool memcheck`` (run by scripts/gpu_run.sh).

Exits non-zero if an op raises; the sanitizer reports out-of-bounds / misaligned accesses itself.
"""

import torch

import atom_mxfp4.kernels.triton as tb
from atom_mxfp4.layout import FP8_RECORD_BYTES, RECORD_BYTES, SCALE_OFFSET

DEV = torch.device("cuda")
RECORD = RECORD_BYTES


def main():
    torch.manual_seed(0)
    pages = 6
    k = torch.zeros(pages, 1, RECORD, dtype=torch.uint8, device=DEV)
    v, ik = torch.zeros_like(k), torch.zeros_like(k)
    tokens, nq = 37, 16
    qkv = torch.randn(tokens, (nq + 4) * 128, device=DEV).bfloat16()
    slots = torch.randperm(pages * 128, device=DEV)[:tokens]
    slots[::5] = -1
    cos_sin = torch.randn(512, 64, device=DEV)
    w = [torch.randn(128, device=DEV) for _ in range(4)]
    q, iq = tb.fused_qknorm_rope_write(qkv, torch.randint(0, 512, (tokens,), device=DEV), *w, cos_sin, slots, k, v,
                                       ik, num_q_heads=nq, num_kv_heads=1, num_index_heads=1, rotary_dim=64,
                                       eps=1e-6, scale_mode="mse", q_dtype=torch.bfloat16)
    block_table = torch.randperm(pages, device=DEV).int().view(2, 3).contiguous()
    rr = torch.tensor([0, 1, 1, 0, 1], dtype=torch.int32, device=DEV)
    rp = torch.tensor([0, 383, 200, 129, 5], dtype=torch.int32, device=DEV)
    ids = tb.index_topk(iq[:5].contiguous(), ik, block_table, rr, rp, topk=2, init_blocks=0, local_blocks=1)
    tables, lens = tb.build_sparse_tables(ids, block_table, rr, rp, num_kv_heads=1, pages_per_block=1)
    # forced direct / split, then the split policy under a plan made for more rows and wider tables (one per batch)
    for plan in (tb.make_plan(5, tables.shape[1], 16, DEV, num_splits=1),
                 tb.make_plan(5, tables.shape[1], 16, DEV, num_splits=2),
                 tb.make_plan(64, tables.shape[1] + 30, 16, DEV)):
        out = torch.empty(5, 16, 128, dtype=torch.bfloat16, device=DEV)
        tb.pa_decode(out, q[:5].contiguous(), k, v, tables, lens, softmax_scale=0.088, query_scale=None, plan=plan)
    # unchecked lengths past the table (what ops' check=True refuses; -5 and 2**31 - 1 too): read as the whole table,
    # so 5 pages over 3 splits of 2 read no entry past the row and the merge no slot past the row's (the last row's
    # would lie past the workspace)
    five = torch.randint(0, pages, (5, 5), dtype=torch.int32, device=DEV)
    past5 = torch.tensor([7 * 128, -5, 2 ** 31 - 1, 640, 641], dtype=torch.int32, device=DEV)
    for splits in (1, 3):
        tb.pa_decode(out, q[:5].contiguous(), k, v, five, past5, softmax_scale=0.088, query_scale=None,
                     plan=tb.make_plan(5, 5, 16, DEV, num_splits=splits))
    ik8 = torch.zeros(pages, 1, FP8_RECORD_BYTES, dtype=torch.uint8, device=DEV)  # the fp8 index-K (issue 13)
    q8, iq8 = tb.fused_qknorm_rope_write(qkv, torch.randint(0, 512, (tokens,), device=DEV), *w, cos_sin, slots, k, v,
                                         ik8, num_q_heads=nq, num_kv_heads=1, num_index_heads=1, rotary_dim=64,
                                         eps=1e-6, scale_mode="mse", q_dtype=torch.bfloat16, index_k_dtype="fp8")
    tb.index_topk(iq8[:5].contiguous(), ik8, block_table, rr, rp, topk=2, init_blocks=0, local_blocks=1,
                  index_k_dtype="fp8")
    ran = ("write, index_topk, build_sparse_tables, pa_decode (direct, split, a larger plan; lengths past the table), "
           "write + index_topk with the fp8 index-K")
    from atom_mxfp4.kernels import hopper
    why = hopper.usable(DEV)
    if why is None:  # the Gluon pa_decode (explicit backend "hopper"): direct, split, a larger plan; each with the
        # policy's warp count and merge (2 splits: through L2), with the 8-warp program forced (HopperConfig.warps),
        # and with the merge over one cluster per row forced (HopperConfig.cluster; the policy takes 4-16 splits)
        from atom_mxfp4.kernels.hopper.pa_decode import with_config
        eight, clustered = hopper.HopperConfig(warps=8), hopper.HopperConfig(cluster=True)
        through_l2 = hopper.HopperConfig(cluster=False)
        for plan in (hopper.make_plan(5, tables.shape[1], 16, DEV, num_splits=1),
                     hopper.make_plan(5, tables.shape[1], 16, DEV, num_splits=2),
                     hopper.make_plan(64, tables.shape[1] + 30, 16, DEV)):
            for each in (plan, with_config(plan, eight), with_config(plan, clustered)):
                out = torch.empty(5, 16, 128, dtype=torch.bfloat16, device=DEV)
                hopper.pa_decode(out, q[:5].contiguous(), k, v, tables, lens, softmax_scale=0.088, query_scale=None,
                                 plan=each)
        far = k.clone()  # every scale byte outside the one-multiply window: every program takes the exact pass too
        far[:, :, SCALE_OFFSET:] = 200
        for splits in (1, 2):
            plan = hopper.make_plan(5, tables.shape[1], 16, DEV, num_splits=splits)
            for each in (plan, with_config(plan, eight), with_config(plan, clustered)):
                hopper.pa_decode(out, q[:5].contiguous(), far, v, tables, lens, softmax_scale=0.088,
                                 query_scale=None, plan=each)
        # the fused attend (block table + top-k ids read in the launch): sparse and dense, direct and split, and the
        # exact pass; block-table entries past each request's pages point past the cache (never read)
        wide = torch.cat([block_table, torch.full_like(block_table, 2**20)], 1).contiguous()
        for splits in (1, 2):
            for cache in (k, far):
                for ids_or_none, width in ((ids, ids.shape[2]), (None, wide.shape[1])):
                    plan = hopper.make_plan(5, width, 16, DEV, num_splits=splits)
                    for each in (plan, with_config(plan, eight), with_config(plan, clustered)):
                        ran_fused = hopper.attend(out, q[:5].contiguous(), cache, v, wide, rr, rp, num_kv_heads=1,
                                                  topk_blocks=ids_or_none, pages_per_block=1, softmax_scale=0.088,
                                                  query_scale=None, plan=each)
                        assert ran_fused is out, "5 rows: the Hopper attend runs as one launch"
        # the split merge over 2 clusters of 16 per row (grouped): 32 one-page splits of a 32-wide block table (its
        # entries past each request's pages point past the cache), and the same through L2
        wider = torch.cat([block_table, torch.full((2, 29), 2**20, dtype=torch.int32, device=DEV)], 1).contiguous()
        for each in (clustered, through_l2):
            plan = with_config(hopper.make_plan(5, wider.shape[1], 16, DEV, num_splits=32), each)
            hopper.attend(out, q[:5].contiguous(), k, v, wider, rr, rp, num_kv_heads=1, topk_blocks=None,
                          pages_per_block=1, softmax_scale=0.088, query_scale=None, plan=plan)
        # unchecked contexts past the table (what ops' check=True refuses): the decode reads no entry past the table
        # and the row's split merge no slot past its own (the last row's would lie past the workspace); a plan of
        # exactly rows x 2 slots, pa_decode and the dense attend
        past = lens.clone()
        past[-1] = tables.shape[1] * 128 + 3 * 128
        plan = hopper.make_plan(5, tables.shape[1], 16, DEV, num_splits=2, config=through_l2)
        hopper.pa_decode(out, q[:5].contiguous(), k, v, tables, past, softmax_scale=0.088, query_scale=None,
                         plan=plan)
        for splits in (1, 3, None):  # the Triton cases' lengths past a 5-wide table
            plan = hopper.make_plan(5, 5, 16, DEV, num_splits=splits, config=through_l2)
            hopper.pa_decode(out, q[:5].contiguous(), k, v, five, past5, softmax_scale=0.088, query_scale=None,
                             plan=plan)
        far_position = rp.clone()  # over block_table (every entry a page of the cache), not wide
        far_position[-1] = block_table.shape[1] * 128 + 300
        plan = hopper.make_plan(5, block_table.shape[1], 16, DEV, num_splits=2, config=through_l2)
        hopper.attend(out, q[:5].contiguous(), k, v, block_table, rr, far_position, num_kv_heads=1, topk_blocks=None,
                      pages_per_block=1, softmax_scale=0.088, query_scale=None, plan=plan)
        # the Hopper index scorer (fp8 and MXFP4 index-K): chunks of 1 and 2 blocks and the heuristic's, 2 / 3
        # stages; wide's entries past each request's pages point past the cache (read only for blocks <= the row's
        # own block: never)
        for config in (hopper.IndexConfig(blocks_per_program=1), hopper.IndexConfig(stages=2, blocks_per_program=2),
                       hopper.IndexConfig()):
            hopper.index_topk(iq8[:5].contiguous(), ik8, wide, rr, rp, topk=2, init_blocks=0, local_blocks=1,
                              index_k_dtype="fp8", config=config)
            hopper.index_topk(iq[:5].contiguous(), ik, wide, rr, rp, topk=2, init_blocks=0, local_blocks=1,
                              index_k_dtype="mxfp4", config=config)
        ran += (", Hopper pa_decode (direct, split, a larger plan; direct and split through the exact fallback pass;"
                " each at the policy's and at 8 warps, the split merge through L2 and over a cluster)"
                ", Hopper attend (sparse and dense, direct and split, both passes, 4 and 8 warps; 32 splits over 2"
                " clusters of 16 and through L2; contexts past the table, unchecked)"
                ", Hopper index_topk (fp8 and MXFP4 index-K)")
    else:
        ran += f"; Hopper pa_decode not run: {why}"
    torch.cuda.synchronize()
    print("sanitize cases ran: " + ran)


if __name__ == "__main__":
    main()
