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
