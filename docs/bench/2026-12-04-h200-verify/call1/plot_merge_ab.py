"""merge_ab.png / merge_ab.md from call 1's four sweeps (main, merge, main, merge): per shape and forced split count,
the time of the merge reading only the splits that hold pages over main's (mean of the two runs each); the policy's
launch as a star. Usage (this folder): python3 plot_merge_ab.py"""
import json
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

here = Path(__file__).parent
runs = {name: json.loads((here / f"sweep_{name}" / "split_sweep.json").read_text())
        for name in ("1_pkg", "2_merge", "3_pkg", "4_merge")}
main = [runs["1_pkg"], runs["3_pkg"]]
merge = [runs["2_merge"], runs["4_merge"]]
fig, ax = plt.subplots(figsize=(8, 4))
lines = ["| rows x pages, context | splits | main us (2 runs) | used splits only us (2 runs) | ratio |", "|---|---:|---:|---:|---:|"]
for i, rec in enumerate(main[0]):
    keys = sorted((k for k in rec if k.isdigit()), key=int)
    mean = lambda runs_, k: sum(r[i][k] for r in runs_) / len(runs_)  # noqa: E731
    ratios = [mean(merge, k) / mean(main, k) for k in keys]
    label = f"{rec['rows']} x {rec['pages']} pages, {rec['ctx']} tokens"
    line, = ax.plot([int(k) for k in keys], ratios, marker="o", label=label)
    ax.plot([rec["policy_splits"]], [mean(merge, "policy") / mean(main, "policy")], marker="*", ms=14,
            color=line.get_color())
    for k in keys + ["policy"]:
        lines.append(f"| {label} | {k if k != 'policy' else 'policy (' + str(rec['policy_splits']) + ')'} | "
                     f"{' / '.join(str(r[i][k]) for r in main)} | {' / '.join(str(r[i][k]) for r in merge)} | "
                     f"{mean(merge, k) / mean(main, k):.2f} |")
ax.axhline(1.0, color="k", lw=0.8)
ax.set_xscale("log", base=2)
ax.set_xlabel("forced splits (star: the policy's launch)")
ax.set_ylabel("time, used splits only / every split")
ax.set_title("Hopper pa_decode: L2 merge of only the splits holding pages vs all, same call (H200)")
ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(here / "merge_ab.png", dpi=120)
(here / "merge_ab.md").write_text("\n".join(lines) + "\n")
