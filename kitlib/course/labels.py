"""Which recording a lesson's tables and figures come from, said under each of them.

Sources: docs/SOURCES.md#labels-module
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

#: The running cell's names (:func:`_cell_names`), namespace and ``len(OPEN_LOG)`` at its start; else None.
_CELL: dict | None = None
#: Per variable, the recordings of the cell that last assigned it.
_DERIVED: dict = {}


def labels_of(obj, depth: int = 1) -> list[str]:
    """The labels of the recordings ``obj`` is or holds (a Capture, RankTraces, Trace, path,
    StepTimes, or ``depth`` levels down a dict, list or tuple of them); else ``[]``."""
    from ..readers.bundle import Capture, StepTimes
    from ..model.sources import recording_labels
    if isinstance(obj, Capture):
        return [obj.label]
    labels = recording_labels(obj, label_for)
    if labels is not None:
        return labels
    if isinstance(obj, (PurePath, StepTimes)):
        lab = label_for(obj if isinstance(obj, PurePath) else obj.path)
        return [lab] if lab else []
    if depth > 0 and isinstance(obj, (dict, list, tuple)) and len(obj) <= 64:
        items = obj.values() if isinstance(obj, dict) else obj
        return [lab for v in items for lab in labels_of(v, depth - 1)]
    return []


def _cell_names(code: str):
    """``(whole, keyed, loaded, stored)``: a cell's names used whole, read only as ``name["key"]``
    (with the keys), read, assigned; None when the code does not parse."""
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
    """Whether ``obj`` is data a later cell may show (pandas, numpy, a kit table, a torch
    profiler: lesson 01 prints ``prof.key_averages()`` later), so it keeps its cell's recordings."""
    module = type(obj).__module__
    return module.split(".")[0] in ("pandas", "numpy") or hasattr(obj, "styler") or \
        module.startswith(("torch.profiler", "torch.autograd.profiler"))


def cell_sources() -> list[str]:
    """The labels of the recordings the running cell draws on, in opening order; else ``[]``."""
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
    """``"data: <label>; <label>"`` of :func:`cell_sources`, else of every recording opened; else None."""
    if _FIXED_NOTE:
        return _FIXED_NOTE[-1]
    labels = cell_sources() or opened_labels()
    return "data: " + "; ".join(_grouped(labels)) if labels else None


#: Notes fixed by :func:`fixed_note` (innermost last).
_FIXED_NOTE: list = []


@contextlib.contextmanager
def fixed_note(note: str | None):
    """Within the block, :func:`sources_note` is ``note`` (an explorer's redraw keeps its cell's)."""
    _FIXED_NOTE.append(note)
    try:
        yield
    finally:
        _FIXED_NOTE.pop()


def _grouped(labels, at_most: int = 8) -> list[str]:
    """Labels in order; more than ``at_most`` of one kind (after ``name: ``) said once:
    ``"16 recordings (case_a_before … case_h_after): <kind>"``."""
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
    """Print a table (a DataFrame or Series through ``to_string(**to_string)``, or text) and
    ``[data: ...]`` under it."""
    text = table if isinstance(table, str) else table.to_string(**to_string)
    note = sources_note()
    # one write: under load print's newline went out as an output of its own
    sys.stdout.write(text + (f"\n{_note_text(note)}" if note else "") + "\n")


def stamp_figure(fig, note: str | None = None):
    """Write ``note`` (default :func:`sources_note`) under ``fig`` once (kept as its
    ``_kitlib_source_note``); returns ``fig``."""
    note = note if note is not None else sources_note()
    if note and not getattr(fig, _STAMPED, None):
        from ..plots import font
        import textwrap
        size = font(7.5)
        # wrapped to the figure's width (0.55 em a character): wider, it would shrink the plot
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
    """The :func:`sources_note` as a small grey HTML line for under a table; ``""`` without one."""
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
    """A figure's text output: its repr and its note (stamped now if not yet)."""
    stamp_figure(fig)
    note = getattr(fig, _STAMPED, None)
    p.text(repr(fig) + (f"\n[{note}]" if isinstance(note, str) else ""))


def register_figure_formatter(ip) -> None:
    """(Re)register in shell ``ip`` the kit's figure PNG and text output, which the inline
    backend drops when it sets up its own; checked before each cell and before figures show."""
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
    """The inline backend's PNG printer ``drawn``, fitting each figure to a notebook's width
    (:func:`kitlib.plots.fit_width`) and writing its smallest text size into the PNG
    (:func:`kitlib.plots.png_metadata`) where the printer takes metadata."""
    def png(fig):
        from ..plots import fit_width, png_metadata
        fit_width(fig)
        try:
            return drawn(fig, metadata=png_metadata(fig))
        except TypeError:
            return drawn(fig)
    png._kitlib_png = True
    return png


def _stamp_before_flush(ip) -> None:
    """Move the inline backend's ``flush_figures`` after the callback that writes the notes."""
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
    """Put the note under the tables and figures shell ``ip`` (default: the running one) shows
    from now on; False when not inside IPython.

    Sources: docs/SOURCES.md#labels-install
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
    ip._kitlib_labels = True
    return True
