"""exADMM (Togashi, Abe, Saito, WWW 2024): the run records read back, and Table 4.

``recrepro exadmm table`` (:func:`table_best`)
    Table 4: per family the validation-selected operating point with its test metrics.

The figures read the records through :func:`load_runs` too (:mod:`recrepro.papers.exadmm.figures`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from recrepro.io import write_text
from recrepro.papers.exadmm.run import DEFAULT_METRICS
from recrepro.records import read_record_json

__all__ = ["load_runs", "table_best"]


# ------------------------------------------------------------------ reading runs


def load_runs(run_files: Sequence[str | Path]) -> pd.DataFrame:
    """One row per run: identity, family, test metrics (``test:<key>``), validation metrics (``val:<key>``)."""
    rows = []
    for f in run_files:
        d = Path(f).parent if str(f).endswith(".json") else Path(f)
        m = read_record_json(d / "metrics.json")
        row = {"dir": str(d), "dataset": m["dataset"], "method": m["method"], "seed": m["seed"],
               "family": m.get("family", m["method"].split("_")[0])}
        row.update({f"test:{k}": v for k, v in m["overall"].items()})
        if (d / "validation.json").exists():
            row.update({f"val:{k}": v for k, v in read_record_json(d / "validation.json")["overall"].items()})
        rows.append(row)
    return pd.DataFrame(rows)


def _mean_over_seeds(frame: pd.DataFrame) -> pd.DataFrame:
    numeric = [c for c in frame.columns if c.startswith(("test:", "val:"))]
    return frame.groupby(["dataset", "family", "method"], as_index=False)[numeric].mean()


# ------------------------------------------------------------------ table


def table_best(run_files, out_md, out_csv, *, tier: str, select: str,
               ks: Sequence[int] = (20, 100)) -> pd.DataFrame:
    """Table 4: per dataset and family, the operating point with the best validation ``select`` metric.

    Columns: the test metrics of :data:`DEFAULT_METRICS` at the cut-offs ``ks``.
    """
    frame = _mean_over_seeds(load_runs(run_files))
    rows = []
    for (dataset, family), grp in frame.groupby(["dataset", "family"]):
        key = f"val:{select}"
        best = grp.loc[grp[key].idxmax()] if key in grp else grp.iloc[0]
        rows.append({"dataset": dataset, "family": family, "method": best["method"],
                     f"val {select}": best.get(key, np.nan),
                     **{c[5:]: best[c] for c in grp.columns if c.startswith("test:")}})
    table = pd.DataFrame(rows)
    wanted = [f"{m}@{k}" for k in ks for m in DEFAULT_METRICS]
    cols = ["dataset", "family", "method", f"val {select}"] + [c for c in wanted if c in table.columns]
    table = table[cols]
    write_text(out_csv, table.to_csv(index=False))
    md = [f"# exADMM table 4 ({tier} tier): validation-selected operating points (by {select}), test metrics",
          "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in table.iterrows():
        md.append("| " + " | ".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in r.tolist()) + " |")
    write_text(out_md, "\n".join(md) + "\n")
    return table
