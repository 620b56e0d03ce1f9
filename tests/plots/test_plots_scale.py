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
    assert plots.set_scale() == 2.0 and plots.fig_size(8, 3) == (8, 6)
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


@pytest.mark.parametrize("scale", [1.0, 1.5])
def test_pictures_fit_a_laptops_notebook_at_1x_with_text_of_9px(ref_trace, scale_back, scale):
    """JupyterLab at 1280 x 800 with its file browser open gives an output 848 px wide
    (measured by tests/lessons/test_browser.py) and shrinks a wider PNG: the step timeline was
    drawn 12 inches wide, 1,19x px at 100 dpi, so shown at 0.71x with 7 px lane labels
    (issue 40). Every kitlib figure is now at most MAX_WIDTH_IN wide, also on a projector
    setting (text grows, width does not), so it shows at 1x, its smallest text >= 9 px."""
    import io
    from PIL import Image
    from kitlib.plots.timeline import plot_timeline
    trace = ref_trace("profiler_5step")
    step = trace.steps.iloc[1]
    plots.set_scale(scale)
    assert plots.fig_size(12, 3)[0] == plots.MAX_WIDTH_IN == 8.2
    # smallest text each writes: the step label and legend at 8 pt; the range names at 7 pt
    for fig, points in ((plots.plot_step_timeline(trace, int(step["step"])), 8),
                        (plot_timeline(trace, int(step["start_ns"]), int(step["end_ns"])), 7)):
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight", metadata=plots.png_metadata(fig))
        png = Image.open(io.BytesIO(buf.getvalue()))
        text_px = float(png.text[plots.SMALLEST_TEXT_KEY])
        print(f"scale {scale}: PNG {png.width} px wide (the cell: 848 px), smallest text {text_px} px")
        assert png.width <= 848
        # points x 100 dpi / 72 px, times the scale: 7 pt is 9.72 px at 1x
        assert text_px == pytest.approx(points * scale * 100 / 72, abs=0.01) and text_px >= 9


def _png_width(fig) -> int:
    import io
    from PIL import Image
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")      # as the inline backend saves it
    return Image.open(io.BytesIO(buf.getvalue())).width


def test_fit_width_narrows_a_picture_whose_text_runs_past_the_cell(ref_trace, scale_back):
    """Lesson 05's shapes picture drew its notes past its bars and, at the projector's scale,
    a title wider than the figure: cropped tight, its PNG was 855 px (1.0) and 992 px (1.5)
    wide. fit_width puts the title on more lines and narrows the axes: <= 840 px, text sizes
    as drawn. A legend wider than the cell cannot be helped by narrowing: left as drawn."""
    from kitlib.analyses.grouping import shape_table
    from kitlib.plots.grouping import plot_shapes
    trace = ref_trace("fixed_batch")
    for scale in (1.0, 1.5):
        plots.set_scale(scale)
        fig = plot_shapes(shape_table(trace, "aten::cudnn_convolution"), "aten::cudnn_convolution")
        before, text_px = _png_width(fig), plots.smallest_text_px(fig)
        plots.fit_width(fig)
        after = _png_width(fig)
        print(f"scale {scale}: {before} px -> {after} px, smallest text {text_px:.2f} px")
        assert before > 840 >= after and plots.smallest_text_px(fig) == text_px
    plots.set_scale(1.0)
    fig, ax = plt.subplots(figsize=plots.fig_size(8, 3))
    ax.plot([0, 1], label="a legend entry far wider than any notebook cell " * 3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    plots.fit_width(fig)
    assert fig.get_figwidth() == 8 and _png_width(fig) > 840
