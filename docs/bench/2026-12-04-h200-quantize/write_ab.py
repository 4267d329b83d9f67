"""A/B of the fused write in one run: main fd3043a (old: fp64 conversions in the quantizers) vs the working tree's (new), run_bench's inputs
and timing (write_case / write_call / graph_time_ms over rotating sets), outputs compared bit for bit.
Usage: write_ab.py DIR [TOKENS [--new-first]] (TOKENS: comma-separated; --new-first: each pair times the new kernel
first and the records go to write_ab_reversed.json instead of write_ab.json)."""
import importlib, json, sys
from pathlib import Path
import torch
sys.path.insert(0, "evals/bench")
from _timing import graph_time_ms
from run_bench import write_call, write_case, copy_bandwidth_tbs
new = importlib.import_module("atom_mxfp4.kernels.triton.qknorm_rope_write")
old = importlib.import_module("atom_mxfp4.kernels.triton._old_write")
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
copy = copy_bandwidth_tbs()
print("copy", copy, flush=True)
recs = []
tokens_list = [int(t) for t in sys.argv[2].split(",")] if len(sys.argv) > 2 else [1, 64, 512, 8192, 32768]
new_first = sys.argv[3:] == ["--new-first"]
for tokens in tokens_list:
    for mode, ik in (("ceil", "mxfp4"), ("mse", "fp8")):
        weights, cos_sin, sets, per_call = write_case(tokens, ik)
        def outputs(mod):
            for c in sets[0][3]:
                c.zero_()
            q, iq = write_call(mod, weights, cos_sin, sets[0], mode, ik)()
            return [q.view(torch.int16), iq.view(torch.int16)] + [c.clone() for c in sets[0][3]]
        same = all(torch.equal(a, b) for a, b in zip(outputs(new), outputs(old)))
        t = {}
        for rep in range(3):  # interleaved, best of three
            for name, mod in ((("new", new), ("old", old)) if new_first else (("old", old), ("new", new))):
                us = graph_time_ms([write_call(mod, weights, cos_sin, s, mode, ik) for s in sets]) * 1e3
                t[name] = min(t.get(name, 1e9), us)
        rec = dict(tokens=tokens, setup=f"{mode} / {ik}", old_us=round(t["old"], 2), new_us=round(t["new"], 2),
                   speedup=round(t["old"] / t["new"], 3), new_TBs=round(per_call / t["new"] / 1e6, 3),
                   new_pct_copy=round(100 * per_call / t["new"] / 1e6 / copy["best"], 1), same_bits=same)
        recs.append(rec); print(json.dumps(rec), flush=True)
(out / ("write_ab_reversed.json" if new_first else "write_ab.json")).write_text(json.dumps(dict(copy=copy, rows=recs), indent=1))
