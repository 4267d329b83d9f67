# ncu target: B512 sparse (run_bench's shape): the TABLES kernel over build_sparse_tables' tables, then the fused attend
import sys, torch
sys.path.insert(0, "evals/bench")
from run_bench import random_records, DEV
import atom_mxfp4.kernels.triton as tb
from atom_mxfp4.kernels import hopper
batch, topk, ctx_blocks = int(sys.argv[1]), 16, 64
seq_len = (ctx_blocks - 1) * 128 + 78
sel = torch.stack([torch.cat([torch.randperm(ctx_blocks - 1)[:topk - 1].sort().values, torch.tensor([ctx_blocks - 1])]) for _ in range(batch)]).int().to(DEV)
ids = sel[None].contiguous()
pages = batch * topk
k, v = random_records(pages), random_records(pages)
perm = torch.randperm(pages, device=DEV).int().view(batch, topk)
bt = torch.zeros(batch, ctx_blocks, dtype=torch.int32, device=DEV); bt.scatter_(1, sel.long(), perm)
rr = torch.arange(batch, dtype=torch.int32, device=DEV); rp = torch.full((batch,), seq_len - 1, dtype=torch.int32, device=DEV)
q = torch.randn(batch, 16, 128, device=DEV).bfloat16()
plan = hopper.make_plan(batch, topk, 16, DEV)
out = torch.empty_like(q)
t, ln = tb.build_sparse_tables(ids, bt, rr, rp, num_kv_heads=1, pages_per_block=1)
for _ in range(2):
    hopper.pa_decode(out, q, k, v, t, ln, softmax_scale=0.088, query_scale=None, plan=plan)
    hopper.attend(out, q, k, v, bt, rr, rp, num_kv_heads=1, topk_blocks=ids, pages_per_block=1, softmax_scale=0.088, query_scale=None, plan=plan)
torch.cuda.synchronize()
print("done")
