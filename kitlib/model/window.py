"""The one window function: which interval (step, parent, label) contains time ``t``.

kitlib's boundary rule is **half-open, [start, end)**: an interval contains ``t`` when
``start_ns <= t < end_ns`` (the profiler's rule for its event tree, and Perfetto's). So a
time at one interval's end and the next one's start belongs to the next one only; a
zero-length interval contains no time; a zero-length event at its parent's end is not
inside that parent. Every function names the rule in its ``closed`` parameter: ``"left"``
is ``[start, end)``, ``"both"`` ``[start, end]`` (``memory_by_event``'s), also ``"right"``,
``"neither"``.
Sources: docs/SOURCES.md#boundary-rule

Examples
--------
Three steps back to back, and times at every boundary:
>>> containing([0, 10, 20], [10, 20, 30], [0, 9, 10, 20, 30])
array([ 0,  0,  1,  2, -1])
>>> containing([0, 10, 20], [10, 20, 30], [30], closed="both")   # another rule, named
array([2])
"""
from __future__ import annotations

import numpy as np
import pandas as pd

CLOSED = ("left", "right", "both", "neither")

def _check(closed: str) -> None:
    if closed not in CLOSED:
        raise ValueError(f"closed must be one of {', '.join(map(repr, CLOSED))}, not {closed!r}")


def _previous_greater(e: np.ndarray) -> np.ndarray:
    """For each position, the nearest earlier one with a strictly greater value (-1 if none)."""
    up = np.full(len(e), -1, dtype=np.int64)
    stack: list = []
    el = e.tolist()
    for i, v in enumerate(el):
        while stack and el[stack[-1]] <= v:
            stack.pop()
        if stack:
            up[i] = stack[-1]
        stack.append(i)
    return up


def innermost(start_ns, end_ns, t_ns, closed: str = "left") -> np.ndarray:
    """For each of ``t_ns``, the innermost interval containing it: of those that do, the one
    starting last (ties: ending first). Returns int64 positions into ``start_ns``/``end_ns`` (any
    order), -1 where none; ValueError for an unknown ``closed`` or arrays of different lengths.

    Examples
    --------
    A parent [0, 100), a child [20, 60) and a zero-length event at 60:
    >>> innermost([0, 20, 60], [100, 60, 60], [0, 20, 59, 60, 99, 100])
    array([ 0,  1,  1,  0,  0, -1])
    """
    _check(closed)
    s = np.asarray(start_ns, dtype=np.int64).reshape(-1)
    e = np.asarray(end_ns, dtype=np.int64).reshape(-1)
    t = np.asarray(t_ns, dtype=np.int64).reshape(-1)
    if len(s) != len(e):
        raise ValueError(f"start_ns and end_ns differ in length ({len(s)} and {len(e)})")
    out = np.full(len(t), -1, dtype=np.int64)
    if not len(s) or not len(t):
        return out
    order = np.lexsort((-e, s))                       # by start, longest first
    s, e = s[order], e[order]
    left_in = closed in ("left", "both")
    right_in = closed in ("right", "both")
    # intervals [0, hi) start at or before t (before t when the start is open)
    hi = np.searchsorted(s, t, side="right" if left_in else "left")

    def is_open(ends, tt):
        return ends >= tt if right_in else ends > tt

    k = hi - 1
    found = np.full(len(t), -1, dtype=np.int64)
    live = np.flatnonzero(k >= 0)
    k = k[live]
    # if the last interval starting at or before t has ended, hop to the previous greater end
    up = None
    while live.size:
        ok = is_open(e[k], t[live])
        found[live[ok]] = k[ok]
        live, k = live[~ok], k[~ok]
        if not live.size:
            break
        if up is None:
            up = _previous_greater(e)
        k = up[k]
        keep = k >= 0
        live, k = live[keep], k[keep]
    out[found >= 0] = order[found[found >= 0]]
    return out


def containing(start_ns, end_ns, t_ns, closed: str = "left") -> np.ndarray:
    """:func:`innermost` for intervals that do not overlap (steps, busy periods): for each
    time, the position of the interval containing it, -1 outside them all.

    Examples
    --------
    >>> containing([10, 0], [20, 10], [0, 10, 15, 20])
    array([ 1,  0,  0, -1])
    """
    return innermost(start_ns, end_ns, t_ns, closed=closed)


def count_in(start_ns, end_ns, t_ns, closed: str = "left") -> np.ndarray:
    """How many of the times ``t_ns`` fall in each interval (int64 array of length n; a time
    two intervals share counts in both); ``closed`` as in :func:`innermost`.

    Examples
    --------
    >>> count_in([0, 10], [10, 20], [0, 5, 10, 20])
    array([2, 1])
    """
    lo, hi = bounds_in(start_ns, end_ns, np.sort(np.asarray(t_ns, dtype=np.int64).reshape(-1)), closed)
    return (hi - lo).astype(np.int64)


def bounds_in(start_ns, end_ns, sorted_t_ns, closed: str = "left"):
    """``(lo, hi)`` per interval: ``sorted_t_ns[lo:hi]`` are the times it contains (for sums by
    cumulative sums; ``closed`` as in :func:`innermost`).

    Examples
    --------
    >>> bounds_in([0, 10], [10, 20], [0, 5, 10, 20])
    (array([0, 2]), array([2, 3]))
    """
    _check(closed)
    t = np.asarray(sorted_t_ns, dtype=np.int64).reshape(-1)
    s = np.asarray(start_ns, dtype=np.int64).reshape(-1)
    e = np.asarray(end_ns, dtype=np.int64).reshape(-1)
    lo = np.searchsorted(t, s, side="left" if closed in ("left", "both") else "right")
    hi = np.searchsorted(t, e, side="right" if closed in ("right", "both") else "left")
    return lo, np.maximum(hi, lo)


def _int64_at(pos: np.ndarray, values) -> pd.arrays.IntegerArray:
    """``values[pos]`` as ``Int64``, ``<NA>`` where ``pos`` is -1."""
    values = np.asarray(values, dtype=np.int64)
    hit = pos >= 0
    out = np.zeros(len(pos), dtype=np.int64)
    out[hit] = values[pos[hit]]
    return pd.arrays.IntegerArray(out, ~hit)


def step_of(times_ns, steps: pd.DataFrame, closed: str = "left") -> pd.arrays.IntegerArray:
    """For each time (ns), the number of the step that holds it, ``<NA>`` outside every step.

    ``steps`` is a step table (``step``, ``start_ns``, ``end_ns``); ``closed`` as in :func:`innermost`.

    Examples
    --------
    Steps 1 and 2 back to back, [0, 10) and [10, 20):

    >>> import pandas as pd
    >>> steps = pd.DataFrame({"step": [1, 2], "start_ns": [0, 10], "end_ns": [10, 20]})
    >>> step_of([0, 9, 10, 20], steps).tolist()
    [1, 1, 2, <NA>]
    """
    pos = containing(steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy(), times_ns, closed=closed)
    return _int64_at(pos, steps["step"].to_numpy(dtype=np.int64))


def label_at(times_ns, ranges: pd.DataFrame, closed: str = "left") -> pd.arrays.IntegerArray:
    """For each time (ns), the row label of the innermost range holding it (:func:`innermost`),
    ``<NA>`` where none does: which ``record_function`` label, operator or Python frame.

    ``ranges`` has ``start_ns``, ``end_ns`` and an integer index; ``closed`` as in :func:`innermost`.

    Examples
    --------
    A parent [0, 100) (label 7) and its child [20, 60) (label 8):

    >>> import pandas as pd
    >>> ranges = pd.DataFrame({"start_ns": [0, 20], "end_ns": [100, 60]}, index=[7, 8])
    >>> label_at([0, 20, 60, 100], ranges).tolist()
    [7, 8, 7, <NA>]
    """
    pos = innermost(ranges["start_ns"].to_numpy(), ranges["end_ns"].to_numpy(), times_ns, closed=closed)
    return _int64_at(pos, ranges.index.to_numpy())


def value_at(times_ns, ranges: pd.DataFrame, column: str = "name") -> np.ndarray:
    """For each time, ``column`` of the innermost of ``ranges`` holding it (:func:`label_at`),
    None where none does: an object array of length m.

    Examples
    --------
    >>> import pandas as pd
    >>> ranges = pd.DataFrame({"name": ["a", "b"], "start_ns": [0, 20], "end_ns": [100, 60]})
    >>> value_at([20, 100], ranges).tolist()
    ['b', None]
    """
    at = label_at(times_ns, ranges)
    out = np.full(len(at), None, dtype=object)
    hit = ~at.isna()
    out[hit] = ranges[column].loc[at[hit].to_numpy(np.int64)].to_numpy(dtype=object)
    return out
