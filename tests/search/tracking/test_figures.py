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
