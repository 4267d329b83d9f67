"""Markdown tables and matplotlib plots of an accuracy-study results dict (see atom_mxfp4/evals/accuracy.py).

Rows of several seeds are averaged per (family, tokens, cache); needle recall pools hits over seeds.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

REFERENCE_ORDER = ("exact", "bf16", "fp8")
COLORS = {"exact": "black", "bf16": "tab:blue", "fp8": "tab:orange", "mxfp4-ceil": "tab:green",
          "mxfp4-floor": "tab:red", "mxfp4-mse": "tab:purple", "mxfp4-ceil idx-fp8": "lightgreen",
          "mxfp4-floor idx-fp8": "salmon", "mxfp4-mse idx-fp8": "violet"}  # one cache, one colour in every plot


def _cache_order(caches) -> list[str]:
    refs = [c for c in REFERENCE_ORDER if c in caches]
    layer = sorted(c for c in caches if c.startswith("mxfp4-") and "emulated" not in c)
    emulated = sorted(c for c in caches if "emulated" in c)
    return refs + layer + emulated


def aggregate(results: dict, layer: str = "sparse") -> tuple[list[tuple[str, int]], list[str], dict]:
    """Rows of `layer` ("sparse" | "dense") -> (cases [(family, tokens)] in run order, caches in display order,
    {(family, tokens, cache): stats})."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    cases: list[tuple[str, int]] = []
    for row in results["rows"]:
        if row.get("layer", "sparse") != layer:
            continue
        case = (row["family"], row["tokens"])
        if case not in cases:
            cases.append(case)
        groups[case + (row["cache"],)].append(row)
    stats = {}
    for key, rows in groups.items():
        per_needle = defaultdict(list)
        for r in rows:
            for p, v in r["per_needle"].items():
                per_needle[int(p)].append(v)
        stats[key] = {
            "rel_l2": sum(r["rel_l2"] for r in rows) / len(rows),
            "topk_agreement": sum(r["topk_agreement"] for r in rows) / len(rows),
            "needle_hits": sum(r["needle_hits"] for r in rows),
            "needle_asked": sum(r["needle_asked"] for r in rows),
            "needle_kept": sum(r.get("needle_kept", 0) for r in rows),
            "needle_exact": sum(r.get("needle_exact", 0) for r in rows),
            "per_needle": {p: sum(v) / len(v) for p, v in sorted(per_needle.items())},
            "seeds": len(rows),
        }
    caches = _cache_order({k[2] for k in stats})
    return cases, caches, stats


def _table(title: str, cases, caches, stats, cell) -> list[str]:
    lines = [f"### {title}", "", "| family | N | " + " | ".join(caches) + " |",
             "|---|---:|" + "---:|" * len(caches)]
    for family, tokens in cases:
        cells = [cell(stats.get((family, tokens, c))) for c in caches]
        lines.append(f"| {family} | {tokens} | " + " | ".join(cells) + " |")
    return lines + [""]


def mode_summary(results: dict) -> dict[str, dict[str, float]]:
    """Per cache: geometric-mean and worst rel-L2 over cases, mean top-k agreement, pooled needle recall
    (sparse layer); `dense_geomean_rel_l2` the same geomean for the dense layer (NaN without dense rows)."""
    cases, caches, stats = aggregate(results)
    dense_cases, _, dense = aggregate(results, "dense")
    out = {}
    for c in caches:
        if c == "exact":
            continue
        vals = [stats[(f, n, c)] for f, n in cases if (f, n, c) in stats]
        hits = sum(v["needle_hits"] for v in vals)
        asked = sum(v["needle_asked"] for v in vals)
        kept = sum(v["needle_kept"] for v in vals)
        found_by_exact = sum(v["needle_exact"] for v in vals)
        out[c] = {
            "geomean_rel_l2": _geomean([v["rel_l2"] for v in vals]),
            "worst_rel_l2": max(v["rel_l2"] for v in vals),
            "mean_topk_agreement": sum(v["topk_agreement"] for v in vals) / len(vals),
            "needle_recall": hits / asked if asked else float("nan"),
            "needle_kept": kept / found_by_exact if found_by_exact else float("nan"),
            "dense_geomean_rel_l2": _geomean([dense[(f, n, c)]["rel_l2"] for f, n in dense_cases
                                              if (f, n, c) in dense]),
        }
    return out


def _geomean(values: list[float]) -> float:
    if not values:
        return float("nan")
    return math.exp(sum(math.log(max(v, 1e-30)) for v in values) / len(values))


def pairwise_wins(results: dict, layer: str) -> tuple[list[str], dict[tuple[str, str], tuple[int, int]]]:
    """MXFP4 layer rows of `layer`: (modes, {(a, b): (cases where a's rel-L2 < b's, cases compared)}), a case being
    one (family, tokens, seed). Averages hide that one seed can dominate; this counts wins per case."""
    by_case: dict[tuple, dict[str, float]] = defaultdict(dict)
    for r in results["rows"]:
        if r.get("layer", "sparse") == layer and r["cache"].startswith("mxfp4-") and "emulated" not in r["cache"]:
            by_case[(r["family"], r["tokens"], r["seed"])][r["cache"]] = r["rel_l2"]
    modes = sorted({c for v in by_case.values() for c in v})
    wins = {}
    for a in modes:
        for b in modes:
            if a != b:
                both = [v for v in by_case.values() if a in v and b in v]
                wins[(a, b)] = (sum(v[a] < v[b] for v in both), len(both))
    return modes, wins


def _win_cell(won: int, total: int) -> str:
    """`won/total (p)`: p = two-sided sign test (exact binomial, ties counted as losses) of won vs total - won."""
    from .stats import sign_test

    return f"{won}/{total} (p={sign_test(won, total):.2g})" if total else "-"


def _wins_table(results: dict, layer: str) -> list[str]:
    modes, wins = pairwise_wins(results, layer)
    if len(modes) < 2:
        return []
    lines = [f"### {layer.capitalize()} layer: cases (family, N, seed) where the row's rel-L2 is lower than the "
             "column's (p: two-sided sign test)", "", "| | " + " | ".join(modes) + " |", "|---|" + "---:|" * len(modes)]
    for a in modes:
        cells = ["-" if a == b else _win_cell(*wins[(a, b)]) for b in modes]
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    return lines + [""]


def markdown_report(results: dict, plots: list[Path] | None = None) -> str:
    cases, caches, stats = aggregate(results)
    head = [
        f"Command: `{results['command']}`  ",
        f"Device: {results['device']}, backend {results['backend']}, torch {results['torch']}; "
        f"{results['queries']} query rows per request, top-{results['topk']} blocks of 128; "
        f"{results['seconds']} s.",
        "",
        "Columns: `exact` = the fp64 oracle itself; `bf16` / `fp8` = the oracle with K, V, index-K rounded through "
        "that dtype; `mxfp4-<mode>` = the layer (MXFP4 caches, sparse top-k on the MXFP4 index-K, bf16 q and "
        "output); `mxfp4-<mode> (emulated)` = the oracle with K, V, index-K rounded through the MXFP4 codec.",
        "",
    ]
    lines = head + _table("Output rel-L2 vs the fp64 oracle (lower is better)", cases, caches, stats,
                          lambda s: "-" if s is None else f"{s['rel_l2']:.4f}")
    lines += _table("Top-k block agreement with the oracle (higher is better)", cases, caches, stats,
                    lambda s: "-" if s is None else f"{100 * s['topk_agreement']:.1f}%")
    needle_cases = [c for c in cases if any(stats.get(c + (k,), {}).get("needle_asked") for k in caches)]
    if needle_cases:
        lines += _table("Needle recall (rows x needles whose block every index head kept; in brackets: of the "
                        "pairs the exact oracle found, how many this cache found too)", needle_cases, caches,
                        stats, lambda s: "-" if s is None or not s["needle_asked"]
                        else f"{s['needle_hits']}/{s['needle_asked']} ({s['needle_kept']}/{s['needle_exact']})")
    dense_cases, dense_caches, dense = aggregate(results, "dense")
    if dense_cases:
        lines += _table("Dense layer (full attention, no selection): output rel-L2 vs the fp64 oracle", dense_cases,
                        dense_caches, dense, lambda s: "-" if s is None else f"{s['rel_l2']:.4f}")
    lines += _wins_table(results, "sparse")
    if dense_cases:
        lines += _wins_table(results, "dense")
    summary = mode_summary(results)
    lines += ["### Summary over all cases", "",
              "| cache | geomean rel-L2 | worst rel-L2 | mean top-k agreement | needle recall | needles kept "
              "(of the oracle's) | dense geomean rel-L2 |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for c, s in summary.items():
        lines.append(f"| {c} | {s['geomean_rel_l2']:.4f} | {s['worst_rel_l2']:.4f} | "
                     f"{100 * s['mean_topk_agreement']:.1f}% | {100 * s['needle_recall']:.1f}% | "
                     f"{100 * s['needle_kept']:.1f}% | "
                     f"{s['dense_geomean_rel_l2']:.4f} |")
    if plots:
        lines += [""] + [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(lines)


def write_plots(results: dict, out_dir: Path) -> list[Path]:
    """rel-L2 per family, needle recall per depth, rel-L2 per context length (when several). -> paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases, caches, stats = aggregate(results)
    shown = [c for c in caches if c != "exact" and "emulated" not in c]
    paths = []

    dense_cases, _, dense = aggregate(results, "dense")
    panels = [("sparse layer (top-k on the index-K)", cases, stats)]
    if dense_cases:
        panels.append(("dense layer (no selection)", dense_cases, dense))
    fig, axes = plt.subplots(1, len(panels), figsize=(max(6, 1.4 * len(cases)) * len(panels), 4), squeeze=False)
    for ax, (title, panel_cases, panel_stats) in zip(axes[0], panels):
        width = 0.8 / max(1, len(shown))
        for i, c in enumerate(shown):
            xs = [j + i * width for j in range(len(panel_cases))]
            ys = [panel_stats.get((f, n, c), {}).get("rel_l2", float("nan")) for f, n in panel_cases]
            ax.bar(xs, ys, width, label=c, color=COLORS.get(c))
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(panel_cases))],
                      [f"{f}\nN={n}" for f, n in panel_cases], fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("output rel-L2 vs fp64 oracle")
        ax.set_title(f"KV cache error by data family: {title}", fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(shown), fontsize=8)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    paths.append(out_dir / "rel_l2_by_family.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    needle_cases = [(f, n) for f, n in cases if stats.get((f, n, "exact"), {}).get("per_needle")]
    if needle_cases:
        fig, axes = plt.subplots(1, len(needle_cases), figsize=(4.5 * len(needle_cases), 3.6), squeeze=False)
        for ax, (f, n) in zip(axes[0], needle_cases):
            prompt = n - results["queries"]
            for c in ["exact"] + shown:
                s = stats.get((f, n, c))
                if s and s["per_needle"]:
                    ax.plot([p / prompt for p in s["per_needle"]], list(s["per_needle"].values()), marker="o",
                            label=c, color=COLORS.get(c), alpha=0.8)
            ax.set_ylim(-0.05, 1.05)
            ax.set_xlabel("needle depth (fraction of prompt)")
            ax.set_ylabel("recall")
            ax.set_title(f"{f}, N={n}")
        axes[0][0].legend(fontsize=8)
        fig.tight_layout()
        paths.append(out_dir / "needle_recall_by_depth.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)

    lengths = sorted({n for f, n in cases if f in ("needles", "long")})
    if len(lengths) > 1:
        fig, ax = plt.subplots(figsize=(6, 4))
        for layer_stats, style, suffix in ((stats, "-", ""), (dense, "--", " dense")):
            for c in shown:
                pts = sorted((n, layer_stats[(f, n, c)]["rel_l2"]) for f, n in cases
                             if f in ("needles", "long") and (f, n, c) in layer_stats)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", label=c + suffix,
                            color=COLORS.get(c))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("context length N (tokens)")
        ax.set_ylabel("output rel-L2 vs fp64 oracle")
        ax.set_title("needles / long families: error vs context length\n(solid: sparse layer, dashed: dense)",
                     fontsize=10)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        paths.append(out_dir / "rel_l2_vs_context.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    return paths
