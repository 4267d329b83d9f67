"""Scratch A/B (2026-12-04, late; call 6: alternating, three rounds): the Hopper pa_decode at 4 programs per SM (register cap 128: 62 spill loads /
stores a page per thread on the CPU compile; 3 or 2 ring stages so 4 x shared memory fits) against the default
(168 registers, 4 stages, 3 per SM), one split, CUDA-graph replay over rotated sets. Usage: python3 -P regs_ab.py OUT"""
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, "evals/bench")
from _timing import graph_time_ms, sets_for  # noqa: E402
from hopper_bench import GROUP, SOFTMAX_SCALE, make_inputs  # noqa: E402
from run_bench import MX_TOKEN  # noqa: E402
import atom_mxfp4.kernels.hopper as hopper  # noqa: E402
import importlib  # noqa: E402

pa = importlib.import_module("atom_mxfp4.kernels.hopper.pa_decode")
CONFIGS = [("default", replace(pa.DEFAULT_CONFIG, four_per_sm=False)),
           ("s2r128", replace(pa.DEFAULT_CONFIG, four_per_sm=True))] * 3  # needs four_per_sm (call 5's tree)
SHAPES = [(512, 16, 1998), (450, 16, 1998)]
out_dir = Path(sys.argv[1]); out_dir.mkdir(parents=True, exist_ok=True)
rows_out = []
for rows, width, context in SHAPES:
    per_call = rows * context * 2 * MX_TOKEN
    n = sets_for(per_call, budget=4 * 2**30)
    q, lens, sets = make_inputs(rows, width, context, n)
    base = hopper.make_plan(rows, width, GROUP, "cuda", num_splits=1)
    outs, rec = {}, dict(rows=rows, width=width, context=context)
    for i, (name, cfg) in enumerate(CONFIGS):
        name = f"{name}_{i // 2}"
        plan = pa.with_config(base, cfg)
        o = torch.empty(rows, GROUP, 128, dtype=torch.bfloat16, device="cuda")
        calls = [lambda s=s, o=o, plan=plan: hopper.pa_decode(o, q, s[0], s[1], s[2], lens,
                 softmax_scale=SOFTMAX_SCALE, query_scale=None, plan=plan) for s in sets]
        calls[0](); torch.cuda.synchronize(); outs[name] = o.clone()
        rec[name] = round(graph_time_ms(calls, reps=20) * 1e3, 2)
        rec[f"{name}_same"] = bool(torch.equal(outs[name], outs["default_0"]))
    print(json.dumps(rec), flush=True)
    rows_out.append(rec)
    del sets; torch.cuda.empty_cache()
(out_dir / "regs_ab_alternating.json").write_text(json.dumps(rows_out, indent=1))
