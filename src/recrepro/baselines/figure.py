"""The reference baselines' figure: MostPop and Random per dataset, drawn from their records."""

from __future__ import annotations

from pathlib import Path

from collections import defaultdict

import numpy as np

from recrepro.records import read_record_json
from recrepro.reporting.plotting import panel_grid, plot_metric_bars, save_figure


def _headline_metric(overall: dict[str, float]) -> str:
    """The split's first ranking metric: NDCG at the smallest K, else HR."""
    for family in ("ndcg@", "hr@"):
        keys = sorted((k for k in overall if k.startswith(family)), key=lambda k: int(k.split("@")[1]))
        if keys:
            return keys[0]
    return sorted(overall)[0]


def figure_baselines(metrics_files: list[Path], out_pdf: Path, out_png: Path, *, tier: str) -> None:
    """One panel per (dataset, protocol, split): the headline metric of each baseline, mean ± sd over seeds."""
    cells: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    metric_of: dict[tuple[str, str, str], str] = {}
    for path in metrics_files:
        m = read_record_json(path)
        key = (m["dataset"], m.get("protocol", ""), m["split"])
        metric = metric_of.setdefault(key, _headline_metric(m["overall"]))
        cells[key][m["method"]].append(float(m["overall"][metric]))
    if not cells:
        raise ValueError("figure_baselines: no runs given")
    keys = sorted(cells)
    fig, axes = panel_grid(len(keys), max_cols=4, panel_width=max(1.85, 3.2 / len(keys)), panel_height=2.6)
    for ax, key in zip(axes, keys, strict=True):
        series = {meth: (float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else None)
                  for meth, v in sorted(cells[key].items())}
        plot_metric_bars(ax, series, metric=metric_of[key], n_seeds={m: len(v) for m, v in cells[key].items()})
        prefix = f"{key[0]}\n" if len({k[0] for k in keys}) > 1 else ""  # one dataset: named in the caption
        ax.set_title(f"{prefix}{key[2]}\n({key[1]})", fontsize=8)
    datasets = ", ".join(sorted({k[0] for k in keys}))
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=datasets,
                caption="reference baselines; bars: mean over split seeds, error bars: sd")
