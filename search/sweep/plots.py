"""Sweep plots for the parent MLflow run: objective vs each axis, Pareto front of time vs cost.

Model (DESIGN.md "MLflow layout": plots on the parent run): one interactive plotly page per run
with the plotly bundle inline once, plus PNG images (:mod:`search.tracking.figures`). Large tables are subsampled to ``max_points``
rows with a fixed seed (the full table is the parquet artifact). The Pareto front is the set of
feasible points no other feasible point beats on both iteration time and cost (both minimized).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

__all__ = ["pareto_mask", "write_plots"]


def pareto_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Boolean mask of the points on the lower-left Pareto front of (x, y), both minimized."""
    order = np.lexsort((y, x))
    mask = np.zeros(x.shape[0], dtype=bool)
    best_y = np.inf
    for i in order:
        if y[i] < best_y:
            mask[i] = True
            best_y = y[i]
    return mask


def _label(row: dict[str, object], axes: list[str]) -> str:
    return ", ".join(f"{a.rsplit('.', 1)[-1]}={row[a]}" for a in axes)


def write_plots(frame: pl.DataFrame, axes: list[str], objective: str, out_dir: Path,
                max_points: int = 5000) -> list[Path]:
    """Write the sweep's figures under ``out_dir``; return their paths.

    ``sweep.html``: every figure in one interactive page (plotly inline once, works offline);
    ``objective_vs_axes.png`` and ``pareto_time_cost.png``: the same as small static images.
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from search.tracking.figures import new_axes, save_png, write_html_page

    ok = frame.filter(pl.col("feasible"))
    if ok.height == 0 or objective not in ok.columns or not axes:
        return []
    if ok.height > max_points:
        ok = ok.sample(max_points, seed=0)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    hover = [_label(r, axes) for r in ok.select(axes).iter_rows(named=True)]
    figures: list[tuple[str, go.Figure]] = []
    fig = make_subplots(rows=len(axes), cols=1, subplot_titles=axes)
    for row, axis in enumerate(axes, start=1):
        fig.add_trace(go.Scatter(x=ok[axis].to_list(), y=ok[objective].to_list(), mode="markers",
                                 text=hover, marker={"size": 6, "opacity": 0.6}, name=axis),
                      row=row, col=1)
        fig.update_yaxes(title_text=objective, row=row, col=1)
    fig.update_layout(height=300 * len(axes), showlegend=False)
    figures.append((f"{objective} vs each sweep axis (feasible points)", fig))
    png, grid = new_axes(6.4, 2.4 * len(axes))
    png.clear()
    for i, axis in enumerate(axes, start=1):
        ax = png.add_subplot(len(axes), 1, i)
        ax.scatter(ok[axis].to_numpy(), ok[objective].to_numpy(), s=10, alpha=0.6)
        ax.set_xlabel(axis)
        ax.set_ylabel(objective)
    paths.append(save_png(png, out_dir / "objective_vs_axes.png"))
    if "cost_usd_per_iter" in ok.columns and "iteration_time_s" in ok.columns:
        x = ok["iteration_time_s"].to_numpy()
        y = ok["cost_usd_per_iter"].to_numpy()
        front = pareto_mask(x, y)
        order = np.flatnonzero(front)[np.argsort(x[front])]
        labels = [hover[i] for i in order]
        fig = go.Figure([
            go.Scatter(x=x[~front], y=y[~front], mode="markers", name="points",
                       text=[h for h, f in zip(hover, front, strict=True) if not f],
                       marker={"size": 5, "opacity": 0.4}),
            go.Scatter(x=x[order], y=y[order], mode="lines+markers", name="Pareto front",
                       text=labels),
        ])
        fig.update_layout(xaxis_title="iteration_time_s", yaxis_title="cost_usd_per_iter")
        figures.append(("Pareto front: iteration time vs cost (hover for the plan)", fig))
        png, ax = new_axes(6.4, 4.4)
        ax.scatter(x[~front], y[~front], s=8, alpha=0.4, label="points")
        ax.plot(x[order], y[order], "o-", color="C3", label="Pareto front")
        for i, text in zip(order[:8], labels[:8], strict=False):
            ax.annotate(text, (x[i], y[i]), fontsize=7, xytext=(4, 4),
                        textcoords="offset points")
        ax.set_xlabel("iteration_time_s")
        ax.set_ylabel("cost_usd_per_iter")
        ax.set_title("Pareto front: iteration time vs cost")
        ax.legend(fontsize=8)
        paths.append(save_png(png, out_dir / "pareto_time_cost.png"))
    paths.insert(0, write_html_page(figures, out_dir / "sweep.html", "simsweep sweep plots"))
    return paths
