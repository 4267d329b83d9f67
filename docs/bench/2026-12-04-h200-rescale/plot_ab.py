"""The O-rescale A/B of 2026-12-04 (docs/hopper.md "Rescaling O only when the maximum moves") as one figure:
left, pa_decode TB/s before (b7d4211) and after (call 2, same call); right, the sparse attend as the layer runs it,
before and after (call 5, same call: new, old, new again), with SGLang's bf16 / fp8 kernels of that call.

    python3 docs/bench/2026-12-04-h200-rescale/plot_ab.py   # writes rescale_ab.png beside this file
"""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent


def load(path):
    return json.loads((HERE / path).read_text())


def main():
    fig, (dense, sparse) = plt.subplots(1, 2, figsize=(12, 4.5))
    new, old = load("call2/hopper_new/hopper_bench.json"), load("call2/hopper_old/hopper_bench.json")
    shapes = [s for s in new["shapes"] if s["rows"] > 1]
    labels = [f"{s['rows']} x {s['context']}" for s in shapes]
    x = range(len(shapes))
    dense.bar([i - 0.2 for i in x], [o["hopper_TBs"] for o in old["shapes"] if o["rows"] > 1], 0.4,
              label="before (b7d4211)")
    dense.bar([i + 0.2 for i in x], [s["hopper_TBs"] for s in shapes], 0.4, label="skippable rescale")
    dense.set_xticks(list(x), labels)
    dense.set_ylabel("TB/s (rows x context x 136 B / time)")
    dense.set_title("pa_decode, Hopper, same call (copy 4.27 TB/s)")
    dense.legend()
    runs = {name: load(f"call5/sparse_{name}/bench.json")["sparse"] for name in ("new", "old", "new2")}
    batches = [r["batch"] for r in runs["old"]]
    names = (("old", "before (b7d4211)"), ("new", "skippable rescale"), ("new2", "skippable rescale, again"))
    for name, label in names:
        sparse.plot(batches, [r["hopper_attend_ms"] * 1e3 for r in runs[name]], marker="o", label=label)
    sparse.plot(batches, [r["peer_bf16_ms"] * 1e3 for r in runs["old"]], ls="--", label="SGLang bf16")
    sparse.plot(batches, [r["peer_fp8_ms"] * 1e3 for r in runs["old"]], ls="--", label="SGLang fp8")
    sparse.set_xscale("log", base=2)
    sparse.set_yscale("log")
    sparse.set_xlabel("batch (top-16 blocks of 128, 16 q heads / 1 KV head)")
    sparse.set_ylabel("us per call (CUDA-graph replay)")
    sparse.set_title("sparse attend as the layer runs it, same call")
    sparse.legend()
    fig.tight_layout()
    fig.savefig(HERE / "rescale_ab.png", dpi=110)


if __name__ == "__main__":
    main()
