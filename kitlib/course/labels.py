"""Which recording a lesson's tables and figures come from, said under each of them.

A lesson may show the kit's H200 reference recordings, the learner's own recordings
(``$KITLIB_REPLAY_DIR``), a live capture or a public trace, and the numbers look alike.
So, in Jupyter, every table (a pandas DataFrame or Series shown as a cell's result, or
printed with :func:`print_table`) and every picture (a matplotlib figure shown by the
inline backend) gets a short note under it, e.g. ``data: profiler_5step: kit's H200
reference, 2026-11-29``: the :attr:`kitlib.readers.bundle.Capture.label` of each
recording it comes from.

Which recordings a table comes from is worked out per cell (:func:`cell_sources`): the
recordings the cell opened, the recording objects its code names (a
:class:`~kitlib.readers.bundle.Capture`, :class:`~kitlib.readers.ranks.RankTraces`,
:class:`~kitlib.readers.trace.Trace` or a path inside a recording; in a dict read as
``runs["nccl"]``, only that entry), and, for a table (pandas or numpy data) it reads,
the recordings of the cell that last assigned it. A cell where none of these names a recording (a table
of facts, a helper that reads a cached recording) falls back to every recording opened
so far (:func:`kitlib.readers.bundle.opened_labels`).

:func:`install` is called when :mod:`kitlib.course` is imported inside IPython; outside
IPython (a script, ``tools/run_lesson.py``) the note names every recording opened.
"""
from __future__ import annotations

import ast
import contextlib
import html
import sys
from pathlib import PurePath

from ..readers.bundle import OPEN_LOG, label_for, note_source, opened_labels  # noqa: F401 (note_source: for lessons)

#: Marks a figure that already carries the note (the attribute holds the note).
_STAMPED = "_kitlib_source_note"

#: The cell running now: its names (see :func:`_cell_names`), the namespace and how many
#: recordings had been opened when it started; ``None`` between cells.
_CELL: dict | None = None
#: Per variable, the recordings of the cell that last assigned it (a table computed in one
#: cell and shown in the next keeps its note).
_DERIVED: dict = {}


def labels_of(obj, depth: int = 1) -> list[str]:
    """The labels of the recordings ``obj`` is or holds: a Capture, RankTraces, Trace, a
    path inside an opened recording, a bundle's step times (:class:`StepTimes
    <kitlib.readers.bundle.StepTimes>`), or (``depth`` levels down) a dict, list or tuple of
    them. ``[]`` for anything else."""
    from ..readers.bundle import Capture, StepTimes
    from ..readers.ranks import RankTraces
    from ..readers.trace import Trace
    if isinstance(obj, Capture):
        return [obj.label]
    if isinstance(obj, RankTraces):
        return [obj.label] if obj.label else []
    if isinstance(obj, Trace):
        lab = label_for(obj.path)
        return [lab] if lab else []
    if isinstance(obj, (PurePath, StepTimes)):
        lab = label_for(obj if isinstance(obj, PurePath) else obj.path)    # step times: their file's
        return [lab] if lab else []
    if depth > 0 and isinstance(obj, (dict, list, tuple)) and len(obj) <= 64:
        items = obj.values() if isinstance(obj, dict) else obj
        return [lab for v in items for lab in labels_of(v, depth - 1)]
    return []


def _cell_names(code: str):
    """``(whole, keyed, loaded, stored)`` of a cell's code: names used as such, names read
    only as ``name["key"]`` (with their keys), names read, names assigned; ``None`` when the
    code does not parse."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    keyed, inner = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and isinstance(node.slice, ast.Constant):
            keyed.setdefault(node.value.id, []).append(node.slice.value)
            inner.add(id(node.value))
    names = [n for n in ast.walk(tree) if isinstance(n, ast.Name)]
    whole = {n.id for n in names if id(n) not in inner}
    loaded = {n.id for n in names if isinstance(n.ctx, ast.Load)}
    stored = {n.id for n in names if isinstance(n.ctx, (ast.Store, ast.Del))}
    return whole, {k: v for k, v in keyed.items() if k not in whole}, loaded, stored


def _tabular(obj) -> bool:
    """Whether ``obj`` is data a later cell may show (a pandas or numpy object, one of the
    kit's tables, or a torch profiler whose tables a later cell prints), so that it keeps the
    recordings of the cell that made it; a number or a dict of settings read by a later cell
    does not pass them on. (Lesson 01 records with ``torch.profiler.profile`` into a folder of
    its own and prints ``prof.key_averages()`` in later cells: without this, each Run All's
    folder, all of them opened in the same kernel, was named under those tables.)"""
    module = type(obj).__module__
    return module.split(".")[0] in ("pandas", "numpy") or hasattr(obj, "styler") or \
        module.startswith(("torch.profiler", "torch.autograd.profiler"))


def cell_sources() -> list[str]:
    """The labels of the recordings the running cell draws on (see the module's notes),
    in the order they were first opened; ``[]`` outside a cell or when it names none."""
    cell = _CELL
    if cell is None or cell["names"] is None:
        return []
    whole, keyed, loaded, _ = cell["names"]
    ns, missing = cell["ns"], object()
    found = list(OPEN_LOG[cell["opened"]:])
    for name in sorted(whole | set(keyed)):
        obj = ns.get(name, missing)
        if obj is missing:
            continue
        if name in keyed and isinstance(obj, dict):
            direct = [lab for k in keyed[name] for lab in labels_of(obj.get(k))]
        else:
            direct = labels_of(obj)
        found += direct or (list(_DERIVED.get(name, ())) if name in loaded and _tabular(obj) else [])
    order = {lab: i for i, lab in enumerate(opened_labels())}
    return sorted(dict.fromkeys(found), key=lambda lab: order.get(lab, len(order)))


def sources_note() -> str | None:
    """``"data: <label>; <label>"``: the recordings the running cell draws on
    (:func:`cell_sources`), else every recording opened so far; ``None`` when none was
    opened."""
    if _FIXED_NOTE:
        return _FIXED_NOTE[-1]
    labels = cell_sources() or opened_labels()
    return "data: " + "; ".join(_grouped(labels)) if labels else None


#: Notes fixed by :func:`fixed_note` (innermost last).
_FIXED_NOTE: list = []


@contextlib.contextmanager
def fixed_note(note: str | None):
    """Within the block, :func:`sources_note` is ``note``: an explorer redrawn by a widget,
    outside any cell, keeps the note of the cell that made it (the recording it draws), not
    every recording opened so far in the kernel."""
    _FIXED_NOTE.append(note)
    try:
        yield
    finally:
        _FIXED_NOTE.pop()


def _grouped(labels, at_most: int = 8) -> list[str]:
    """Labels in order, except that more than ``at_most`` recordings of one kind and date
    (the part after ``name: ``) are said once: ``"16 recordings (case_a_before … case_h_after):
    kit's CPU clinic case, 2026-12-02"`` (tests/plots/test_plots_drawn.py).
    """
    kinds: dict[str, list[str]] = {}
    for lab in labels:
        name, sep, kind = lab.partition(": ")
        kinds.setdefault(kind if sep else lab, []).append(name)
    out, said = [], set()
    for lab in labels:
        name, sep, kind = lab.partition(": ")
        names = kinds.get(kind if sep else lab, [])
        if not sep or len(names) <= at_most:
            out.append(lab)
        elif kind not in said:
            said.add(kind)
            out.append(f"{len(names)} recordings ({names[0]} … {names[-1]}): {kind}")
    return out


def _note_text(note: str) -> str:
    """The note as a printed line, ``[data: ...]``, wrapped to a notebook's width (issue 40)."""
    from ..units import wrapped
    return wrapped(f"[{note}]", indent=" ")


def print_table(table, **to_string) -> None:
    """Print a table (a DataFrame or Series, with ``to_string(**to_string)``, or text such
    as the profiler's own tables) and the note under it, as ``[data: ...]`` — the printed
    counterpart of the note under a displayed table."""
    text = table if isinstance(table, str) else table.to_string(**to_string)
    note = sources_note()
    # one write, not print's two (text, then the newline): a Jupyter kernel sends what is
    # written every 0.2 s, and under load the newline went out as an output of its own
    sys.stdout.write(text + (f"\n{_note_text(note)}" if note else "") + "\n")


def stamp_figure(fig, note: str | None = None):
    """Write ``note`` (default :func:`sources_note`) under ``fig``, once.

    Parameters
    ----------
    fig : matplotlib.figure.Figure

    Returns
    -------
    matplotlib.figure.Figure
        The same figure; unchanged when there is no note or it already has one. The
        note is kept as the figure's ``_kitlib_source_note`` (its text output says it too).
    """
    note = note if note is not None else sources_note()
    if note and not getattr(fig, _STAMPED, None):
        from ..plots import font
        import textwrap
        size = font(7.5)
        # a note wider than the figure would widen the saved PNG (bbox_inches="tight") and
        # shrink the plot on screen: wrap it to the figure's width (about 0.55 em a character)
        chars = max(40, int(fig.get_figwidth() * 72 / (0.55 * size)))
        fig.text(0.995, -0.005, textwrap.fill(note, chars), ha="right", va="top", fontsize=size, color="0.4")
        setattr(fig, _STAMPED, note)
    return fig


def _stamp_open_figures(*_args, **_kw):
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for num in plt.get_fignums():
        stamp_figure(plt.figure(num))


def note_html() -> str:
    """The :func:`sources_note` as a small grey HTML line to put under a table (``""`` when
    no recording was opened). Used for pandas tables here and for the kit's own HTML
    tables (:func:`kitlib.course.widgets.readable`, the explorers' static views)."""
    note = sources_note()
    return f'<div style="font-size:smaller;color:#666">{html.escape(note, quote=False)}</div>' if note else ""


def _table_html(obj):
    body = obj._repr_html_() if hasattr(obj, "_repr_html_") else None
    if body is None:
        body = f"<pre>{html.escape(obj.to_string())}</pre>"
    return body + note_html()


def _table_text(obj, p, cycle):
    note = sources_note()
    p.text(repr(obj) + (f"\n{_note_text(note)}" if note else ""))


def _figure_text(fig, p, cycle):
    """A figure's text output: its repr and the note drawn under it (stamped now if the
    figure is shown before the cell ends)."""
    stamp_figure(fig)
    note = getattr(fig, _STAMPED, None)
    p.text(repr(fig) + (f"\n[{note}]" if isinstance(note, str) else ""))


def register_figure_formatter(ip) -> None:
    """(Re)register, in IPython shell ``ip``, the kit's figure output (its PNG, narrowed, with
    its text size noted, and the figures' text output): returns None, raises nothing. Needed
    because matplotlib's inline backend drops every
    formatter of figures when it sets up its own (the first ``import matplotlib.pyplot``
    under it), so this is checked before each cell and before figures are shown."""
    fmt = ip.display_formatter.formatters["text/plain"]
    if fmt.deferred_printers.get(("matplotlib.figure", "Figure")) is not _figure_text:
        fmt.for_type_by_name("matplotlib.figure", "Figure", _figure_text)
    figure = getattr(sys.modules.get("matplotlib.figure"), "Figure", None)
    png = ip.display_formatter.formatters["image/png"]
    try:
        drawn = png.lookup_by_type(figure) if figure is not None else None
    except KeyError:       # the inline backend has not set up its PNGs (yet)
        drawn = None
    if drawn is not None and not getattr(drawn, "_kitlib_png", False):
        png.for_type(figure, _with_text_size(drawn))


def _with_text_size(drawn):
    """The inline backend's PNG printer of figures, narrowing each figure to a laptop
    notebook's width (:func:`kitlib.plots.fit_width`) and writing into its PNG the size of its
    smallest text (:func:`kitlib.plots.png_metadata`: what tests/support/browser.py reads to tell
    the size a learner sees); the PNG as before where the printer takes no metadata."""
    def png(fig):
        from ..plots import fit_width, png_metadata
        fit_width(fig)              # shown at 1x in a laptop's notebook, text as drawn
        try:
            return drawn(fig, metadata=png_metadata(fig))
        except TypeError:
            return drawn(fig)
    png._kitlib_png = True
    return png


def _stamp_before_flush(ip) -> None:
    """Keep the inline backend's ``flush_figures`` (which shows the figures) after the
    callback that writes the note on them, also when the backend was set up later."""
    callbacks = ip.events.callbacks["post_execute"]
    names = [getattr(cb, "__name__", "") for cb in callbacks]
    if "kitlib_post_execute" not in names:
        return
    ours = names.index("kitlib_post_execute")
    flush = [cb for i, cb in enumerate(callbacks) if names[i] == "flush_figures" and i < ours]
    for cb in flush:
        callbacks.remove(cb)
        callbacks.append(cb)


def _pre_run_cell(info=None, ip=None):
    global _CELL
    if ip is not None:
        register_figure_formatter(ip)
    code = getattr(info, "raw_cell", "") or ""
    try:
        code = ip.transform_cell(code) if ip is not None else code
    except Exception:      # a cell IPython cannot transform runs into its own error
        pass
    _CELL = {"names": _cell_names(code), "ns": ip.user_ns if ip is not None else {}, "opened": len(OPEN_LOG)}


def _post_run_cell(*_args, **_kw):
    """Remember, for each variable the cell assigned, the recordings it drew on."""
    global _CELL
    cell = _CELL
    if cell is not None and cell["names"] is not None:
        labels = tuple(cell_sources())
        for name in cell["names"][3]:
            if labels:
                _DERIVED[name] = labels
            else:
                _DERIVED.pop(name, None)
    _CELL = None


def install(ip=None) -> bool:
    """Put the note under the tables and figures that IPython shows from now on.

    Registers HTML and plain-text formatters for pandas DataFrames and Series and a
    plain-text one for matplotlib figures, ``pre_run_cell``/``post_run_cell`` callbacks
    that follow which recordings each cell draws on, and a ``post_execute`` callback that
    writes the note on each open figure before the inline backend shows it (placed before
    the backend's own ``flush_figures``).

    Parameters
    ----------
    ip : IPython.InteractiveShell, optional
        Default: the running shell.

    Returns
    -------
    bool
        False when not inside IPython (nothing installed).
    """
    if ip is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        ip = get_ipython()
    if ip is None or getattr(ip, "_kitlib_labels", False):
        return ip is not None
    import pandas as pd
    fmt = ip.display_formatter.formatters
    for typ in (pd.DataFrame, pd.Series):
        fmt["text/html"].for_type(typ, _table_html)
        fmt["text/plain"].for_type(typ, _table_text)
    register_figure_formatter(ip)

    def kitlib_pre_run_cell(info=None):
        _pre_run_cell(info, ip)
        _stamp_before_flush(ip)

    def kitlib_post_execute():
        register_figure_formatter(ip)
        _stamp_open_figures()

    ip.events.register("pre_run_cell", kitlib_pre_run_cell)
    ip.events.register("post_run_cell", _post_run_cell)
    ip.events.register("post_execute", kitlib_post_execute)
    _stamp_before_flush(ip)
    for cb in flush:
        ip.events.register("post_execute", cb)
    ip._kitlib_labels = True
    return True
