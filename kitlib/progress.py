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
    object, so the caller updates it either way.

    Examples
    --------
    >>> from kitlib.progress import progress_bar
    >>> bar = progress_bar("reading", total=3, show=False)
    >>> bar.update(3); bar.disable          # a bar object either way: the caller updates it
    True
    >>> bar.close()
    """
    from tqdm.auto import tqdm
    if is_off("KITLIB_PROGRESS"):
        show = False
    return tqdm(total=total, desc=desc, unit="stage", disable=not show, leave=False)


def analysis_progress(trace, desc: str, stages: int, progress: bool | None = None):
    """:func:`progress_bar` for an analysis of ``trace`` (a :class:`kitlib.model.Trace`): shown by default when the
    trace holds :data:`PROGRESS_MIN_EVENTS` host and GPU events or more.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> from kitlib.progress import analysis_progress
    >>> bar = analysis_progress(tiny_trace(), "chain", stages=2)
    >>> bar.disable                          # 4 events: below PROGRESS_MIN_EVENTS, no bar shown
    True
    >>> bar.close()
    """
    n = (len(trace.host_events) if trace.host_events is not None else len(trace.ops)) + len(trace.gpu)
    show = n >= PROGRESS_MIN_EVENTS if progress is None else bool(progress)
    return progress_bar(f"{desc} ({n:,} events)", stages, show)
