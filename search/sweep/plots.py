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

from search.tracking.publish import short_names

__all__ = ["hover_labels", "pareto_mask", "preload_plot_libraries", "write_plots"]


def preload_plot_libraries() -> None:
    """Import plotly's figure classes and matplotlib's pyplot ahead of :func:`write_plots`
    (about 0.5 s of CPU, mostly matplotlib), e.g. on a thread while a sweep evaluates; a
    failure is left for :func:`write_plots` to meet and report."""
    try:
        import matplotlib.pyplot  # noqa: F401 - the backend stays unresolved until drawn
        import plotly.graph_objects as go
        import plotly.io  # noqa: F401
        import plotly.subplots  # noqa: F401

        go.Scatter()  # plotly loads a trace type's validators on first use
    except Exception:  # noqa: BLE001, S110 - only a warm-up
        pass


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


def _axis_text(frame: pl.DataFrame, axis: str, name: str) -> pl.Expr:
    """``name=value`` per row of ``axis``, each distinct value formatted once by Python's
    ``str``, as a per-row f-string would; -0.0 kept apart from 0.0."""
    column = frame[axis]
    if not (column.dtype.is_numeric() or column.dtype in (pl.Boolean, pl.String, pl.Categorical)
            or isinstance(column.dtype, pl.Enum)):
        return pl.lit(pl.Series(axis, [f"{name}={v}" for v in column.to_list()], dtype=pl.String))
    distinct = column.unique(maintain_order=True)
    text = pl.col(axis).replace_strict(distinct, [f"{name}={v}" for v in distinct.to_list()],
                                       return_dtype=pl.String)
    if column.dtype.is_float():  # unique() merges -0.0 and 0.0; str() tells them apart
        zero = pl.when((1 / pl.col(axis)) < 0).then(pl.lit(f"{name}={-0.0}")).otherwise(
            pl.lit(f"{name}={0.0}"))
        text = pl.when(pl.col(axis) == 0).then(zero).otherwise(text)
    return text


def hover_labels(frame: pl.DataFrame, axes: list[str]) -> np.ndarray:
    """Every row's hover label, e.g. ``tp=2, bandwidth_GBps=100.0`` (the axes'
    ``name=value`` joined by ", ", names by :func:`short_names`), as a numpy string array."""
    if frame.height == 0:
        return np.array([], dtype=str)
    names = short_names(axes)
    labels = frame.select(pl.concat_str([_axis_text(frame, a, names[a]) for a in axes],
                                        separator=", "))
    return labels.to_series().to_numpy().astype(str)


def write_plots(frame: pl.DataFrame, axes: list[str], objective: str, out_dir: Path,
                max_points: int = 5000) -> list[Path]:
    """Write the sweep's figures under ``out_dir``; return their paths.

    ``sweep.html``: every figure in one interactive page (plotly inline once, works offline);
    ``objective_vs_axes.png`` and ``pareto_time_cost.png``: the same as small static images.
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from search.tracking.figures import fixed_margins, new_axes, save_png, write_html_page

    ok = frame.filter(pl.col("feasible"))
    if ok.height == 0 or objective not in ok.columns or not axes:
        return []
    if ok.height > max_points:
        ok = ok.sample(max_points, seed=0)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    hover = hover_labels(ok, axes)  # plotly takes numpy arrays without a per-element check
    objective_values = ok[objective].to_numpy()
    figures: list[tuple[str, go.Figure]] = []
    fig = make_subplots(rows=len(axes), cols=1, subplot_titles=axes)
    for row, axis in enumerate(axes, start=1):
        fig.add_trace(go.Scatter(x=ok[axis].to_numpy(), y=objective_values, mode="markers",
                                 text=hover, marker={"size": 6, "opacity": 0.6}, name=axis),
                      row=row, col=1)
        fig.update_yaxes(title_text=objective, row=row, col=1)
    fig.update_layout(height=300 * len(axes), showlegend=False)
    figures.append((f"{objective} vs each sweep axis (feasible points)", fig))
    png, grid = new_axes(6.4, 2.4 * len(axes), nrows=len(axes))
    for ax, axis in zip(np.atleast_1d(grid), axes, strict=True):
        ax.scatter(ok[axis].to_numpy(), objective_values, s=10, alpha=0.6)
        ax.set_xlabel(axis)
        ax.set_ylabel(objective)
    fixed_margins(png)
    paths.append(save_png(png, out_dir / "objective_vs_axes.png", tight=False))
    if "cost_usd_per_iter" in ok.columns and "iteration_time_s" in ok.columns:
        x = ok["iteration_time_s"].to_numpy()
        y = ok["cost_usd_per_iter"].to_numpy()
        front = pareto_mask(x, y)
        order = np.flatnonzero(front)[np.argsort(x[front])]
        labels = hover[order]
        fig = go.Figure([
            go.Scatter(x=x[~front], y=y[~front], mode="markers", name="points",
                       text=hover[~front],
                       marker={"size": 5, "opacity": 0.4}),
            go.Scatter(x=x[order], y=y[order], mode="lines+markers", name="Pareto front",
                       text=labels),
        ])
        fig.update_layout(xaxis_title="iteration_time_s", yaxis_title="cost_usd_per_iter")
        figures.append(("Pareto front: iteration time vs cost (hover for the plan)", fig))
        png, ax = new_axes(6.4, 4.4)
        ax.scatter(x[~front], y[~front], s=8, alpha=0.4, label="points")
        ax.plot(x[order], y[order], "o-", color="C3", label="Pareto front")
        ends = [("fastest", order[0], 0.95), ("cheapest", order[-1], 0.55)]
        for what, i, at in ends[:1] if order.shape[0] == 1 else ends:
            ax.annotate(f"{what}:\n" + str(hover[i]).replace(", ", "\n"), (x[i], y[i]),
                        xytext=(0.45, at), textcoords="axes fraction", fontsize=7, va="top",
                        bbox={"boxstyle": "round", "fc": "white", "ec": "0.7", "alpha": 0.9},
                        arrowprops={"arrowstyle": "->", "color": "0.4", "lw": 0.8})
        ax.set_xlabel("iteration_time_s")
        ax.set_ylabel("cost_usd_per_iter")
        ax.set_title("Pareto front: iteration time vs cost")
        ax.legend(fontsize=8)
        fixed_margins(png)
        paths.append(save_png(png, out_dir / "pareto_time_cost.png", tight=False))
    paths.insert(0, write_html_page(figures, out_dir / "sweep.html", "simsweep sweep plots"))
    return paths
