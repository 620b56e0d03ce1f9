"""Answer forms and explorers, without a browser: the forms judge through the same code as
``ex.check``; the explorers' tables follow their controls, with figures from the recordings."""
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
    form = lesson02.form("launch_count")
    assert isinstance(form.answer_box.value, str) and form.value() is None
    form.answer_box.value = "1"
    form.check_button.click()
    assert 'data-correct="false"' in form.feedback.value and "not quite" in form.feedback.value
    # the form counts the try on the question, as ex.check does
    assert lesson02["launch_count"].wrong_tries == 1
    form.answer_box.value = "3"             # 3 launches: cudaLaunchKernel ×2 and cudaLaunchKernelExC
    # an edit takes the old verdict off the screen: the box's new answer is not checked yet
    assert 'data-correct' not in form.feedback.value and 'data-given="3"' in form.feedback.value
    assert "not checked yet" in form.feedback.value and form.answer_box.continuous_update
    form.check_button.click()
    assert form.verdicts[-1].correct is True and 'data-correct="true"' in form.feedback.value
    form.reveal_button.click()
    assert "the answer is 3" in form.feedback.value


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
    line = next(ln for ln in text.splitlines() if "conv_bound" in ln)
    assert line.count("nsight compute") == 1 and line.count("timer") == 1


def test_chain_explorer_opens_on_the_lessons_operator_and_follows_the_selection(p5, lesson02):
    e = explorers.chain_explorer(p5, "aten::cudnn_convolution", step=int(p5.steps["step"].iloc[0]))
    t = e.table
    assert len(t) == lesson02["launch_count"].answer == 3 and e.figure_png.startswith(b"\x89PNG")
    # the queue delay of the last launch, read off the narrow table (844.61 µs, tests/test_exercises_feedback.py)
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
        assert plt.rcParams["font.size"] == 15.0 and plots.fig_size(11, 3.6) == (11, 3.6 * 1.5)
    finally:
        presentation(1.0)
    assert plots.SCALE == 1.0 and plt.rcParams["font.size"] == 10.0
