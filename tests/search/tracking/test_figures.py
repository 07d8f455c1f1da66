"""Static plots keep matplotlib's default look whatever ran before them in the process."""

from __future__ import annotations

from search.tracking.figures import new_axes


def test_a_figure_ignores_a_style_another_library_switched_to():
    import matplotlib.pyplot as plt

    fig, ax = new_axes()
    default = ax.get_facecolor()
    plt.close(fig)
    plt.style.use("ggplot")  # what Optuna's matplotlib plots do
    fig, ax = new_axes()
    assert ax.get_facecolor() == default == (1.0, 1.0, 1.0, 1.0)
    plt.close(fig)


def test_saved_png_equals_the_tight_layout_savefig_image(tmp_path):
    """save_png skips savefig's second layout draw; the image stays the plain
    ``tight_layout(); savefig()`` one, pixel for pixel."""
    import numpy as np
    from PIL import Image

    from search.tracking.figures import save_png

    def figure():
        fig, grid = new_axes(6.4, 4.8, nrows=2)
        for ax, scale in zip(grid, (1.0, 1e6), strict=True):
            ax.scatter(np.arange(50.0) * scale, np.sin(np.arange(50.0)), s=8)
            ax.set_xlabel("a long axis label to make tight_layout move things")
            ax.annotate("point", (10 * scale, 0.5), fontsize=7)
        return fig

    fig = figure()
    fig.tight_layout()
    fig.savefig(tmp_path / "reference.png", dpi=100)
    save_png(figure(), tmp_path / "saved.png")
    reference = np.asarray(Image.open(tmp_path / "reference.png"))
    saved = np.asarray(Image.open(tmp_path / "saved.png"))
    assert reference.shape == saved.shape and (reference == saved).all()


def test_fixed_margins_keep_every_label_inside_the_figure_and_off_the_next_row():
    """The sweep's stacked rows (long dotted axis names under each row, 4-digit tick labels, an
    objective large enough for matplotlib's "1e7" offset text) laid out by fixed_margins: every
    text is drawn inside the figure, and no row's x label or tick labels reach into the row
    below."""
    import matplotlib.pyplot as plt
    import numpy as np

    from search.tracking.figures import fixed_margins

    names = ["system.scaleout.bandwidth_GBps", "system.accelerator.hbm_bandwidth_GBps",
             "system.accelerator.peak_tflops_bf16"]
    fig, grid = new_axes(6.4, 2.4 * len(names), nrows=len(names))
    for ax, name, scale in zip(grid, names, (1e6, 1.0, 1.0), strict=True):
        ax.scatter(np.linspace(1500, 3500, 40), np.linspace(6.5, 22.5, 40) * scale, s=10)
        ax.set_xlabel(name)
        ax.set_ylabel("iteration_time_s")
    fixed_margins(fig)  # as write_plots lays out its stacked figure
    fig.canvas.draw()  # places the labels
    renderer = fig.canvas.get_renderer()
    page = fig.bbox
    for row, ax in enumerate(grid):
        (x_lo, x_hi), (y_lo, y_hi) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        drawn = [t for t in ax.get_xticklabels() if x_lo <= t.get_position()[0] <= x_hi] + \
            [t for t in ax.get_yticklabels() if y_lo <= t.get_position()[1] <= y_hi]
        for text in [ax.xaxis.label, ax.yaxis.label, ax.yaxis.offsetText, *drawn]:
            if not text.get_text():
                continue
            box = text.get_window_extent(renderer)
            assert page.x0 <= box.x0 and box.x1 <= page.x1, text.get_text()
            assert page.y0 <= box.y0 and box.y1 <= page.y1, text.get_text()
        if row + 1 < len(grid):
            below = grid[row + 1].get_window_extent(renderer)
            assert ax.xaxis.label.get_window_extent(renderer).y0 > below.y1
    plt.close(fig)
