"""Launch-shape sweep of the Triton fused write (``WriteConfig``) on a GPU: time per call of each shape, and whether
its outputs (q, idx_q and the three caches) equal the default shape's bit for bit. Never asserts a time.

    python3 evals/bench/sweep_write.py                      # T = 64, 512, 8192, 32768; both setups; the grid below
    python3 evals/bench/sweep_write.py --tokens 8192 --configs "8,2,4;4,2,2;4,2,2,56" --json out.json

A shape is ``tokens_per_program,heads_per_program,num_warps[,maxnreg]``. Setups: CEIL with the MXFP4 index-K and the
production defaults (MSE, fp8 index-K); 16 q / 1 KV / 1 index head, rotary 64. Timing: ``_timing.graph_time_ms`` over
rotating input sets (L2 does not hold them), as run_bench's write table.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _timing import graph_time_ms, sets_for  # noqa: E402

from atom_mxfp4.index_k import IndexKDtype  # noqa: E402
from atom_mxfp4.layout import RECORD_BYTES, qkv_width  # noqa: E402

write = importlib.import_module("atom_mxfp4.kernels.triton.qknorm_rope_write")

GRID = "1,2,1;2,4,2;8,2,4;4,2,2;2,2,1;8,2,4,56;4,2,2,56;16,2,4;8,4,4"
NQ, NKV, NIQ, ROT = 16, 1, 1, 64


def parse_configs(text: str) -> list:
    configs = []
    for item in filter(None, text.split(";")):
        numbers = [int(x) for x in item.split(",")]
        if len(numbers) not in (3, 4):
            raise SystemExit(f"--configs: '{item}' is not tokens,heads,warps[,maxnreg]")
        configs.append(write.WriteConfig(*numbers))
    return configs


def make_sets(tokens: int, index_k: str, n: int, gen: torch.Generator) -> list:
    pages = -(-tokens // 128) + 1
    sets = []
    for _ in range(n):
        qkv = (torch.randn(tokens, qkv_width(NQ, NKV, NIQ), generator=gen) * 2).bfloat16().cuda()
        positions = torch.randint(0, 65536, (tokens,), generator=gen).cuda()
        slots = torch.randperm(pages * 128, generator=gen)[:tokens].cuda()
        caches = [torch.zeros(pages, 1, RECORD_BYTES, dtype=torch.uint8, device="cuda") for _ in range(2)]
        caches.append(torch.zeros(pages, 1, IndexKDtype.parse(index_k).record_bytes, dtype=torch.uint8, device="cuda"))
        sets.append((qkv, positions, slots, caches))
    return sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", default="64,512,8192,32768")
    parser.add_argument("--configs", default=GRID, help="';'-separated tokens,heads,warps[,maxnreg]")
    parser.add_argument("--json", type=Path, help="also write the records here")
    args = parser.parse_args()
    configs = parse_configs(args.configs)
    if not torch.cuda.is_available():
        raise SystemExit("sweep_write.py times kernels on a GPU; none is visible")
    gen = torch.Generator().manual_seed(0)
    weights = [(torch.randn(128, generator=gen) * 0.3).cuda() for _ in range(4)]
    cos_sin = torch.randn(65536, ROT, generator=gen).cuda()
    records = []
    for tokens in (int(t) for t in args.tokens.split(",")):
        for mode, index_k in (("ceil", "mxfp4"), ("mse", "fp8")):
            per_token = qkv_width(NQ, NKV, NIQ) * 2 + 16 + ROT * 4 + (NQ + NIQ) * 256 + 2 * 68 + \
                IndexKDtype.parse(index_k).record_bytes // 128
            sets = make_sets(tokens, index_k, sets_for(tokens * per_token, budget=2**30), gen)

            def call(s, cfg):
                return lambda: write.fused_qknorm_rope_write(
                    s[0], s[1], *weights, cos_sin, s[2], *s[3], num_q_heads=NQ, num_kv_heads=NKV,
                    num_index_heads=NIQ, rotary_dim=ROT, eps=1e-6, scale_mode=mode, q_dtype=torch.bfloat16,
                    index_k_dtype=index_k, config=cfg)

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
                           cfg.heads_per_program, cfg.num_warps, cfg.maxnreg], us=round(us, 2),
                           TBs=round(tokens * per_token / us / 1e6, 3), same_as_default=same)
                records.append(rec)
                print(json.dumps(rec), flush=True)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
