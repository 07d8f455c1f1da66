"""Plot files that the MLflow UI shows offline: one HTML page per run, PNG images beside it.

Model: MLflow's artifact viewer renders an ``.html`` artifact inside a sandboxed iframe loaded
from a ``blob:`` URL, so a page can neither fetch a CDN without network nor resolve a relative
``plotly.min.js``; the plotly bundle (about 4.6 MB) must be inline. :func:`write_html_page` puts
every figure of a run into one page that carries the bundle once (plotly's ``to_html`` with
``include_plotlyjs=True`` for the first figure only). PNGs (matplotlib, ``Agg`` backend, no
display) are small and previewed by the image viewer even where scripts are blocked.

MLflow 3.17's viewer gives the iframe ``sandbox="allow-scripts"``: the inline plotly runs and
draws (checked in Chromium by ``tests/search/tracking/test_ui_browser.py``). The frame has an
opaque origin, so Chromium's site isolation runs it in its own process; headless Chromium's
one-shot screenshot (``--screenshot`` with a virtual-time budget) does not paint such a frame
and shows it blank, which is why that test turns site isolation off.
"""

from __future__ import annotations

import html
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["fixed_margins", "new_axes", "save_png", "write_html_page"]


def write_html_page(figures: Sequence[tuple[str, Any]], path: Path, title: str) -> Path:
    """One self-contained HTML page of plotly ``figures`` ((heading, figure) pairs)."""
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
             "</title></head><body style='font-family:sans-serif'>",
             f"<h2>{html.escape(title)}</h2>"]
    for i, (heading, fig) in enumerate(figures):
        parts.append(f"<h3>{html.escape(heading)}</h3>")
        parts.append(fig.to_html(full_html=False, include_plotlyjs=(i == 0),
                                 config={"displaylogo": False}))
    parts.append("</body></html>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def new_axes(width_in: float = 6.4, height_in: float = 4.0, nrows: int = 1) -> tuple[Any, Any]:
    """A matplotlib (figure, axes) pair on the non-interactive Agg backend (``nrows`` > 1: an
    array of axes stacked in one column)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    # matplotlib's default style: Optuna's matplotlib plots switch the process to "ggplot",
    # which would otherwise restyle every later figure of a process that ran a study
    matplotlib.rcdefaults()
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(nrows, 1, figsize=(width_in, height_in))
    return fig, ax


def fixed_margins(fig: Any, left_in: float = 0.9, right_in: float = 0.2, bottom_in: float = 0.55,
                  top_in: float = 0.35, row_gap_in: float = 0.6) -> None:
    """Lay out ``fig``'s axes (one column of rows) with margins and gaps fixed in inches, for
    figures whose labels are known to fit them: no layout pass, so :func:`save_png` with
    ``tight=False`` draws the figure once. ``tight_layout`` finds the margins by drawing every
    text first: ~40% of the CPU of a sweep's two PNGs (0.25 of ~0.6 s)."""
    width_in, height_in = fig.get_size_inches()
    rows = max(len(fig.axes), 1)
    axes_in = (height_in - top_in - bottom_in - (rows - 1) * row_gap_in) / rows
    fig.subplots_adjust(left=left_in / width_in, right=1 - right_in / width_in,
                        bottom=bottom_in / height_in, top=1 - top_in / height_in,
                        hspace=row_gap_in / axes_in if rows > 1 else 0.2)


def save_png(fig: Any, path: Path, dpi: int = 100, tight: bool = True) -> Path:
    """Save a matplotlib figure as PNG and free it (``tight``: lay it out with
    ``tight_layout`` first; False keeps the layout it has, e.g. from :func:`fixed_margins`)."""
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    if tight:
        with warnings.catch_warnings():  # best effort: a figure tight_layout cannot fit
            # (colour bars, long tick labels) keeps its layout instead of printing a notice
            warnings.filterwarnings("ignore", category=UserWarning)
            fig.tight_layout()
    # tight_layout leaves a placeholder layout engine, which makes savefig draw the whole figure
    # once more (a dry run for a layout) before it renders; the layout is already done
    fig.set_layout_engine(None)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
