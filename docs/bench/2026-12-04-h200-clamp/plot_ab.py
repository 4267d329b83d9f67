"""ab.md / ab.png for a same-call A/B of two Hopper kernels through `hopper_bench.py --quick`: the call's folders
hopper_<n>_main / hopper_<n>_new (alternating), per shape the mean of each kernel's runs, their ratio and every run.
Usage: python3 plot_ab.py FOLDER [LABEL]   (e.g. call2 "clamp"; ../2026-12-04-h200-lastpage/call1 "last page")"""
import json
import sys
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

folder = Path(sys.argv[1])
label = sys.argv[2] if len(sys.argv) > 2 else "new"
runs = {"main": [], "new": []}
for path in sorted(folder.glob("hopper_*_*/hopper_bench.json"), key=lambda p: int(p.parent.name.split("_")[1])):
    runs[path.parent.name.split("_")[2]].append(json.loads(path.read_text()))
shapes = [(s["rows"], s["context"]) for s in runs["main"][0]["shapes"]]
copies = " / ".join(f"{r['copy_TBs']:.2f}" for r in runs["main"] + runs["new"])
lines = [f"Same call, alternating runs ({len(runs['main'])} main, {len(runs['new'])} {label}); copy {copies} TB/s.", "",
         f"| rows x context | main us (runs) | {label} us (runs) | {label} / main | main TB/s | {label} TB/s |",
         "|---|---:|---:|---:|---:|---:|"]
ratios = []
for i, (rows, context) in enumerate(shapes):
    us = {k: [r["shapes"][i]["hopper_us"] for r in v] for k, v in runs.items()}
    tbs = {k: sum(r["shapes"][i]["hopper_TBs"] for r in v) / len(v) for k, v in runs.items()}
    mean = {k: sum(v) / len(v) for k, v in us.items()}
    ratios.append(mean["new"] / mean["main"])
    lines.append(f"| {rows} x {context} | {' / '.join(f'{x:.1f}' for x in us['main'])} | "
                 f"{' / '.join(f'{x:.1f}' for x in us['new'])} | {ratios[-1]:.3f} | {tbs['main']:.3f} | "
                 f"{tbs['new']:.3f} |")
(folder / "ab.md").write_text("\n".join(lines) + "\n")
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.bar([f"{r} x {c}" for r, c in shapes], ratios, color="tab:blue")
ax.axhline(1.0, color="k", lw=0.8)
ax.set_ylim(0.9, 1.1)
ax.set_ylabel(f"time {label} / main (mean of runs)")
ax.set_title(f"Hopper pa_decode, H200: {label} vs main, same call")
fig.tight_layout()
fig.savefig(folder / "ab.png", dpi=110)
print("\n".join(lines))
