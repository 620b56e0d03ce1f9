"""Answer forms and explorers, without a browser: the forms judge through the same code as
``ex.check``; the explorers' tables follow their controls, with figures from the recordings."""
import re
import pandas as pd
import pytest

from kitlib.analyses import memory
from kitlib.course import exercises, explorers
from kitlib.course.exercises import Question, l11
from kitlib.course.widgets import AnswerForm, readable
from kitlib.readers.bundle import open_capture


@pytest.fixture(scope="module")
def p5():
    return open_capture("profiler_5step").trace


@pytest.fixture(scope="module")
def lesson02():
    return exercises.lesson02(open_capture("profiler_5step"))


def test_a_form_turns_a_wrong_answer_into_a_hint_and_a_right_one_into_a_confirmation(lesson02):
    form = lesson02.form("longest_kernel_launch")      # a compute question (a prediction explains at once)
    assert isinstance(form.answer_box.value, str) and form.value() is None
    form.answer_box.value = "1"
    form.check_button.click()
    assert 'data-correct="false"' in form.feedback.value and "not quite" in form.feedback.value
    # the form counts the try on the question, as ex.check does
    assert lesson02["longest_kernel_launch"].wrong_tries == 1
    form.answer_box.value = "3"             # launch #3 (cudaLaunchKernelExC) started the 732.513 µs kernel
    # an edit takes the old verdict off the screen: the box's new answer is not checked yet
    assert 'data-correct' not in form.feedback.value and 'data-given="3"' in form.feedback.value
    assert "not checked yet" in form.feedback.value and form.answer_box.continuous_update
    form.check_button.click()
    assert form.verdicts[-1].correct is True and 'data-correct="true"' in form.feedback.value
    form.reveal_button.click()
    # Reveal after a right answer shows the explanation and keeps the ✅ (issue 40: it turned ✏️)
    assert "the answer is 3" in form.feedback.value and 'data-correct="true"' in form.feedback.value


def test_the_line_of_predicted_stays_open_until_the_form_above_gets_a_prediction(monkeypatch):
    """Issue 40: with Run All, ``ex.predicted`` ran before any prediction and printed the answer.
    Now its line says the prediction is open, and in a kernel it is a widget that the
    question's form redraws: once the learner predicts there, the comparison appears in it."""
    from ipywidgets.widgets.widget import _instances
    from kitlib.course import widgets
    monkeypatch.setattr(widgets, "in_kernel", lambda: True)
    ex = exercises.lesson02(open_capture("profiler_5step"))
    assert ex["launch_count"].answer == 3
    bundle = ex.predicted("launch_count")._repr_mimebundle_()
    assert "still open" in bundle["text/plain"] and "3" not in bundle["text/plain"]
    line = _instances[bundle["application/vnd.jupyter.widget-view+json"]["model_id"]]
    assert "still open" in line.value and widgets.PREDICTED_CLASS in line._dom_classes
    form = ex.form("launch_count")
    form.answer_box.value = "1"
    form.check_button.click()
    print(line.value)
    # (the form's box holds text: the echo of the prediction is left to _shown, '1' today)
    assert 'data-correct="false"' in line.value and "you predicted" in line.value
    assert "1&#x27;; the recording says 3." in line.value or "1; the recording says 3." in line.value
    ex.check("launch_count", 3)                  # a later try does not change the prediction kept
    assert 'data-correct="false"' in line.value and "the recording says 3." in line.value


def test_forms_offer_choices_and_yes_no_where_the_question_has_them(lesson02):
    import ipywidgets as w
    assert isinstance(lesson02.form("launch_to_kernel_id").answer_box, w.Dropdown)
    yes_no = lesson02.form("add_host_and_device")
    assert isinstance(yes_no.answer_box, w.ToggleButtons)
    yes_no.answer_box.value = "no"
    assert yes_no.check().correct is True


def test_a_verdict_is_text_outside_a_kernel(lesson02):
    v = lesson02.check("queue_delay_us", None)
    bundle = v._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/markdown"} and "replace `None`" in bundle["text/plain"]


def test_an_answer_outside_the_choices_is_told_so_and_is_not_a_try():
    q = Question("id", "Which id? 'correlation' or 'external'", "correlation", "because", choices=["correlation",
                                                                                                 "external"])
    v = q.judge("stream")
    assert v.correct is None and "not one of the choices" in v.message and q.wrong_tries == 0
    assert q.judge("external").correct is False and q.wrong_tries == 1
    ex = l11.questions()
    assert "not one of the choices" in ex.check("conv_bound", "gdb").message
    assert ex["conv_bound"].wrong_tries == 0
    assert ex.check("copy_overlap", "torch.profiler and nsys").correct      # two tools, both named
    assert ex.check("conv_bound", "ncu").correct


def test_show_lists_each_questions_choices_once():
    text = l11.questions().show()
    entry = next(e for e in text.split("\n  - ") if e.startswith("conv_bound"))    # its lines, wrapped
    assert entry.count("nsight compute") == 1 and entry.count("timer") == 1
    assert max(len(ln) for ln in text.splitlines()) <= 95


def test_chain_explorer_opens_on_the_lessons_operator_and_follows_the_selection(p5, lesson02):
    e = explorers.chain_explorer(p5, "aten::cudnn_convolution", step=int(p5.steps["step"].iloc[0]))
    t = e.table
    assert len(t) == lesson02["launch_count"].answer == 3 and e.figure_png.startswith(b"\x89PNG")
    # the queue delay of the last launch, read off the narrow table (844.61 µs, tests/course/test_exercises_feedback.py)
    assert round(t["gpu_at_us"].iloc[-1] - t["launch_at_us"].iloc[-1], 2) == pytest.approx(844.61, abs=0.01)
    e.controls["operator"].value = "aten::mm"
    assert e.table is not t and "cudnn" not in " ".join(e.table["kernel"])
    html = e.static_html()
    assert "data:image/png;base64," in html and "aten::mm" in html


def test_timeline_explorer_zooms(p5):
    second = int(p5.steps["step"].iloc[1])
    e = explorers.timeline_explorer(p5, step=second)
    whole = int(e.table.loc["GPU stream 7 · kernels", "events"])
    e.controls["window"].value = (10.0, 20.0)
    part = int(e.table.loc["GPU stream 7 · kernels", "events"])
    assert 0 < part < whole
    e.controls["window"].value = (50.0, 50.0)
    assert e.table is None and "window is empty" in e.message


def test_memory_explorer_opens_on_the_peak_step_and_accounts_for_every_byte(p5):
    tl = memory.memory_timeline(p5)
    peak = memory.memory_peak(tl)
    held = memory.memory_held_at(p5, tl, int(peak["position"]))
    # every byte allocated at the peak is in one row, those from before the recording included
    assert held["held_bytes"].sum() == peak["allocated_bytes"] == 11_462_948_352
    assert held["op"].iloc[0] == "aten::cudnn_convolution"
    e = explorers.memory_explorer(p5, tl)
    assert e.values() == {"step": int(peak["step"])} and e.table.index[0] == "aten::cudnn_convolution"


def test_grouping_explorer_sorts_and_filters():
    fb = open_capture("fixed_batch").trace
    e = explorers.grouping_explorer(fb, name="aten::cudnn_convolution")
    assert e.table["tensors"].iloc[0] == "[128, 3, 224, 224] × [64, 3, 7, 7]"      # lesson 05's top shape
    e.controls["contains"].value = "56, 56"
    assert all("56, 56" in s for s in e.table["tensors"])
    e.controls["sort_by"].value = "count"
    assert e.table["count"].is_monotonic_decreasing
    with pytest.raises(Exception, match="input_shape"):
        explorers.grouping_explorer(fb, by="colour")


def test_readable_tables_keep_every_character():
    t = l11.tool_table()
    html = readable(t).to_html()
    assert all(a.replace("&", "&amp;") in html for a in t["answers"]) and "white-space: normal" in html


def test_one_presentation_setting_scales_pictures_and_text():
    import matplotlib.pyplot as plt
    from kitlib import plots
    from kitlib.course.widgets import presentation
    try:
        assert presentation(1.5) == 1.5 and plots.SCALE == 1.5
        assert plt.rcParams["font.size"] == 15.0 and plots.fig_size(8, 3.6) == (8, 3.6 * 1.5)
    finally:
        presentation(1.0)
    assert plots.SCALE == 1.0 and plt.rcParams["font.size"] == 10.0


def test_readable_escapes_text_and_keeps_numbers_on_one_line():
    t = pd.DataFrame({"name": ["a<b", "c"], "count": pd.array([3, None], dtype="Int64"), "ms": [1.25, float("nan")],
                      "mixed": pd.Series([42.609432999999996, "x"], dtype=object)})
    html = readable(t).to_html()
    assert "a&lt;b" in html and "&lt;NA&gt;" in html and "<NA>" not in html
    assert ">42.609433<" in html                # a number in a text column as pandas prints it
    # numbers never wrap; the plain 0, 1, … index is not shown
    for j in (1, 2):
        assert f"td.col{j} {{\n  white-space: nowrap;" in html
    assert "row_heading" not in html
    assert "row_heading" in readable(t.set_index("name")).to_html()


def test_presentation_css_scales_tables_forms_and_explorers_from_jupyterlabs_own_sizes():
    from kitlib.course.widgets import presentation_css
    css = presentation_css(1.5)
    assert ".jp-RenderedHTMLCommon table {font-size: calc(var(--jp-ui-font-size1) * 1.5);}" in css
    assert ".kitlib-answer-form, .kitlib-explorer {font-size: calc(var(--jp-content-font-size1) * 1.5);" in css
    assert "--jp-widgets-font-size: calc(var(--jp-ui-font-size1) * 1.5)" in css     # the controls too
    assert "em;" not in css        # never relative to the parent: a table inside an explorer is scaled once


def test_the_environment_variable_scales_tables_and_forms_when_kitlib_is_imported_in_a_kernel(tmp_path):
    """KITLIB_PLOT_SCALE=1.5 and kitlib imported in a (stand-in) kernel: the pictures' scale
    and the tables'/forms' style, shown once; outside a kernel only the pictures' scale."""
    import json
    import os
    import subprocess
    import sys
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json, sys\n"
        "if sys.argv[1] == 'kernel':\n"
        "    from IPython.core.interactiveshell import InteractiveShell\n"
        "    InteractiveShell.instance().kernel = object()      # what widgets.in_kernel looks for\n"
        "import IPython.display as d\n"
        "shown = []\n"
        "d.display = lambda obj, **kw: shown.append(getattr(obj, 'data', str(obj)))\n"
        "import kitlib\n"
        "from kitlib import plots\n"
        "from kitlib.course import widgets\n"
        "print(json.dumps({'scale': plots.SCALE, 'shown': shown, 'presentation': widgets.PRESENTATION['scale']}))\n")
    env = dict(os.environ, KITLIB_PLOT_SCALE="1.5", MPLBACKEND="Agg")
    run = lambda where: json.loads(subprocess.run([sys.executable, str(probe), where], env=env, check=True,  # noqa: E731
                                                  capture_output=True, text=True).stdout.strip().splitlines()[-1])
    inside = run("kernel")
    assert inside["scale"] == inside["presentation"] == 1.5
    assert len(inside["shown"]) == 1 and "calc(var(--jp-ui-font-size1) * 1.5)" in inside["shown"][0]
    outside = run("script")
    assert outside["scale"] == 1.5 and outside["shown"] == []


def test_going_back_to_scale_1_in_a_kernel_shows_the_style_of_1(monkeypatch):
    from kitlib import plots
    from kitlib.course import widgets
    shown = []
    monkeypatch.setattr(widgets, "in_kernel", lambda: True)
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append(obj.data))
    monkeypatch.setitem(widgets.PRESENTATION, "shown", False)
    try:
        assert widgets.presentation(1.0) == 1.0 and shown == []      # nothing to undo: no style
        widgets.presentation(2)
        widgets.presentation(1.0)
        assert [("* 2)" in s, "* 1)" in s) for s in shown] == [(True, False), (False, True)]
    finally:
        widgets.PRESENTATION["scale"] = plots.set_scale(1.0)


def test_callsite_explorer_groups_sorts_and_filters():
    """Lesson 06's explorer: device time by the user's line, then by module type."""
    from kitlib.analyses import callsites
    fb = open_capture("fixed_batch").trace
    e = explorers.grouping_explorer(fb, by="callsite")
    assert e.values() == {"group_by": "user_frame", "sort_by": "device_self_us", "contains": "", "top": 8}
    by_line = callsites.group_by_callsite(fb).sort_values("device_self_ns", ascending=False)
    assert e.table.index[0] == by_line["user_frame"].iloc[0] == "torchvision/models/resnet.py(143): forward"
    assert e.table["device_self_us"].iloc[0] == pytest.approx(by_line["device_self_ns"].iloc[0] / 1e3, abs=0.05)
    assert e.table["device_self_us"].is_monotonic_decreasing and e.figure_png.startswith(b"\x89PNG")
    e.controls["group_by"].value = "module_type"
    assert e.table.index.name == "module_type" and e.table.index[0] == "Conv2d" and len(e.table) == 8
    e.controls["sort_by"].value = "ops"
    assert e.table["ops"].is_monotonic_decreasing and e.table.index[0] == "BatchNorm2d"
    e.controls["contains"].value = "NORM"            # case-insensitive
    assert list(e.table.index) == ["BatchNorm2d"]
    e.controls["contains"].value = "no such module"
    assert e.table is None and "no module_type contains 'no such module'" in e.message


def test_callsite_explorer_offers_the_views_by_layer_once_the_prediction_is_made():
    """A new learner (December 2026) switched lesson 06's explorer to module_type, which shows
    the held-back table of hot_kernel_module, before predicting it. Given ``hold``, group_by
    offers user_frame alone, with a note (in the widget and its static view) saying why, until
    the prediction is made; then module_type and module, the note gone, the view kept. A
    revealed prediction opens them as well, and one made already holds nothing."""
    from kitlib.course import lesson_capture
    cap = lesson_capture("fixed_batch")
    ex = exercises.lesson06(cap)
    e = explorers.grouping_explorer(cap.trace, by="callsite", hold=(ex, "hot_kernel_module"))
    assert list(e.controls["group_by"].options) == ["user_frame"]
    notes = [c for c in e.children if explorers.HELD_VIEWS_CLASS in c._dom_classes]
    assert len(notes) == 1 and "waits for your prediction of hot_kernel_module" in notes[0].value
    assert "waits for your prediction of hot_kernel_module" in e.static_html()
    ex.check("hot_kernel_module", "Conv2d")                  # a prediction, wrong: it opens all the same
    assert list(e.controls["group_by"].options) == ["user_frame", "module_type", "module"]
    assert e.values()["group_by"] == "user_frame" and e.held_note == "" and "waits for" not in e.static_html()
    assert not [c for c in e.children if explorers.HELD_VIEWS_CLASS in c._dom_classes]
    e.controls["group_by"].value = "module_type"
    assert e.table.index.name == "module_type"
    again = explorers.grouping_explorer(cap.trace, by="callsite", hold=(ex, "hot_kernel_module"))
    assert len(again.controls["group_by"].options) == 3 and again.held_note == ""
    shown = exercises.lesson06(cap)
    e = explorers.grouping_explorer(cap.trace, by="callsite", hold=(shown, "hot_kernel_module"))
    shown.reveal("hot_kernel_module")
    assert len(e.controls["group_by"].options) == 3


def test_callsite_explorer_holds_the_none_row_until_its_prediction():
    """A new learner's Run All (December 2026): lesson 06's explorer showed the call site
    "(none)" with 4,290 operators below backward_python_frames, which the count of operators
    with no Python frame hints at. Given ``hold_none``, the row is out of the table and the
    picture, with a note (widget and static view), until the prediction is made or revealed;
    then it is drawn, the note gone, hot_kernel_module's views still held."""
    from kitlib.course import lesson_capture
    cap = lesson_capture("fixed_batch")
    ex = exercises.lesson06(cap)
    e = explorers.grouping_explorer(cap.trace, by="callsite", hold=(ex, "hot_kernel_module"),
                                    hold_none=(ex, "backward_python_frames"))
    assert "(none)" not in list(e.table.index)
    said = "the row (none), the operators with no call site, waits for your prediction of backward_python_frames"
    assert said in e.static_html() and "waits for your prediction of hot_kernel_module" in e.static_html()
    assert len([c for c in e.children if explorers.HELD_VIEWS_CLASS in c._dom_classes]) == 2
    ex.reveal("backward_python_frames")
    assert "(none)" in list(e.table.index) and said not in e.static_html()
    assert "waits for your prediction of hot_kernel_module" in e.static_html()
    assert list(e.controls["group_by"].options) == ["user_frame"]
    ex.check("hot_kernel_module", "Conv2d")
    assert e.held_note == "" and len(e.controls["group_by"].options) == 3
    again = explorers.grouping_explorer(cap.trace, by="callsite", hold_none=(ex, "backward_python_frames"))
    assert "(none)" in list(again.table.index) and again.held_note == ""      # predicted already: nothing held


def test_callsite_explorer_table_spans_the_output_and_keeps_a_call_site_on_one_line():
    """The same learner: the explorer's table filled about 470 px of the 848 px output, each
    call site wrapped in an 8 em column. Its output area spans the width, and by call site a
    text column grows to 28 em (a call site of 48 characters, about 26 em, on one line); the
    chain explorer's nine columns keep 8 em."""
    fb = open_capture("fixed_batch").trace
    e = explorers.grouping_explorer(fb, by="callsite")
    assert e.table_out.layout.width == "100%" and e.max_width_em == 28
    assert "max-width: 28em" in readable(e.table, max_width_em=e.max_width_em).to_html()
    longest = max(map(len, e.table.index))
    assert longest * 0.55 <= e.max_width_em, longest
    chain = explorers.chain_explorer(fb, "aten::cudnn_convolution", step=int(fb.steps["step"].iloc[0]))
    assert chain.max_width_em == 8 and chain.table_out.layout.width == "100%" and chain.table_out.layout.margin == "2px 0"


def test_memory_explorer_follows_the_chosen_step(p5):
    tl = memory.memory_timeline(p5)
    e = explorers.memory_explorer(p5, tl)
    first, picture = e.values()["step"], e.figure_png
    other = next(s for s in e.controls["step"].options if s != first)
    e.controls["step"].value = other
    assert e.values() == {"step": other} and e.figure_png != picture
    # the operators holding memory at that step's own peak, as memory_held_at gives them
    part = tl[tl["step"] == other]
    position = int(part.index[int(memory.memory_peak(part)["position"])])
    held = memory.memory_held_at(p5, tl, position).head(8)
    assert list(e.table.index) == list(held["op"])
    assert e.table["held_gb"].tolist() == (held["held_bytes"] / 1e9).round(3).tolist()


def test_timeline_explorer_follows_the_chosen_step(p5):
    from kitlib.plots.timeline import timeline_rows
    steps = p5.steps.reset_index(drop=True)
    e = explorers.timeline_explorer(p5, step=int(steps["step"].iloc[1]))
    before, picture = e.table, e.figure_png
    third = int(steps["step"].iloc[2])
    e.controls["step"].value = third
    assert e.values()["step"] == third and e.figure_png != picture
    expected = explorers.lane_table(timeline_rows(p5, int(steps["start_ns"].iloc[2]), int(steps["end_ns"].iloc[2])))
    pd.testing.assert_frame_equal(e.table, expected)
    assert not e.table.equals(before)
    e.controls["steps"].value = 2                    # two steps from the chosen one: more events in each lane
    two = e.table
    assert (two["events"] >= expected.reindex(two.index)["events"].fillna(0)).all() and two["events"].sum() > expected["events"].sum()


def test_chain_labels_are_stacked_so_that_none_overlap():
    from kitlib.plots import _label_levels
    xs = [0.0, 1.0, 10.0, 10.5, 11.0, 30.0]
    levels = _label_levels(xs, 2.0)
    assert levels == [0, 1, 0, 1, 2, 0]
    for level in set(levels):                        # on each level, neighbours at least min_dx apart
        on = [x for x, lv in zip(xs, levels) if lv == level]
        assert all(b - a >= 2.0 for a, b in zip(on, on[1:]))
    assert _label_levels([0.0, 5.0, 10.0], 2.0) == [0, 0, 0]      # far apart: one level


@pytest.mark.parametrize("scale", [1.0, 1.5])
def test_the_chain_pictures_launch_numbers_do_not_overlap(p5, scale):
    """Lesson 02's picture, on a laptop and on a projector: the "#n" labels, drawn with their
    white boxes, do not intersect (two stacked ones did by a pixel or two before)."""
    import re
    import matplotlib
    from kitlib import plots
    from kitlib.analyses.chain import first_op
    row = first_op(p5, "aten::cudnn_convolution", step=int(p5.steps["step"].iloc[0]))
    plots.set_scale(scale)
    try:
        fig = plots.plot_chain(p5, row)
    finally:
        plots.set_scale(1.0)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        labels = [t for t in fig.axes[0].texts if re.fullmatch(r"#\d+", t.get_text())]
        assert len(labels) == 6                      # three launches, three GPU events
        boxes = [t.get_bbox_patch().get_window_extent(renderer) for t in labels]
        assert all(b.contains(*t.get_window_extent(renderer).get_points().mean(axis=0)) for b, t in zip(boxes, labels))
        overlapping = [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]
        assert overlapping == []
        assert len({round(b.y0) for b in boxes}) > 2, "some labels stacked (the case this test is about)"
    finally:
        matplotlib.pyplot.close(fig)


def test_an_explorers_note_names_what_it_draws_after_its_control_is_used():
    """A redraw from a control runs outside any cell: its note used to fall back to every
    recording opened so far in the kernel (lessons 00, 04, 09). It keeps the note of the cell
    that made the explorer, the one recording it draws."""
    from types import SimpleNamespace

    from kitlib.course import labels
    cap = open_capture("profiler_5step")
    ns = {"cap": cap, "explorers": explorers}
    labels._pre_run_cell(SimpleNamespace(raw_cell="e = explorers.timeline_explorer(cap.trace)"))
    labels._CELL["ns"] = ns
    e = explorers.timeline_explorer(cap.trace)
    labels._post_run_cell()
    other = open_capture("cold_start_8step")       # another recording opened later in the kernel
    assert other.label in labels.sources_note()     # outside a cell: everything opened
    e.controls["step"].value = e.controls["step"].options[-1]
    assert e.note == f"data: {cap.label}"
    assert f"data: {cap.label}</div>" in e.static_html() and other.label not in e.static_html()
    assert other.label in labels.sources_note()     # the fixed note held only while it drew


def test_a_header_word_longer_than_the_column_widens_it_rather_than_spilling():
    """Lesson 10's by-batch table: "uninstrumented" (14 letters) in a 7 em column ran into its
    neighbours' headers ("uninstrumentedninstrumentedprofiled_"). The column is made at least
    as wide as the header's longest word; a header whose words fit gets no rule."""
    import re
    t = pd.DataFrame({"uninstrumented_epoch": [1], "uninstrumented_ms": [2.5], "profiled_epoch": [3]})
    html = readable(t, max_width_em=7).styler.to_html()
    widths = dict(re.findall(r"th\.col(\d) \{\s*min-width: ([\d.]+)em;", html))
    assert widths == {"0": "8.4", "1": "8.4"}


def test_a_drop_down_grows_at_a_projector_scale_only_as_far_as_its_longest_choice_fits():
    """Issue 40: at KITLIB_PLOT_SCALE=1.5 lesson 13's drop-downs cut their longest choices (95
    characters in 696 px). A form with choices carries a style that keeps its drop-down's
    text no larger than the size at which its longest choice fits the widest drop-down (at a
    laptop's 13 px every choice of the kit fits; tests/lessons/test_browser.py measures both)."""
    from kitlib.course import widgets
    from kitlib.course.exercises import Exercises, Question
    long = ["nothing in the code: other processes shared the machine while this run was timed", "x"]
    ex = Exercises("t", [Question("k", "Which?", "x", "e", kind="recall", choices=long),
                         Question("n", "How many?", 3, "e", kind="compute")])
    styles = [c.value for c in ex.form("k").children if "<style>" in getattr(c, "value", "")]
    fit = widgets.CHOICE_ROOM_PX / (len(long[0]) * widgets.CHOICE_EM_PER_CHAR)
    assert styles == [widgets.choice_fit_css("k", len(long[0]))]
    assert f".kitlib-answer-form.kitlib-answer-form-k .widget-dropdown > select" in styles[0]
    assert f"min(var(--jp-widgets-font-size), {fit:.1f}px)" in styles[0] and 13 < fit < 13 * 1.5
    assert not [c for c in ex.form("n").children if "<style>" in getattr(c, "value", "")]


def test_a_profiler_keeps_the_recording_of_the_cell_that_made_it(tmp_path):
    """Lesson 01 records into a new folder at each Run All, in the same kernel: a later cell
    that prints ``prof.key_averages()`` names the folder ``prof`` was recorded into, not every
    folder recorded so far (the note grew with every Run All)."""
    from types import SimpleNamespace
    import torch
    from torch.profiler import ProfilerActivity, profile
    from kitlib.course import labels
    from kitlib.readers.bundle import note_source
    notes = []
    for run in range(2):        # two Run Alls
        out = tmp_path / f"my-first-profile-{run}"
        out.mkdir()
        note_source(out, f"{out.name}: your own CPU run")
        ns = {"out": out, "torch": torch}
        labels._pre_run_cell(SimpleNamespace(raw_cell="with profile() as prof:\n    torch.ones(2).sum()\nout"))
        labels._CELL["ns"] = ns
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            torch.ones(2).sum()
        ns["prof"] = prof
        labels._post_run_cell()
        labels._pre_run_cell(SimpleNamespace(raw_cell="table = prof.key_averages().table()\nprint(table)"))
        labels._CELL["ns"] = ns
        notes.append(labels.sources_note())
        labels._post_run_cell()
    assert notes == ["data: my-first-profile-0: your own CPU run", "data: my-first-profile-1: your own CPU run"], notes


def test_a_long_row_label_gets_break_points_and_wraps_in_its_column():
    """Lesson 06's grouping explorer shows call sites as the table's row labels: at 1280x800
    "torchvision/models/resnet.py(143): forward" ran over the numbers beside it. A row label
    breaks like a text column's entry (after / and . and before "("), and wraps within its
    column where it must."""
    import pandas as pd
    from kitlib.course.widgets import readable
    t = pd.DataFrame({"user_frame": ["torchvision/models/resnet.py(143): forward", "a<b"],
                      "device_self_us": [1234.5, 2.0]}).set_index("user_frame")
    page = readable(t, max_width_em=8).to_html()
    assert "torchvision/<wbr>models/<wbr>resnet.<wbr>py<wbr>(143): forward</th>" in page
    assert "a&lt;b</th>" in page                      # escaped, as a text column's entry
    rule = re.search(r"th\.row_heading \{([^}]*)\}", page)
    assert rule and "overflow-wrap: break-word" in rule.group(1), page


def test_a_word_or_an_index_value_longer_than_its_column_widens_it_and_gaps_say_what_they_are():
    """Lesson 13's fix table at 1280 x 800 (a new learner, 6 December): the index broke as
    "case_ | a" and the measured column as "uninstrumente | d steps" (6 em for 14 letters),
    and the loads of recordings older than the load record showed NaN. A text column and the
    index are at least their longest unbreakable piece wide (0.6 em a letter, up to
    max_width_em); the index breaks no short value at its underscores; ``na_rep`` names a
    gap, and wraps at its spaces in a column of numbers."""
    import re
    t = pd.DataFrame({"measured": ["uninstrumented steps", "a b"], "load": [float("nan"), 3.5]},
                     index=pd.Index(["case_a", "case_b"], name="case"))
    html = readable(t, max_width_em=8, na_rep="not recorded").to_html()
    assert re.search(r"td\.col0 \{\s*min-width: 8\.0em;", html)           # 14 * 0.6 = 8.4, up to 8
    assert re.search(r"th\.row_heading \{\s*min-width: 3\.6em;", html) and "case_<wbr>" not in html
    assert '<span style="white-space: normal">not recorded</span>' in html and "NaN" not in html
    assert "NaN" in readable(t).to_html()                                   # the default is unchanged
