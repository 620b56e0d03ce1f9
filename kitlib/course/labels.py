"""Which recording a lesson's tables and figures come from, said under each of them.

A lesson may show the kit's H200 reference recordings, the learner's own recordings
(``$KITLIB_REPLAY_DIR``) or a live capture, and the numbers look alike. So, in Jupyter,
every table (a pandas DataFrame or Series shown as a cell's result) and every picture
(a matplotlib figure shown by the inline backend) gets a short note under it: the
:attr:`kitlib.readers.bundle.Capture.label` of each recording the lesson has opened so
far, e.g. ``data: profiler_5step: kit's H200 reference, 2026-11-29``. Every recording
opened in the process counts (:func:`kitlib.readers.bundle.opened_labels`), whichever
function opened it; a table drawn from one of two open recordings names both.

:func:`install` is called when :mod:`kitlib.course` is imported inside IPython; outside
IPython (a script, ``tools/run_lesson.py``) nothing changes.
"""
from __future__ import annotations

import html
import sys

from ..readers.bundle import opened_labels

#: Marks a figure that already carries the note.
_STAMPED = "_kitlib_source_note"


def sources_note() -> str | None:
    """``"data: <label>; <label>"`` for the recordings opened so far, or ``None`` when
    none was opened (a lesson's own CPU run, or a table of facts)."""
    labels = opened_labels()
    return "data: " + "; ".join(labels) if labels else None


def stamp_figure(fig, note: str | None = None):
    """Write ``note`` (default :func:`sources_note`) under ``fig``, once.

    Parameters
    ----------
    fig : matplotlib.figure.Figure

    Returns
    -------
    matplotlib.figure.Figure
        The same figure; unchanged when there is no note or it already has one.
    """
    note = note if note is not None else sources_note()
    if note and not getattr(fig, _STAMPED, False):
        from ..plots import font
        fig.text(0.995, -0.005, note, ha="right", va="top", fontsize=font(7.5), color="0.4")
        setattr(fig, _STAMPED, True)
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
    p.text(repr(obj) + (f"\n[{note}]" if note else ""))


def install(ip=None) -> bool:
    """Put the note under the tables and figures that IPython shows from now on.

    Registers HTML and plain-text formatters for pandas DataFrames and Series, and a
    ``post_execute`` callback that writes the note on each open figure before the
    inline backend shows it (the callback is placed before the backend's own
    ``flush_figures``).

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
    callbacks = ip.events.callbacks["post_execute"]
    flush = [cb for cb in callbacks if getattr(cb, "__name__", "") == "flush_figures"]
    for cb in flush:
        callbacks.remove(cb)
    ip.events.register("post_execute", _stamp_open_figures)
    for cb in flush:
        ip.events.register("post_execute", cb)
    ip._kitlib_labels = True
    return True
