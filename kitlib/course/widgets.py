"""Answer forms: each "your turn" question as a small ipywidgets form (answer box, Check,
Reveal, verdict), judged by the same code as ``ex.check`` (:meth:`kitlib.course.exercises.Question.judge`).

In a kernel a :class:`~kitlib.course.exercises.Verdict` displays as its form *and* its text;
front ends without widgets (nbclient, exports) show the text. :func:`presentation` scales the
text of forms, tables and pictures for a projector."""
from __future__ import annotations

import html
import re

import ipywidgets as widgets

from ..settings import is_set
from ..settings import value as setting

__all__ = ["AnswerForm", "answer_form_bundle", "in_kernel", "prediction_bundle", "presentation", "readable",
           "ReadableTable", "held_bundle", "show_outcome_later", "verdict_html"]

#: CSS class names the forms carry (the browser test finds the forms by them).
FORM_CLASS = "kitlib-answer-form"
VERDICT_CLASS = "kitlib-verdict"
PENDING_CLASS = "kitlib-pending"
PREDICTED_CLASS = "kitlib-predicted"
OUTCOME_CLASS = "kitlib-outcome"
#: A question held back until another is answered (lesson 13's evidence, until its cause is named right or revealed).
HELD_FORM_CLASS = "kitlib-held-form"

_COLOURS = {True: "#1b7f3b", False: "#b3261e", None: "#555555"}
_MARKS = {True: "✅", False: "❌", None: "✏️"}


def in_kernel() -> bool:
    """Whether this runs in a Jupyter kernel (not a script or terminal IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def verdict_html(verdict) -> str:
    """A verdict as a line of HTML: ✅/❌/✏️, the key in bold, the message (escaped)."""
    colour = _COLOURS[verdict.correct]
    return (f'<div class="{VERDICT_CLASS}" data-correct="{str(verdict.correct).lower()}" '
            f'style="color:{colour}; white-space:normal; line-height:1.4">{_MARKS[verdict.correct]} '
            f"<b>{html.escape(verdict.key)}</b> — {html.escape(verdict.message)}</div>")


def _is_yes_no(question) -> bool:
    return isinstance(question.answer, bool)


class AnswerForm(widgets.VBox):
    """One question as a form: prompt, answer box (filled with ``given``), Check and Reveal
    buttons, ``verdict``; ``verdicts`` lists every verdict shown, oldest first."""

    def __init__(self, question, exercises, given=None, verdict=None):
        self.question, self.exercises = question, exercises
        self.verdicts = []
        prompt = widgets.HTML(f"<b>{html.escape(question.key)}</b>: {html.escape(question.prompt)}",
                              layout=widgets.Layout(width="auto"))
        start = None if given is None or given is ... else given
        if question.choices:
            options = [str(c) for c in question.choices]
            value = str(start) if start is not None and str(start) in options else None
            # as wide as its longest choice (0.55 em a character), at most the form's width
            longest = max((len(o) for o in options), default=0)
            self.answer_box = widgets.Dropdown(options=options, value=value, description="answer",
                                               layout=widgets.Layout(width=f"{8 + 0.55 * longest:.1f}em",
                                                                     min_width="22em", max_width="calc(100% - 4px)"))
        elif _is_yes_no(question):
            value = {True: "yes", False: "no"}.get(start if isinstance(start, bool) else None)
            self.answer_box = widgets.ToggleButtons(options=["yes", "no"], value=value, description="answer")
        else:
            self.answer_box = widgets.Text(value="" if start is None else str(start), description="answer",
                                           placeholder="type your answer", continuous_update=True,
                                           layout=widgets.Layout(width="22em"))
        self.check_button = widgets.Button(description="Check", button_style="primary", icon="check")
        self.reveal_button = widgets.Button(description="Reveal", icon="eye")
        # continuous_update: sent on blur, a click could arrive before the value (tests/lessons/test_browser.py)
        self.answer_box.observe(lambda change: self._edited(change["new"]), names="value")
        self.check_button.on_click(lambda _: self.check())
        self.reveal_button.on_click(lambda _: self.reveal())
        self.feedback = widgets.HTML(layout=widgets.Layout(width="auto"))
        if verdict is not None:
            self._show(verdict)
        buttons = widgets.HBox([self.answer_box, self.check_button, self.reveal_button],
                               layout=widgets.Layout(flex_flow="row wrap"))   # a wide drop-down: buttons below
        extra = [widgets.HTML(choice_fit_css(question.key, longest), layout=widgets.Layout(display="none"))] \
            if question.choices else []
        # widths auto: 100% plus 2 px margins scrolled sideways (tests/lessons/test_browser.py)
        super().__init__([prompt, buttons, self.feedback] + extra,
                         layout=widgets.Layout(border="1px solid #ddd", padding="6px", margin="4px 0", width="auto"))
        self.add_class(FORM_CLASS)
        self.add_class(f"{FORM_CLASS}-{question.key}")

    def value(self):
        """The answer in the box: None when empty, True/False for yes/no, else the text."""
        v = self.answer_box.value
        if v is None or (isinstance(v, str) and not v.strip()):
            return None
        if _is_yes_no(self.question) and not self.question.choices:
            return v == "yes"
        return v

    def check(self):
        """Judge the answer in the box (as ``ex.check``) and show the verdict."""
        return self._show(self.exercises.check(self.question.key, self.value()))

    def reveal(self):
        """Show the answer and why (as ``ex.reveal``)."""
        return self._show(self.exercises.reveal(self.question.key))

    def _edited(self, value):
        """The answer changed: say it has not been checked yet."""
        shown = "" if value is None else str(value)
        self.feedback.value = (f'<div class="{PENDING_CLASS}" data-given="{html.escape(shown, quote=True)}" '
                               f'style="color:{_COLOURS[None]}">{_MARKS[None]} <b>{html.escape(self.question.key)}'
                               f"</b> — {html.escape(shown) or 'no answer'}: not checked yet</div>")

    def _show(self, verdict):
        self.verdicts.append(verdict)
        self.feedback.value = verdict_html(verdict)
        return verdict


#: Ends a verdict's text where its form cannot be drawn.
FORM_GONE_HINT = "The answer form of this question needs the lesson's kernel: re-run the cell to get the form back."


#: The hint under JupyterLab's "Error displaying widget: model not found" (kernel stopped).
WIDGET_GONE_CSS = ("<style>.jp-OutputArea-output.jupyter-widgets:not(:has(*))::after {content: "
                   "\"This needs the lesson's kernel: re-run the cell to get it back.\"; "
                   "display: block; color: #555555;}</style>")
#: The execution count of the last cell given :data:`WIDGET_GONE_CSS`.
_GONE_STYLED = {"cell": None}


def _style_for_lost_widgets():
    """Show :data:`WIDGET_GONE_CSS` once in the running cell (empty ``text/plain``)."""
    from IPython import get_ipython
    from IPython.display import display
    ip = get_ipython()
    if ip is None:        # not IPython (a test that plays the kernel): display would print
        return
    if _GONE_STYLED["cell"] != ip.execution_count:
        display({"text/html": WIDGET_GONE_CSS, "text/plain": ""}, raw=True)
        _GONE_STYLED["cell"] = ip.execution_count


def _widget_bundle(make, text_bundle: dict):
    """``(bundle, widget)``: the widget ``make()`` builds with ``text_bundle`` beside it, in a
    kernel; ``(text_bundle, None)`` elsewhere or where ipywidgets cannot build it."""
    if not in_kernel():
        return text_bundle, None
    try:
        widget = make()
        bundle = dict(widget._repr_mimebundle_() or {})
    except Exception:     # no comm to a front end, an ipywidgets that cannot build it: the text
        return text_bundle, None
    bundle.update(text_bundle)
    return bundle, widget


def answer_form_bundle(verdict, text_bundle: dict) -> dict:
    """A verdict's MIME bundle: its answer form beside ``text_bundle`` in a kernel (the text then
    ending with :data:`FORM_GONE_HINT`, and :data:`WIDGET_GONE_CSS` shown), else ``text_bundle``."""
    bundle, form = _widget_bundle(
        lambda: AnswerForm(verdict.question, verdict.exercises, given=verdict.given, verdict=verdict), text_bundle)
    if form is None:
        return text_bundle
    try:
        _style_for_lost_widgets()
    except Exception:     # not an IPython kernel after all: the hint in the text stays
        pass
    if "text/plain" in bundle:
        bundle["text/plain"] = f"{bundle['text/plain']}\n({FORM_GONE_HINT})"
    if "text/markdown" in bundle:
        bundle["text/markdown"] = f"{bundle['text/markdown']}\n\n*{FORM_GONE_HINT}*"
    return bundle


def prediction_bundle(verdict, text_bundle: dict) -> dict:
    """The MIME bundle of a ``predicted`` verdict: in a kernel a line redrawn with
    ``verdict.follow()`` at every later check of the question, beside ``text_bundle``; else ``text_bundle``."""
    def make():
        line = widgets.HTML(verdict_html(verdict), layout=widgets.Layout(width="100%", margin="2px 0"))
        line.add_class(PREDICTED_CLASS)
        line.add_class(f"{PREDICTED_CLASS}-{verdict.key}")
        return line
    bundle, line = _widget_bundle(make, text_bundle)
    if line is not None:
        verdict.exercises.followers.setdefault(verdict.key, []).append(
            lambda: setattr(line, "value", verdict_html(verdict.follow())))
    return bundle


def show_outcome_later(line, keys, is_open, show):
    """Display an ``outcome`` line as :func:`held_bundle` in a kernel; elsewhere print it."""
    from IPython.display import display
    if not in_kernel():
        print(line)
        return
    display(held_bundle(line, keys, is_open, show), raw=True)


def held_bundle(line, keys, is_open, show, css: str = OUTCOME_CLASS) -> dict:
    """The MIME bundle of a line that gives way to ``show()`` in place: in a kernel, an output
    widget (classes ``css`` and ``css-KEY`` per key) that the first check or reveal of one of
    ``keys`` finding ``is_open()`` clears to run ``show()``; else the line's text."""
    text = {"text/plain": str(line), "text/markdown": line._repr_markdown_()}

    def make():
        out = widgets.Output(layout=widgets.Layout(width="100%", margin="2px 0"))
        out.add_class(css)
        for key in keys:
            out.add_class(f"{css}-{key}")
        out.outputs = ({"output_type": "display_data", "metadata": {},
                        "data": {"text/html": verdict_html(line), "text/plain": str(line)}},)
        return out
    bundle, out = _widget_bundle(make, text)
    if out is None:
        return text
    shown = []

    def follow():
        if shown or not is_open():
            return
        shown.append(True)
        out.clear_output()
        with out:
            show()
    for key in keys:
        line.exercises.followers.setdefault(key, []).append(follow)
    return bundle


#: The scale in force (:func:`presentation`); ``shown``: a notebook has been given its style.
PRESENTATION = {"scale": 1.0, "shown": False}
#: The environment variable an instructor sets before starting Jupyter.
SCALE_ENV = "KITLIB_PLOT_SCALE"


def presentation_css(scale: float) -> str:
    """The ``<style>`` scaling by ``scale`` the text of tables, answer forms and explorers in
    JupyterLab (from JupyterLab's own sizes, so nested tables are not scaled twice)."""
    s = f"{float(scale):g}"
    return ("<style>"
            f".jp-RenderedHTMLCommon table {{font-size: calc(var(--jp-ui-font-size1) * {s});}} "
            f".{FORM_CLASS}, .kitlib-explorer {{font-size: calc(var(--jp-content-font-size1) * {s}); "
            f"--jp-widgets-font-size: calc(var(--jp-ui-font-size1) * {s}); "
            f"--jp-widgets-inline-height: calc(28px * {s});}}"
            "</style>")


#: A drop-down's room for text at 1280 x 800 with the file browser open (px; tests/support/browser.py
#: measured 696), and the average UI character width (em, a little over).
CHOICE_ROOM_PX, CHOICE_EM_PER_CHAR = 690, 0.55


def choice_fit_css(key: str, longest: int) -> str:
    """The ``<style>`` capping question ``key``'s drop-down text at the size where its longest
    choice (``longest`` characters) fits :data:`CHOICE_ROOM_PX`."""
    fit = CHOICE_ROOM_PX / (max(longest, 1) * CHOICE_EM_PER_CHAR)
    return (f"<style>.{FORM_CLASS}.{FORM_CLASS}-{key} .widget-dropdown > select "
            f"{{font-size: min(var(--jp-widgets-font-size), {fit:.1f}px);}}</style>")


def presentation(scale: float | None = None) -> float:
    """One setting for a projector (1 on a laptop, 1.4–2 on a projector; default
    ``$KITLIB_PLOT_SCALE``, else 1): :func:`kitlib.plots.set_scale` and, in a notebook,
    :func:`presentation_css`. Returns the scale in force.

    Raises KitError: ``scale`` is not a positive number."""
    from ..plots import set_scale
    value = set_scale(scale if scale is not None else (setting(SCALE_ENV) or 1.0))
    PRESENTATION["scale"] = value
    if in_kernel() and (value != 1.0 or PRESENTATION["shown"]):
        from IPython.display import HTML, display
        display(HTML(presentation_css(value)))
        PRESENTATION["shown"] = True
    return value


def presentation_from_environment() -> float | None:
    """``$KITLIB_PLOT_SCALE`` applied by :func:`presentation` in a kernel (at import); None
    when unset or not a kernel."""
    if not is_set(SCALE_ENV) or not in_kernel():
        return None
    return presentation()


def readable(table, max_width_em: float = 28, na_rep: str = "NaN"):
    """A table shown whole at a notebook's width (a :class:`ReadableTable`; ``.data`` is ``table``).

    Numbers never wrap; text and headers wrap at spaces and, in long names, at
    :func:`_breakable`'s points, never mid-word (issue 40); a text column is at least as wide as
    its longest unbreakable piece, up to ``max_width_em``; a plain 0, 1, 2… index is hidden;
    ``na_rep`` is what a missing number, or a gap in a column of text, shows."""
    import math
    import pandas as pd
    # break-word, not anywhere: Chromium broke words mid-way with it (issue 40)
    cell = [("white-space", "normal"), ("overflow-wrap", "break-word"), ("word-break", "normal"),
            ("max-width", f"{max_width_em}em"),
            ("text-align", "left"), ("vertical-align", "top"), ("padding", "0.4em 0.35em")]

    def number(v):     # as the DataFrame prints it: no padding zeros (0.5, not 0.500000)
        if isinstance(v, float) and math.isfinite(v):
            return f"{v:.6f}".rstrip("0").rstrip(".")
        return v
    def header(v):     # a long column name may break after an underscore (launch_at_ | us), not inside a word
        return html.escape(str(v)).replace("_", "_<wbr>")
    import numbers as _numbers
    kinds = {c: str(table[c].dtype).lower() for c in table.columns}
    floats = [c for c in table.columns if kinds[c].startswith("float")]

    def all_numbers(col):    # an object column holding only numbers (and gaps) is a column of numbers
        values = [v for v in col if not (v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)))]
        return bool(values) and all(isinstance(v, _numbers.Number) for v in values)
    numbers = [c for j, c in enumerate(table.columns) if kinds[c].startswith(("float", "int", "uint", "bool"))
               or (kinds[c] == "object" and all_numbers(table.iloc[:, j]))]
    text = [c for c in table.columns if c not in floats]
    head = [p for p in cell if p[0] != "overflow-wrap"] + [("overflow-wrap", "normal")]
    def shown(v):      # text escaped ("<NA>", "a<b" as written); a number in a text column as pandas prints it
        return _breakable(html.escape(str(number(v)), quote=False))
    columns = []       # per column (by position: td.colN outranks the table's td rule)
    for j, c in enumerate(table.columns):
        if c in numbers:
            props = [("white-space", "nowrap"), ("overflow-wrap", "normal")]
        else:
            longest = max((len(str(number(v))) for v in table.iloc[:, j]), default=0)
            piece = max((_longest_piece(number(v)) for v in table.iloc[:, j]), default=0)
            props = [("min-width", f"{max(min(longest * 0.55, 6, max_width_em), min(piece * 0.6, max_width_em)):.1f}em")]
        columns.append({"selector": f"td.col{j}", "props": props})
        # at least as wide as the header's longest word (issue 40)
        word = max((len(w) for w in re.split(r"[_\s]+", str(c))), default=0)
        if word * 0.6 > max_width_em:
            columns.append({"selector": f"th.col{j}", "props": [("min-width", f"{word * 0.6:.1f}em")]})
    def row_header(v):  # a long call site breaks like text (issue 40)
        return _breakable(html.escape(v, quote=False)) if isinstance(v, str) else header(v)
    plain = isinstance(table.index, pd.RangeIndex) and table.index.name is None
    if not plain:   # at least its longest unbreakable piece wide
        piece = max((_longest_piece(v) for v in table.index), default=0)
        columns.append({"selector": "th.row_heading",
                        "props": [("min-width", f"{min(piece * 0.6, max_width_em):.1f}em"),
                                  ("overflow-wrap", "break-word")]})
    missing = html.escape(na_rep, quote=False)
    if " " in na_rep:         # a number column does not wrap; its "not recorded" may
        missing = f'<span style="white-space: normal">{missing}</span>'
    words = [c for c in text if kinds[c] in ("object", "string", "str")]     # a gap there is a missing text
    styler = (table.style.format(number, subset=floats, na_rep=missing).format(shown, subset=text)
              .format(shown, subset=words, na_rep=missing)
              .format_index(header, axis=1).format_index(row_header, axis=0)
              .set_table_styles([{"selector": "td", "props": cell}, {"selector": "th", "props": head}] + columns))
    if plain:
        styler = styler.hide(axis="index")       # 0, 1, 2, … says nothing a learner needs: its width goes to the data
    return ReadableTable(styler)


#: Where a long name may break: after ``_``, ``::``, ``/``, ``.``, ``,``; before ``(``, ``<``.
_BREAK_AFTER = re.compile(r"(::|[_/.,](?=\w))")
_BREAK_BEFORE = re.compile(r"(?<=\w)(\(|&lt;)")


def _longest_piece(value, longer_than: int = 16) -> int:
    """Characters of the longest piece of ``str(value)`` that :func:`readable` does not break."""
    pieces = []
    for w in str(value).split():
        pieces += ([w] if len(w) <= longer_than else
                   _BREAK_BEFORE.sub(r"\n\1", _BREAK_AFTER.sub(r"\1\n", w)).split("\n"))
    return max(map(len, pieces), default=0)


def _breakable(text: str, longer_than: int = 16) -> str:
    """``text`` (escaped) with ``<wbr>`` at the break points of each word longer than ``longer_than``."""
    def word(w):
        if len(w) <= longer_than:
            return w
        return _BREAK_BEFORE.sub(r"<wbr>\1", _BREAK_AFTER.sub(r"\1<wbr>", w))
    return " ".join(word(w) for w in text.split(" "))


class ReadableTable:
    """What :func:`readable` returns: a Styler as HTML in notebooks, the DataFrame's text elsewhere."""

    def __init__(self, styler):
        self.styler, self.data = styler, styler.data

    def _repr_html_(self):
        from .labels import note_html
        return self.styler.to_html() + note_html()      # which recordings, as under any table

    def to_html(self) -> str:
        """The HTML a notebook shows."""
        return self.styler.to_html()

    def __repr__(self):
        return repr(self.data)

    __str__ = __repr__
