"""``ex.outcome(key, show)`` (issue 40): what answers a prediction stays hidden until the
learner has predicted (form or ``ex.check``) or revealed it, whatever order cells run in."""
import pytest

from kitlib.course import widgets
from kitlib.course.exercises import Exercises, Question

ANSWER_ROWS = "step  dur_ms\n0  1523.3615"


def _ex():
    return Exercises("t", [Question("order", "Predict: how many times longer?", "10000", "the cold start",
                                    kind="predict", choices=["10", "10000"]),
                           Question("ratio", "Compute the ratio", 11164.2, "step 0 / median", kind="compute")])


def _show():
    print(ANSWER_ROWS)


def test_no_answer_before_a_prediction_then_the_outcome_after_check(capsys):
    ex = _ex()
    assert ex.outcome("order", _show) is None
    said = capsys.readouterr().out
    assert "1523" not in said and "10000" not in said
    assert "held back until you predict" in said and "ex.check('order', answer)" in said and "ex.reveal('order')" in said
    ex.check("order", "10")                 # a wrong prediction opens it too
    ex.outcome("order", _show)
    assert capsys.readouterr().out == ANSWER_ROWS + "\n"


def test_the_outcome_after_reveal(capsys):
    ex = _ex()
    ex.reveal("order")
    ex.outcome("order", lambda: ANSWER_ROWS)    # a returned value is displayed
    assert "1523.3615" in capsys.readouterr().out


def test_outcome_rejects_an_unknown_key():
    ex = _ex()
    with pytest.raises(KeyError):
        ex.outcome("nope", _show)


def test_a_question_of_another_kind_holds_back_until_checked_once(capsys):
    """A compute question (not a prediction) opens an outcome once checked at least once."""
    ex = _ex()
    ex.outcome("ratio", _show)
    said = capsys.readouterr().out
    assert "1523" not in said and "held back until you answer ratio" in said and "ex.reveal(key)" in said
    assert not ex["ratio"].attempted()
    ex.check("ratio", "not a number")       # refused as a number: no try counted, still held back
    capsys.readouterr()
    ex.outcome("ratio", _show)
    assert "1523" not in capsys.readouterr().out
    ex.check("ratio", 5.0)                  # one wrong try opens it
    capsys.readouterr()
    ex.outcome("ratio", _show)
    assert capsys.readouterr().out == ANSWER_ROWS + "\n"


def test_a_question_of_another_kind_opens_after_a_right_answer_or_a_reveal(capsys):
    ex = _ex()
    ex.check("ratio", 11164.2)
    capsys.readouterr()
    ex.outcome("ratio", _show)
    assert capsys.readouterr().out == ANSWER_ROWS + "\n"
    ex = _ex()
    ex.reveal("ratio")
    capsys.readouterr()
    ex.outcome("ratio", _show)
    assert capsys.readouterr().out == ANSWER_ROWS + "\n"


def test_an_outcome_of_mixed_kinds_names_what_is_left(capsys):
    ex = _ex()
    ex.check("order", "10")
    capsys.readouterr()
    ex.outcome(("order", "ratio"), _show)
    said = capsys.readouterr().out
    assert "1523" not in said and "held back until you answer ratio" in said
    ex.reveal("ratio")
    capsys.readouterr()
    ex.outcome(("order", "ratio"), _show)
    assert capsys.readouterr().out == ANSWER_ROWS + "\n"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")     # Widget.widgets: the model by its id
def test_in_a_kernel_the_held_back_line_gives_way_to_the_outcome_in_place(monkeypatch):
    """In a kernel the line is an output widget; the first check (or reveal) runs ``show``
    inside it, once, and never before a prediction."""
    import ipywidgets
    shown, runs = [], []
    monkeypatch.setattr(widgets, "in_kernel", lambda: True)
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append(obj))
    ex = _ex()
    ex.outcome("order", lambda: runs.append("shown"))
    (bundle,) = shown
    assert "application/vnd.jupyter.widget-view+json" in bundle and "1523" not in str(bundle)
    assert "held back" in bundle["text/plain"]
    out = ipywidgets.Widget.widgets[bundle["application/vnd.jupyter.widget-view+json"]["model_id"]]
    assert isinstance(out, ipywidgets.Output) and "kitlib-outcome-order" in out._dom_classes
    assert "held back" in out.outputs[0]["data"]["text/html"]
    ex.check("ratio", 1)                    # another question: nothing opens
    assert runs == []
    ex.check("order", "10000")
    assert runs == ["shown"]
    ex.check("order", "10")                 # shown once
    ex.reveal("order")
    assert runs == ["shown"]


def test_reveal_opens_a_held_back_outcome(monkeypatch):
    runs = []
    monkeypatch.setattr(widgets, "in_kernel", lambda: True)
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: None)
    ex = _ex()
    ex.outcome("order", lambda: runs.append("shown"))
    ex.reveal("order")
    assert runs == ["shown"]


def test_an_outcome_of_two_predictions_opens_once_both_are_made(capsys):
    ex = Exercises("t", [Question("a", "Predict a", "yes", "a", kind="predict"),
                         Question("b", "Predict b", "sum", "b", kind="predict")])
    ex.check("a", "yes")
    ex.outcome(("a", "b"), _show)
    said = capsys.readouterr().out
    assert "1523" not in said and "ex.check('b', answer)" in said
    ex.check("b", "busy")
    ex.outcome(("a", "b"), _show)
    assert capsys.readouterr().out == ANSWER_ROWS + "\n"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")     # Widget.widgets: the model by its id
def test_a_lesson_built_again_in_its_kernel_keeps_what_the_learner_did(monkeypatch):
    """A lesson's "Your turn" cell builds ``ex`` again, below its predictions (lessons 02, 03,
    05). In a kernel the questions built again take over the predictions made above, so a
    "beside" cell run again shows the prediction instead of saying it is still open; and from
    then on the two sets keep in step both ways: a check on the new ``ex`` opens the outcome
    held back above and the old ``ex``'s line. Elsewhere (a script, the tests, the answer key)
    each set of questions stays its own, and a question with another answer (a lesson built
    on another capture) shares nothing."""
    from kitlib.course import exercises as E
    monkeypatch.setattr(E, "_BUILT", {})
    monkeypatch.setattr(E, "_LATEST", {})
    monkeypatch.setattr(widgets, "in_kernel", lambda: True)
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: None)
    monkeypatch.setattr(E, "_shares_state", lambda: False)     # a plain process: no sharing
    first = _ex()
    first.check("order", "10")
    assert "still open" in _ex().predicted("order").message
    monkeypatch.setattr(E, "_shares_state", lambda: True)      # a kernel
    first = _ex()
    first.check("order", "10")                                 # predicted in the form above
    again = _ex()                                              # "Your turn" builds ex again
    said = again.predicted("order").message
    assert "still open" not in said and "you predicted 10" in said and again["order"].wrong_tries == 1
    # built again before predicting: the prediction made on the new ex opens what the old one holds back
    E._BUILT.clear(), E._LATEST.clear()                        # another kernel
    runs = []
    above = _ex()
    above.outcome("order", lambda: runs.append("shown"))
    line = above.predicted("order")
    below = _ex()
    assert runs == [] and "still open" in below.predicted("order").message
    below.check("order", "10000")
    assert runs == ["shown"] and above["order"].prediction == "10000" and above["order"].solved_after == 0
    assert "you predicted 10,000" in line.follow().message and "still open" not in line.follow().message
    below.reveal("order")
    assert above["order"].revealed and runs == ["shown"]
    # the same key with another answer is another question: nothing is shared
    other = Exercises("t", [Question("order", "Predict", "100", "x", kind="predict", choices=["10", "100"])])
    assert other["order"].prediction is ... and "still open" in other.predicted("order").message
    # lesson 01 builds its prediction alone, then its questions from the learner's run: one lesson
    # (and what was done outlives an ex that nothing refers to any more)
    E._BUILT.clear(), E._LATEST.clear()
    asked = lambda: [Question("steps_in_trace", "Predict: how many steps?", 3, "x", kind="predict")]  # noqa: E731
    Exercises("Lesson 01 — your prediction", asked()).check("steps_in_trace", 5)
    assert Exercises("Lesson 01 — your turn", asked())["steps_in_trace"].prediction == 5
    assert Exercises("Lesson 02 — your turn", asked())["steps_in_trace"].prediction is ...


def test_the_held_back_line_names_every_question_still_open(capsys):
    """A learner's Run All (issue 40, lesson 13's fix table): the line named only the first
    open prediction ("predict X") while the outcome also waited for other questions; it names
    each one still open, the predictions and the others, and drops those answered."""
    ex = Exercises("t", _ex().questions + [Question("extra", "Compute more", 3.5, "more", kind="compute")])
    ex.outcome(("order", "ratio", "extra"), _show)
    said = capsys.readouterr().out
    assert "1523" not in said and "predict order and answer ratio, extra" in said, said
    ex.check("ratio", 1.0)
    capsys.readouterr()
    ex.outcome(("order", "ratio", "extra"), _show)
    said = capsys.readouterr().out
    assert "predict order and answer extra" in said and "ratio" not in said, said


def test_the_inline_backends_flush_waits_while_an_outcome_is_drawn():
    """ipykernel 7 runs a widget's message on a thread of its own and ``comm`` fires
    ``post_execute`` after it: matplotlib-inline's ``flush_figures`` there closed the figure a
    held-back outcome was drawing on another thread (lesson 12's step budgets never showed on
    a busy machine; found with a trace of ``Gcf.destroy_all``). Once wrapped, the flush waits
    for the drawing, and wrapping twice changes nothing."""
    import threading
    from types import SimpleNamespace
    from IPython.core.events import EventManager, available_events
    from kitlib.course import exercises as exmod
    ran = []

    def flush_figures():
        ran.append(threading.current_thread().name)
    events = EventManager(SimpleNamespace(), available_events)
    events.register("post_execute", flush_figures)
    ip = SimpleNamespace(events=events)
    exmod._flush_waits_for_drawing(ip)
    exmod._flush_waits_for_drawing(ip)
    (cb,) = events.callbacks["post_execute"]
    assert cb is not flush_figures and cb.__name__ == "flush_figures"
    with exmod._DRAWING:                    # an outcome being drawn
        other = threading.Thread(target=events.trigger, args=("post_execute",), name="subshell")
        other.start()
        other.join(0.5)
        assert other.is_alive() and ran == []       # the flush waits
    other.join(5)
    assert ran == ["subshell"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")     # Widget.widgets: the model by its id
def test_a_held_verdict_waiting_on_several_questions_opens_once_all_are_tried(monkeypatch):
    """``Verdict.later`` with several keys (lesson 13's fix questions wait for every case's
    cause): the output widget carries a class per key, runs ``show`` neither after the first
    of them is tried nor after an untried check, but once, in place, when the last is; outside
    a kernel the verdict is its text alone."""
    import ipywidgets
    from kitlib.course.exercises import Verdict
    ex = Exercises("t", _ex().questions + [Question("extra", "Compute more", 3.5, "more", kind="compute")])
    runs = []
    keys = ("ratio", "extra")
    later = (keys, lambda: all(ex[k].attempted() for k in keys), lambda: runs.append("form"))
    held = Verdict("order", None, "held back until ratio, extra are tried", exercises=ex, later=later)
    assert set(held._repr_mimebundle_()) == {"text/plain", "text/markdown"}       # no kernel: the text
    monkeypatch.setattr(widgets, "in_kernel", lambda: True)
    bundle = Verdict("order", None, "held back until ratio, extra are tried", exercises=ex,
                     later=later)._repr_mimebundle_()
    out = ipywidgets.Widget.widgets[bundle["application/vnd.jupyter.widget-view+json"]["model_id"]]
    assert {f"{widgets.HELD_FORM_CLASS}-{k}" for k in keys} <= set(out._dom_classes)
    assert "held back until ratio, extra" in out.outputs[0]["data"]["text/html"]
    ex.check("ratio", 1.0)                  # one of two tried
    ex.check("extra", "not a number")       # not a try
    assert runs == []
    ex.reveal("extra")                      # the last: shown, once
    ex.check("ratio", 2.0)
    assert runs == ["form"]
