"""Sweep plots for the parent MLflow run: objective vs each axis, Pareto front of time vs cost.

Model (DESIGN.md "MLflow layout": plots on the parent run): one self-contained plotly HTML per
figure (MLflow's artifact viewer renders HTML). Large tables are subsampled to ``max_points``
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


def write_plots(frame: pl.DataFrame, axes: list[str], objective: str, out_dir: Path,
                max_points: int = 5000) -> list[Path]:
    """Write the sweep's figures under ``out_dir``; return their paths."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    ok = frame.filter(pl.col("feasible"))
    if ok.height == 0 or objective not in ok.columns or not axes:
        return []
    if ok.height > max_points:
        ok = ok.sample(max_points, seed=0)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    fig = make_subplots(rows=len(axes), cols=1, subplot_titles=axes)
    for row, axis in enumerate(axes, start=1):
        fig.add_trace(go.Scatter(x=ok[axis].to_list(), y=ok[objective].to_list(), mode="markers",
                                 marker={"size": 5, "opacity": 0.6}, name=axis), row=row, col=1)
        fig.update_yaxes(title_text=objective, row=row, col=1)
    fig.update_layout(height=320 * len(axes), showlegend=False,
                      title=f"{objective} vs each sweep axis (feasible points)")
    path = out_dir / "objective_vs_axes.html"
    fig.write_html(path, include_plotlyjs=True)
    paths.append(path)
    if "cost_usd_per_iter" in ok.columns and "iteration_time_s" in ok.columns:
        x = ok["iteration_time_s"].to_numpy()
        y = ok["cost_usd_per_iter"].to_numpy()
        front = pareto_mask(x, y)
        fig = go.Figure([
            go.Scatter(x=x[~front], y=y[~front], mode="markers", name="points",
                       marker={"size": 4, "opacity": 0.4}),
            go.Scatter(x=x[front], y=y[front], mode="lines+markers", name="Pareto front"),
        ])
        fig.update_layout(xaxis_title="iteration_time_s", yaxis_title="cost_usd_per_iter",
                          title="Pareto front: iteration time vs cost")
        path = out_dir / "pareto_time_cost.html"
        fig.write_html(path, include_plotlyjs=True)
        paths.append(path)
    return paths
