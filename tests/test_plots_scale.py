"""One setting scales every kitlib picture's text and height (for a projector)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from kitlib import plots  # noqa: E402
from kitlib.errors import KitError  # noqa: E402


@pytest.fixture
def scale_back():
    yield
    plots.set_scale(1.0)
    plt.close("all")


def test_scale_multiplies_fonts_and_heights_not_widths(ref_trace, scale_back):
    trace = ref_trace("profiler_5step")
    step = int(trace.steps["step"].iloc[1])
    plots.set_scale(1.0)
    w1, h1 = plots.plot_step_timeline(trace, step).get_size_inches()
    plots.set_scale(1.5)
    fig = plots.plot_step_timeline(trace, step)
    w2, h2 = fig.get_size_inches()
    assert (w2, round(h2 / h1, 6)) == (w1, 1.5)
    assert plt.rcParams["font.size"] == 15
    assert fig.axes[0].xaxis.label.get_fontsize() == 15     # axis labels follow font.size
    assert plots.font(8) == 12


def test_scale_from_the_environment_and_bad_values(monkeypatch, scale_back):
    monkeypatch.setenv("KITLIB_PLOT_SCALE", "2")
    assert plots.set_scale() == 2.0 and plots.fig_size(10, 3) == (10, 6)
    for bad in ("0", "-1", "big"):
        monkeypatch.setenv("KITLIB_PLOT_SCALE", bad)
        with pytest.raises(KitError, match="positive number"):
            plots.set_scale()


def test_lesson11_route_map_draws_a_dot_per_answering_tool(scale_back):
    from kitlib.course.exercises import l11
    from kitlib.plots.routes import plot_routes
    routes = l11.route_table()
    fig = plot_routes(routes, list(l11.TOOLS))
    big = [ln for ln in fig.axes[0].lines if ln.get_marker() == "o"]
    assert len(big) == int(routes[list(l11.TOOLS)].to_numpy().sum())
