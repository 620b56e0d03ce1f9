"""A saved lesson reopened after its kernel stopped (issue 27, "small things").

An answer form is an ipywidgets view: once the kernel that drew it has stopped, the saved
output cannot draw it again. JupyterLab's own widget renderer then says "Error displaying
widget: model not found" (that text is JupyterLab's, and it does not fall back to the
output's text), and a style saved beside each form adds the hint under it (issue 40; seen
in a browser by tests/lessons/test_browser.py); every view that shows the text instead (a notebook
that is not trusted, a static export, a front end without widgets) reads the verdict and
how to get the form back: re-run the cell.
"""
from __future__ import annotations

from kitlib.course import widgets
from kitlib.course.exercises import l11

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def test_a_verdict_with_its_form_says_how_to_get_the_form_back(monkeypatch):
    monkeypatch.setattr(widgets, "in_kernel", lambda: True)
    v = l11.questions().check("conv_bound", "ncu")
    bundle = v._repr_mimebundle_()
    assert WIDGET_VIEW in bundle
    assert bundle["text/plain"] == f"{v}\n({widgets.FORM_GONE_HINT})"
    assert bundle["text/markdown"] == f"{v._repr_markdown_()}\n\n*{widgets.FORM_GONE_HINT}*"
    assert "re-run the cell to get the form back" in widgets.FORM_GONE_HINT


def test_outside_a_kernel_the_verdict_is_its_text_alone(monkeypatch):
    monkeypatch.setattr(widgets, "in_kernel", lambda: False)
    v = l11.questions().check("conv_bound", "ncu")
    assert v._repr_mimebundle_() == {"text/plain": str(v), "text/markdown": v._repr_markdown_()}


def test_the_saved_output_of_a_check_cell_holds_the_hint(tmp_path):
    """What a saved lesson holds after its kernel stopped: the form's view and the text
    with the hint, in one output (run in a real kernel by nbclient, as the lessons are)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from kitlib.course.exercises import l11\nex = l11.questions()\nex.check('conv_bound', 'ncu')")])
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    (out,) = [o for o in nb.cells[0].outputs if WIDGET_VIEW in o.get("data", {})]
    assert out["data"]["text/plain"].endswith(f"({widgets.FORM_GONE_HINT})")
    assert "re-run the cell to get the form back" in out["data"]["text/markdown"]
    # and, before the form, the style that adds the hint to JupyterLab's "model not found"
    # (tests/lessons/test_browser.py reopens such a notebook), with no text for other front ends
    (style,) = [o for o in nb.cells[0].outputs if "text/html" in o.get("data", {})]
    assert style["data"] == {"text/html": widgets.WIDGET_GONE_CSS, "text/plain": ""}
    assert nb.cells[0].outputs.index(style) < nb.cells[0].outputs.index(out)
