"""Answer forms: each "your turn" question as a small ipywidgets form.

A form shows the question, a box for the answer (a text box for numbers and words,
buttons for yes/no, a drop-down where the question offers choices), a **Check** and a
**Reveal** button, and the verdict below them. Checking goes through the very code
that ``ex.check(key, answer)`` runs (:meth:`kitlib.course.exercises.Question.judge`),
so a form and a script give the same hints, count the same tries and show the
answer at the same moment.

Where forms appear: a lesson's ``ex.check(key, answer)`` cell returns a
:class:`~kitlib.course.exercises.Verdict`; displayed in a Jupyter kernel, the verdict
carries the form (MIME type ``application/vnd.jupyter.widget-view+json``) *and* its
text (``text/plain``, ``text/markdown``). JupyterLab, which has the widget front end,
draws the form; a front end without one (``nbclient`` in the tests, a static export,
a terminal) shows the text, as before. Outside a kernel nothing here is imported.

The presentation setting (:func:`presentation`) raises the text of the forms, the
tables and the pictures together, for a projector.
"""
from __future__ import annotations

import html
import re

import ipywidgets as widgets

from ..settings import is_set
from ..settings import value as setting

__all__ = ["AnswerForm", "answer_form_bundle", "in_kernel", "prediction_bundle", "presentation", "readable",
           "ReadableTable", "show_outcome_later", "verdict_html"]

#: CSS class names the forms carry (the browser test finds the forms by them).
FORM_CLASS = "kitlib-answer-form"
VERDICT_CLASS = "kitlib-verdict"
PENDING_CLASS = "kitlib-pending"
PREDICTED_CLASS = "kitlib-predicted"
OUTCOME_CLASS = "kitlib-outcome"

_COLOURS = {True: "#1b7f3b", False: "#b3261e", None: "#555555"}
_MARKS = {True: "✅", False: "❌", None: "✏️"}


def in_kernel() -> bool:
    """Whether this code runs in a Jupyter kernel (where a widget front end may be listening).

    False in scripts, in a plain Python prompt and in terminal IPython, where a form
    could never be drawn.
    """
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
    """One question as a form: prompt, answer box, Check and Reveal buttons, verdict.

    Parameters
    ----------
    question : kitlib.course.exercises.Question
        Judged with its own :meth:`~kitlib.course.exercises.Question.judge`, so wrong tries
        are counted on the question, as in ``ex.check``.
    exercises : kitlib.course.exercises.Exercises
        The lesson's exercises, for :meth:`~kitlib.course.exercises.Exercises.reveal`.
    given : optional
        An answer already given in the cell (``ex.check(key, 42)``), shown in the box.
    verdict : Verdict, optional
        The verdict on ``given``, shown below the buttons.

    Attributes
    ----------
    answer_box : ipywidgets.Text, Dropdown or ToggleButtons
    check_button, reveal_button : ipywidgets.Button
    feedback : ipywidgets.HTML
        The latest verdict (:func:`verdict_html`).
    verdicts : list of Verdict
        Every verdict this form showed, oldest first.
    """

    def __init__(self, question, exercises, given=None, verdict=None):
        self.question, self.exercises = question, exercises
        self.verdicts = []
        prompt = widgets.HTML(f"<b>{html.escape(question.key)}</b>: {html.escape(question.prompt)}",
                              layout=widgets.Layout(width="auto"))
        start = None if given is None or given is ... else given
        if question.choices:
            options = [str(c) for c in question.choices]
            value = str(start) if start is not None and str(start) in options else None
            # as wide as its longest choice (about 0.55 em a character, beside the 'answer'
            # label and the arrow), so a chosen option shows whole; at most the form's width
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
        # every keystroke reaches the kernel as it is typed (continuous_update), and an edit
        # replaces the old verdict with "not checked yet": Check then judges what the box
        # shows, never an earlier answer whose verdict is still on screen. With the value
        # sent only on blur, the browser could deliver Check's click before the new value
        # (seen in tests/lessons/test_browser.py: '3' in the box, judged as the earlier '8').
        self.answer_box.observe(lambda change: self._edited(change["new"]), names="value")
        self.check_button.on_click(lambda _: self.check())
        self.reveal_button.on_click(lambda _: self.reveal())
        self.feedback = widgets.HTML(layout=widgets.Layout(width="auto"))
        if verdict is not None:
            self._show(verdict)
        buttons = widgets.HBox([self.answer_box, self.check_button, self.reveal_button],
                               layout=widgets.Layout(flex_flow="row wrap"))   # a wide drop-down: buttons below
        extra = []
        if question.choices:
            # at a projector's scale (presentation) a long choice no longer fits the drop-down at
            # its widest (the cell's width): its text grows only as far as the longest choice fits
            extra = [widgets.HTML(choice_fit_css(question.key, longest), layout=widgets.Layout(display="none"))]
        # widths auto, not 100%: 100% plus a widget's 2 px margins made the prompt 4 px wider
        # than the form, which then scrolled sideways (tests/lessons/test_browser.py); the drop-down
        # at most its row less those margins
        super().__init__([prompt, buttons, self.feedback] + extra,
                         layout=widgets.Layout(border="1px solid #ddd", padding="6px", margin="4px 0", width="auto"))
        self.add_class(FORM_CLASS)
        self.add_class(f"{FORM_CLASS}-{question.key}")

    def value(self):
        """The answer in the box: None when empty, ``True``/``False`` for yes/no, else the text."""
        v = self.answer_box.value
        if v is None or (isinstance(v, str) and not v.strip()):
            return None
        if _is_yes_no(self.question) and not self.question.choices:
            return v == "yes"
        return v

    def check(self):
        """Judge the answer in the box (as ``ex.check`` would) and show the verdict."""
        return self._show(self.exercises.check(self.question.key, self.value()))

    def reveal(self):
        """Show the answer and why (as ``ex.reveal``)."""
        return self._show(self.exercises.reveal(self.question.key))

    def _edited(self, value):
        """The answer in the box changed: say it has not been checked yet."""
        shown = "" if value is None else str(value)
        self.feedback.value = (f'<div class="{PENDING_CLASS}" data-given="{html.escape(shown, quote=True)}" '
                               f'style="color:{_COLOURS[None]}">{_MARKS[None]} <b>{html.escape(self.question.key)}'
                               f"</b> — {html.escape(shown) or 'no answer'}: not checked yet</div>")

    def _show(self, verdict):
        self.verdicts.append(verdict)
        self.feedback.value = verdict_html(verdict)
        return verdict


#: Added to a verdict's text when it carries an answer form: what a reader sees where the
#: form cannot be drawn (a saved lesson reopened after its kernel stopped, in a view that
#: shows the text; a static export) says how to get the form back.
FORM_GONE_HINT = "The answer form of this question needs the lesson's kernel: re-run the cell to get the form back."


#: What JupyterLab shows under a form or explorer whose widget is gone. Its widget renderer
#: (jupyterlab_widgets 3) picks the widget view of an output over its text whenever the
#: notebook is trusted (a learner's own saved lesson is), and once the kernel that held the
#: widget has stopped it writes "Error displaying widget: model not found" into the output
#: and marks it ``jupyter-widgets``, with no element inside (a drawn widget has one): this
#: rule adds the hint after that text. A ``<style>`` in a saved HTML output applies to the
#: whole page, so :func:`answer_form_bundle` shows it (invisible) in each cell with a form.
WIDGET_GONE_CSS = ("<style>.jp-OutputArea-output.jupyter-widgets:not(:has(*))::after {content: "
                   "\"This needs the lesson's kernel: re-run the cell to get it back.\"; "
                   "display: block; color: #555555;}</style>")
#: The execution count of the last cell given :data:`WIDGET_GONE_CSS`.
_GONE_STYLED = {"cell": None}


def _style_for_lost_widgets():
    """Show :data:`WIDGET_GONE_CSS` once in the cell now running (no text: ``text/plain`` is
    empty, so a front end without HTML shows nothing)."""
    from IPython import get_ipython
    from IPython.display import display
    ip = get_ipython()
    if ip is None:        # not IPython (a test that plays the kernel): display would print
        return
    if _GONE_STYLED["cell"] != ip.execution_count:
        display({"text/html": WIDGET_GONE_CSS, "text/plain": ""}, raw=True)
        _GONE_STYLED["cell"] = ip.execution_count


def answer_form_bundle(verdict, text_bundle: dict) -> dict:
    """The MIME bundle of a verdict: its answer form beside ``text_bundle`` in a kernel,
    ``text_bundle`` alone elsewhere (or where ipywidgets cannot build the form).

    Front ends choose: JupyterLab draws the form (``application/vnd.jupyter.widget-view+json``),
    one without the widget front end (or an untrusted notebook) falls back to the text, which
    then ends with :data:`FORM_GONE_HINT`. JupyterLab itself, on a trusted notebook whose
    kernel has stopped, shows "Error displaying widget: model not found" instead of the text
    (its widget renderer does not fall back): the style shown beside the form
    (:data:`WIDGET_GONE_CSS`) adds the hint under that line.
    """
    if not in_kernel():
        return text_bundle
    try:
        form = AnswerForm(verdict.question, verdict.exercises, given=verdict.given, verdict=verdict)
        bundle = dict(form._repr_mimebundle_() or {})
    except Exception:     # no comm to a front end, an ipywidgets that cannot build it: the text
        return text_bundle
    try:
        _style_for_lost_widgets()
    except Exception:     # not an IPython kernel after all: the hint in the text stays
        pass
    bundle.update(text_bundle)
    if "text/plain" in bundle:
        bundle["text/plain"] = f"{bundle['text/plain']}\n({FORM_GONE_HINT})"
    if "text/markdown" in bundle:
        bundle["text/markdown"] = f"{bundle['text/markdown']}\n\n*{FORM_GONE_HINT}*"
    return bundle


def prediction_bundle(verdict, text_bundle: dict) -> dict:
    """The MIME bundle of :meth:`~kitlib.course.exercises.Exercises.predicted`'s verdict: in a
    kernel, a line (ipywidgets HTML) that every later check of the question redraws with
    ``verdict.follow()``, so the comparison appears there as soon as the learner predicts
    in the form above, beside ``text_bundle``; ``text_bundle`` alone elsewhere.
    """
    if not in_kernel():
        return text_bundle
    try:
        # no side margin: the widgets' default 2 px each side would take it past the cell's width
        line = widgets.HTML(verdict_html(verdict), layout=widgets.Layout(width="100%", margin="2px 0"))
        line.add_class(PREDICTED_CLASS)
        line.add_class(f"{PREDICTED_CLASS}-{verdict.key}")
        bundle = dict(line._repr_mimebundle_() or {})
    except Exception:     # no comm to a front end, an ipywidgets that cannot build it: the text
        return text_bundle
    verdict.exercises.followers.setdefault(verdict.key, []).append(
        lambda: setattr(line, "value", verdict_html(verdict.follow())))
    bundle.update(text_bundle)
    return bundle


def show_outcome_later(line, keys, is_open, show):
    """Display the line of :meth:`~kitlib.course.exercises.Exercises.outcome` whose
    prediction is still open, and have ``show()`` replace it once ``is_open()``.

    In a kernel the line sits in an output widget (classes :data:`OUTCOME_CLASS` and
    ``kitlib-outcome-KEY`` for each of ``keys``) that every later check or reveal of those
    questions looks at
    (``exercises.followers``, as :func:`prediction_bundle`'s lines): the first that finds
    it open clears it and runs ``show()`` inside it, so what ``show`` prints, displays or
    draws appears there. Elsewhere (or where ipywidgets cannot build the widget) the line
    is printed, and nothing follows.
    """
    from IPython.display import display
    text = {"text/plain": str(line), "text/markdown": line._repr_markdown_()}
    if not in_kernel():
        print(line)
        return
    try:
        # no side margin (as the lines of prediction_bundle): 2 px each side took it past the cell
        out = widgets.Output(layout=widgets.Layout(width="100%", margin="2px 0"))
        out.add_class(OUTCOME_CLASS)
        for key in keys:
            out.add_class(f"{OUTCOME_CLASS}-{key}")
        out.outputs = ({"output_type": "display_data", "metadata": {},
                        "data": {"text/html": verdict_html(line), "text/plain": str(line)}},)
        bundle = dict(out._repr_mimebundle_() or {})
    except Exception:     # no comm to a front end, an ipywidgets that cannot build it: the text
        display(text, raw=True)
        return
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
    bundle.update(text)
    display(bundle, raw=True)


#: The presentation setting now in force (see :func:`presentation`); ``shown``: whether a
#: notebook has been given its style (so that going back to 1 gives it the style of 1).
PRESENTATION = {"scale": 1.0, "shown": False}
#: The environment variable an instructor sets before starting Jupyter.
SCALE_ENV = "KITLIB_PLOT_SCALE"


def presentation_css(scale: float) -> str:
    """The ``<style>`` that scales, in JupyterLab, the text of tables and of the kit's
    answer forms and explorers (their controls included) by ``scale``.

    Sizes are JupyterLab's own (``--jp-ui-font-size1`` for tables and widgets,
    ``--jp-content-font-size1`` for text) times ``scale``, never relative to the parent,
    so a table inside an explorer is not scaled twice.
    """
    s = f"{float(scale):g}"
    return ("<style>"
            f".jp-RenderedHTMLCommon table {{font-size: calc(var(--jp-ui-font-size1) * {s});}} "
            f".{FORM_CLASS}, .kitlib-explorer {{font-size: calc(var(--jp-content-font-size1) * {s}); "
            f"--jp-widgets-font-size: calc(var(--jp-ui-font-size1) * {s}); "
            f"--jp-widgets-inline-height: calc(28px * {s});}}"
            "</style>")


#: Room for a choice's text in a drop-down as wide as an answer form can be in JupyterLab at
#: 1280 x 800 with the file browser open (px; tests/support/browser.py measured 696) and the average
#: width of a character of JupyterLab's UI font, in em (a little over, to be safe).
CHOICE_ROOM_PX, CHOICE_EM_PER_CHAR = 690, 0.55


def choice_fit_css(key: str, longest: int) -> str:
    """The ``<style>`` that keeps question ``key``'s drop-down text no larger than the size at
    which its longest choice (``longest`` characters) fits :data:`CHOICE_ROOM_PX`: on a
    laptop (13 px) every choice of the kit fits and nothing changes; at a projector's scale
    the text grows by the scale, or only as far as that choice still shows whole.
    """
    fit = CHOICE_ROOM_PX / (max(longest, 1) * CHOICE_EM_PER_CHAR)
    return (f"<style>.{FORM_CLASS}.{FORM_CLASS}-{key} .widget-dropdown > select "
            f"{{font-size: min(var(--jp-widgets-font-size), {fit:.1f}px);}}</style>")


def presentation(scale: float | None = None) -> float:
    """One setting for a projector: text of pictures, tables and forms, and picture heights.

    Sets :func:`kitlib.plots.set_scale` (font sizes and figure heights of every kitlib
    picture drawn from now on) and, in a notebook, shows :func:`presentation_css`: the
    text of every table, answer form and explorer on the page, drawn before or after,
    follows (it lasts while the output of the cell that called this is on the page).

    Called by itself when kitlib is imported in a Jupyter kernel with
    ``$KITLIB_PLOT_SCALE`` set (:func:`presentation_from_environment`).

    Parameters
    ----------
    scale : float, optional
        1 on a laptop, 1.4–2 on a projector; by default ``$KITLIB_PLOT_SCALE``, else 1.

    Returns
    -------
    float
        The scale in force.

    Raises
    ------
    KitError
        ``scale`` is not a positive number.
    """
    from ..plots import set_scale
    value = set_scale(scale if scale is not None else (setting(SCALE_ENV) or 1.0))
    PRESENTATION["scale"] = value
    if in_kernel() and (value != 1.0 or PRESENTATION["shown"]):
        from IPython.display import HTML, display
        display(HTML(presentation_css(value)))
        PRESENTATION["shown"] = True
    return value


def presentation_from_environment() -> float | None:
    """``$KITLIB_PLOT_SCALE`` applied as :func:`presentation` does, in a Jupyter kernel
    (kitlib calls this when it is imported): pictures, tables, forms and explorers.

    Returns
    -------
    float or None
        The scale, or None when the variable is unset or this is not a kernel (where
        :mod:`kitlib.plots` still applies it to pictures when imported).
    """
    if not is_set(SCALE_ENV) or not in_kernel():
        return None
    return presentation()


def readable(table, max_width_em: float = 28, na_rep: str = "NaN"):
    """A table shown whole at a notebook's width: no text cut with "…", long text and
    headers wrapped instead of widening the table past the cell.

    Numbers never wrap (a number broken over two lines reads as two); text wraps at
    spaces, a long name (a kernel's, a file's) after ``_``, ``::``, ``/``, ``.`` or ``,``
    (:func:`_breakable`), and never mid-word unless one piece is wider than
    ``max_width_em``; headers
    break after underscores (``launch_at_ | us``). A text column keeps at least the width
    of its longest entry or 6 em, whichever is less, so a table too wide for its cell
    shows as wider than the cell (the browser test catches it) rather than as columns a
    few letters wide. Cells are padded a little less than JupyterLab's default, and a
    plain 0, 1, 2, … index is not shown. A column (and the row index) is at least as wide as
    the longest piece of text in it that may not break (a word; a long name's piece between
    its break points), up to ``max_width_em``: "uninstrumented" in a 6 em column, or "case_a"
    in the index, broke mid-word at a laptop's width (issue 40, lesson 13).

    Parameters
    ----------
    table : DataFrame
    max_width_em : float
        The widest a column grows before its text wraps (em).
    na_rep : str
        What a missing number shows as (``"not recorded"`` says more than ``NaN`` where a
        recording predates the figure); wraps at its spaces.

    Returns
    -------
    ReadableTable
        Displays as HTML (text and numbers as the DataFrame shows them, without pandas'
        ``display.max_colwidth`` cut) and prints as the DataFrame; ``.data`` is ``table``.
    """
    import math
    import pandas as pd
    # break-word, not anywhere: "anywhere" lets the table squeeze a column below its longest
    # word, and Chromium then broke words mid-way ("cudaLaunchKer|nel", issue 40); long
    # names get break points of their own (_breakable)
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
        # a header's longest word never spills into the next header ("uninstrumented" in a 7 em
        # column ran into its neighbours, issue 40): the column is at least that wide
        word = max((len(w) for w in re.split(r"[_\s]+", str(c))), default=0)
        if word * 0.6 > max_width_em:
            columns.append({"selector": f"th.col{j}", "props": [("min-width", f"{word * 0.6:.1f}em")]})
    def row_header(v):  # a row's label is text like a text column's: a long call site
        # ("torchvision/models/resnet.py(143): forward") breaks after / . ( and never runs
        # over the numbers beside it (lesson 06's grouping explorer, issue 40)
        return _breakable(html.escape(v, quote=False)) if isinstance(v, str) else header(v)
    plain = isinstance(table.index, pd.RangeIndex) and table.index.name is None
    if not plain:   # at least its longest unbreakable piece wide (a case_a breaks after no underscore);
        # a row label with no break point left wraps where it must rather than overlap its row
        piece = max((_longest_piece(v) for v in table.index), default=0)
        columns.append({"selector": "th.row_heading",
                        "props": [("min-width", f"{min(piece * 0.6, max_width_em):.1f}em"),
                                  ("overflow-wrap", "break-word")]})
    missing = html.escape(na_rep, quote=False)
    if " " in na_rep:         # a number column does not wrap; its "not recorded" may
        missing = f'<span style="white-space: normal">{missing}</span>'
    styler = (table.style.format(number, subset=floats, na_rep=missing).format(shown, subset=text)
              .format_index(header, axis=1).format_index(row_header, axis=0)
              .set_table_styles([{"selector": "td", "props": cell}, {"selector": "th", "props": head}] + columns))
    if plain:
        styler = styler.hide(axis="index")       # 0, 1, 2, … says nothing a learner needs: its width goes to the data
    return ReadableTable(styler)


#: Where a long name may break in a table: after ``_``, ``::``, ``/``, ``.`` or ``,`` and
#: before ``(`` or ``<`` (escaped), as a kernel or file name reads best broken.
_BREAK_AFTER = re.compile(r"(::|[_/.,](?=\w))")
_BREAK_BEFORE = re.compile(r"(?<=\w)(\(|&lt;)")


def _longest_piece(value, longer_than: int = 16) -> int:
    """The characters of the longest piece of ``str(value)`` that :func:`readable` does not
    break: a word, or in a word longer than ``longer_than`` the longest part between the
    break points :func:`_breakable` gives it."""
    pieces = []
    for w in str(value).split():
        pieces += ([w] if len(w) <= longer_than else
                   _BREAK_BEFORE.sub(r"\n\1", _BREAK_AFTER.sub(r"\1\n", w)).split("\n"))
    return max(map(len, pieces), default=0)


def _breakable(text: str, longer_than: int = 16) -> str:
    """``text`` (HTML-escaped) with ``<wbr>`` break points inside each word longer than
    ``longer_than`` characters (:data:`_BREAK_AFTER`, :data:`_BREAK_BEFORE`), so that a
    table column can be narrower than a long kernel name without breaking a word mid-way;
    shorter words and prose are left as they are (the text a reader copies is unchanged)."""
    def word(w):
        if len(w) <= longer_than:
            return w
        return _BREAK_BEFORE.sub(r"<wbr>\1", _BREAK_AFTER.sub(r"\1<wbr>", w))
    return " ".join(word(w) for w in text.split(" "))


class ReadableTable:
    """What :func:`readable` returns: a pandas Styler for notebooks (``text/html``), the
    DataFrame's own text everywhere else (``print``, ``text/plain``)."""

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
