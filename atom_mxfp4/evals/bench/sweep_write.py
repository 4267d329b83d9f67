"""Launch-shape sweep of the Triton fused write (``WriteConfig``) on a GPU: time per call of each shape, and whether
its outputs (q, idx_q and the three caches) equal the default shape's bit for bit. Never asserts a time.

    python3 atom_mxfp4/evals/bench/sweep_write.py                      # T = 64, 512, 8192, 32768; both setups;
                                                                       # the grid below
    python3 atom_mxfp4/evals/bench/sweep_write.py --tokens 8192 --configs "8,2,4;4,2,2;4,2,2,56" --json out.json

A shape is ``tokens_per_program,heads_per_program,num_warps[,maxnreg][,e]`` (``e``: ``early_loads``). Setups: CEIL
with the MXFP4 index-K and the production defaults (MSE, fp8 index-K). Inputs, bytes and timing are run_bench's
write table's (``write_case``, ``write_call``, ``graph_time_ms`` over rotating input sets).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _timing import graph_time_ms  # noqa: E402
from run_bench import write_call, write_case  # noqa: E402

write = importlib.import_module("atom_mxfp4.kernels.triton.qknorm_rope_write")

GRID = "1,2,1;2,4,2;8,2,4;4,2,2;2,2,1;8,2,4,56;4,2,2,56;16,2,4;8,4,4;8,2,4,e;4,2,2,64,e;8,2,4,64,e;1,2,1,e"


def parse_configs(text: str) -> list:
    configs = []
    for item in filter(None, text.split(";")):
        fields = item.split(",")
        early = fields[-1] == "e"
        numbers = fields[:-1] if early else fields
        if len(numbers) not in (3, 4) or not all(x.strip().isdigit() for x in numbers):
            raise SystemExit(f"--configs: '{item}' is not tokens,heads,warps[,maxnreg][,e]")
        configs.append(write.WriteConfig(*(int(x) for x in numbers), early_loads=early))
    return configs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", default="64,512,8192,32768")
    parser.add_argument("--configs", default=GRID, help="';'-separated tokens,heads,warps[,maxnreg]")
    parser.add_argument("--json", type=Path, help="also write the records here")
    args = parser.parse_args()
    configs = parse_configs(args.configs)
    if not torch.cuda.is_available():
        raise SystemExit("sweep_write.py times kernels on a GPU; none is visible")
    records = []
    for tokens in (int(t) for t in args.tokens.split(",")):
        for mode, index_k in (("ceil", "mxfp4"), ("mse", "fp8")):
            weights, cos_sin, sets, per_call = write_case(tokens, index_k)

            def call(s, cfg):
                return write_call(write, weights, cos_sin, s, mode, index_k, cfg)

            def outputs(cfg):
                for cache in sets[0][3]:
                    cache.zero_()
                q, iq = call(sets[0], cfg)()
                return [q.view(torch.int16), iq.view(torch.int16)] + [c.clone() for c in sets[0][3]]

            reference = outputs(write.write_config(tokens))
            for cfg in configs:
                same = all(torch.equal(a, b) for a, b in zip(outputs(cfg), reference))
                us = graph_time_ms([call(s, cfg) for s in sets]) * 1e3
                rec = dict(tokens=tokens, setup=f"{mode} / {index_k}", config=[cfg.tokens_per_program,
                           cfg.heads_per_program, cfg.num_warps, cfg.maxnreg], early_loads=cfg.early_loads,
                           us=round(us, 2),
                           TBs=round(per_call / us / 1e6, 3), same_as_default=same)
                records.append(rec)
                print(json.dumps(rec), flush=True)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
