"""Split-merge A/B, same run: HEAD's fp32 partials (register trips of 8) vs fp16 partials (register trips of 8) vs
fp16 partials streamed through shared memory with cp.async (the working tree). Outputs vs the direct kernel
(num_splits=1, no merge) of HEAD; times by CUDA-graph replay over rotated input sets."""
import importlib, json, sys
from pathlib import Path
import torch
sys.path.insert(0, "evals/bench")
from _timing import graph_time_ms, sets_for
from hopper_bench import make_inputs, GROUP, SOFTMAX_SCALE
from run_bench import DEV, MX_TOKEN

mods = {"fp32": importlib.import_module("atom_mxfp4.kernels.hopper._ab_fp32"),
        "fp16": importlib.import_module("atom_mxfp4.kernels.hopper._ab_fp16"),
        "async": importlib.import_module("atom_mxfp4.kernels.hopper.pa_decode")}
SHAPES = [(1, 64, 8192, None), (1, 64, 8192, 64), (1, 16, 1998, None), (8, 16, 1998, None), (16, 16, 1998, None),
          (64, 16, 1998, None), (1, 1024, 131072, None), (8, 1024, 131072, None), (4, 256, 32768, None),
          (16, 64, 8192, None), (64, 64, 8192, None), (512, 16, 1998, None), (1, 2, 256, None), (1, 4, 512, None)]
out_dir = Path(sys.argv[1]); records = []
x = torch.zeros(16, device=DEV)
print("launch floor us", round(1e3 * graph_time_ms([lambda: x.add_(1)] * 32, reps=50), 2), flush=True)
for rows, width, ctx, forced in SHAPES:
    q, lens, sets = make_inputs(rows, width, ctx, sets_for(rows * ctx * 2 * MX_TOKEN, budget=2 * 2**30))
    ref = torch.empty(rows, GROUP, 128, dtype=torch.bfloat16, device=DEV)
    mods["fp32"].pa_decode(ref, q, *sets[0], lens, softmax_scale=SOFTMAX_SCALE, query_scale=None,
                           plan=mods["fp32"].make_plan(rows, width, GROUP, DEV, num_splits=1))
    rec = {"rows": rows, "pages": width, "ctx": ctx, "forced": forced}
    outs = {}
    for name, m in mods.items():
        plan = m.make_plan(rows, width, GROUP, DEV, num_splits=forced)
        rec["splits"] = plan.splits_for(rows, width)[0]
        o = torch.full((rows, GROUP, 128), float("nan"), dtype=torch.bfloat16, device=DEV)
        m.pa_decode(o, q, *sets[0], lens, softmax_scale=SOFTMAX_SCALE, query_scale=None, plan=plan)
        torch.cuda.synchronize()
        outs[name] = o
        rec[f"{name}_rel_vs_direct"] = float((o.float() - ref.float()).norm() / ref.float().norm())
        rec[f"{name}_max_abs_vs_direct"] = float((o.float() - ref.float()).abs().max())
        rec[f"{name}_finite"] = bool(torch.isfinite(o).all())
        rec[f"{name}_us"] = round(1e3 * graph_time_ms([
            (lambda s=s, m=m, o=o, plan=plan: m.pa_decode(o, q, *s, lens, softmax_scale=SOFTMAX_SCALE,
                                                        query_scale=None, plan=plan)) for s in sets], reps=50), 2)
    rec["fp16_equal_async"] = bool(torch.equal(outs["fp16"], outs["async"]))
    # a second timing pass of fp32 (order effects)
    m = mods["fp32"]; plan = m.make_plan(rows, width, GROUP, DEV, num_splits=forced); o = outs["fp32"]
    rec["fp32_us_again"] = round(1e3 * graph_time_ms([
        (lambda s=s: m.pa_decode(o, q, *s, lens, softmax_scale=SOFTMAX_SCALE, query_scale=None, plan=plan))
        for s in sets], reps=50), 2)
    print(json.dumps(rec), flush=True)
    records.append(rec)
    del sets; torch.cuda.empty_cache()
(out_dir / "merge_ab.json").write_text(json.dumps(records, indent=1))
