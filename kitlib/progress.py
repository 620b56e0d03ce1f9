"""Progress bars for long work: loading a large trace, analysing one, reading many ranks.

A bar shows only where the work takes seconds (the thresholds below) and never when
``KITLIB_PROGRESS`` is 0/off/false/no, which the tests set.
"""
from __future__ import annotations

from .settings import is_off

#: Host and GPU events from which an analysis of the trace takes a few seconds here
#: (``group_ops`` on the reference trace replicated 10 times): show a progress bar.
PROGRESS_MIN_EVENTS = 600_000


def progress_bar(desc: str, total: int, show: bool):
    """A tqdm bar (terminal or Jupyter) of ``total`` stages, shown when ``show`` and
    ``KITLIB_PROGRESS`` is not 0/off/false/no (the tests set it to 0); always a bar
    object, so the caller updates it either way."""
    from tqdm.auto import tqdm
    if is_off("KITLIB_PROGRESS"):
        show = False
    return tqdm(total=total, desc=desc, unit="stage", disable=not show, leave=False)


def analysis_progress(trace, desc: str, stages: int, progress: bool | None = None):
    """:func:`progress_bar` for an analysis of ``trace`` (a :class:`kitlib.model.Trace`):
    shown by default when the trace holds :data:`PROGRESS_MIN_EVENTS` host and GPU events
    or more."""
    n = (len(trace.host_events) if trace.host_events is not None else len(trace.ops)) + len(trace.gpu)
    show = n >= PROGRESS_MIN_EVENTS if progress is None else bool(progress)
    return progress_bar(f"{desc} ({n:,} events)", stages, show)
