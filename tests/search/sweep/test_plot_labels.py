"""Sweep plots: hover labels in one vectorized pass equal the per-row formatting; the plotting
libraries load ahead of the final step."""

from __future__ import annotations

import datetime

import polars as pl

from search.sweep.plots import hover_labels
from search.tracking.publish import run_name, short_names


def _row_label(row: dict[str, object], axes: list[str]) -> str:
    """The reference: Python's ``str`` of each value of the row, ``name=value`` joined."""
    return ", ".join(f"{a.rsplit('.', 1)[-1]}={row[a]}" for a in axes)


def test_labels_equal_the_per_row_formatting_for_mixed_types():
    frame = pl.DataFrame({
        "parallel.tp": [1, 2, None, 2, 4, 1],
        "system.scaleout.bandwidth_GBps": [0.1, -0.0, 0.0, float("nan"), 1e20, 100.0],
        "fidelity": ["fast", None, "exact", "fast", "exact", "fast"],
        "flag": [True, False, None, True, True, False],
        "sizes": pl.Series([[1], [2], [1], [3], [], [1]]),
        "day": [datetime.date(2020, 1, d) for d in range(1, 7)],
        "kind": pl.Series(["p", "q", "p", "q", "p", None], dtype=pl.Categorical),
        "ratio": pl.Series([0.0, -0.0, None, 1.5, 0.0, 2.5e-7], dtype=pl.Float32),
    })
    axes = frame.columns
    want = [_row_label(r, axes) for r in frame.iter_rows(named=True)]
    assert hover_labels(frame, axes).tolist() == want
    assert hover_labels(frame, axes[1:2]).tolist() == [_row_label(r, axes[1:2])
                                                       for r in frame.iter_rows(named=True)]


def test_axes_that_share_a_last_name_are_told_apart_by_their_shortest_unique_suffix():
    axes = ["system.scaleout.bandwidth_GBps", "system.scaleup.bandwidth_GBps",
            "system.accelerator.hbm_bandwidth_GBps", "parallel.tp", "a.x.tp"]
    assert short_names(axes) == {
        "system.scaleout.bandwidth_GBps": "scaleout.bandwidth_GBps",
        "system.scaleup.bandwidth_GBps": "scaleup.bandwidth_GBps",
        "system.accelerator.hbm_bandwidth_GBps": "hbm_bandwidth_GBps",
        "parallel.tp": "parallel.tp", "a.x.tp": "x.tp"}
    assert short_names(["x.tp", "tp"]) == {"x.tp": "x.tp", "tp": "tp"}
    frame = pl.DataFrame({axes[0]: [25.0], axes[1]: [900.0]})
    assert hover_labels(frame, axes[:2]).tolist() == [
        "scaleout.bandwidth_GBps=25.0, scaleup.bandwidth_GBps=900.0"]
    assert run_name({axes[0]: 25.0, axes[1]: 900.0}, axes[:2]) == \
        "scaleout.bandwidth_GBps=25 scaleup.bandwidth_GBps=900"


def test_labels_of_an_empty_frame():
    frame = pl.DataFrame({"parallel.tp": pl.Series([], dtype=pl.Int64)})
    assert hover_labels(frame, ["parallel.tp"]).tolist() == []


def _modules_after(code: str) -> set[str]:
    """The plotting modules a fresh interpreter has imported after running ``code``."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    probe = (f"{code}\nimport sys\nprint(' '.join(m for m in sys.modules "
             "if m.split('.')[0] in ('matplotlib', 'plotly')))")
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"} | {"PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                          check=True, timeout=120)
    return set(done.stdout.split())


def test_preload_imports_the_plot_libraries_without_choosing_a_backend():
    loaded = _modules_after(
        "from search.sweep.plots import preload_plot_libraries\npreload_plot_libraries()\n"
        "import matplotlib\nassert matplotlib.rcParams._get_backend_or_none() is None")
    assert {"matplotlib.pyplot", "plotly.graph_objects", "plotly.subplots",
            "plotly.graph_objs._scatter"} <= loaded


def test_sweep_preloads_plots_only_for_an_open_parent_run():
    skipped = _modules_after(
        "from concurrent.futures import Future\nfrom search.sweep.driver import _preload_plots\n"
        "f = Future()\nf.set_result(None)\n_preload_plots(f)\n"
        "g = Future()\ng.set_exception(RuntimeError('store down'))\n_preload_plots(g)")
    assert "matplotlib.pyplot" not in skipped
    opened = _modules_after(
        "from concurrent.futures import Future\nfrom search.sweep.driver import _preload_plots\n"
        "f = Future()\nf.set_result(object())\n_preload_plots(f)")
    assert "matplotlib.pyplot" in opened
