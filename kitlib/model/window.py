"""The one window function: which interval (step, parent, label) contains time ``t``.

The boundary rule
-----------------
kitlib's rule is **half-open, [start, end)**: an interval contains a time ``t`` when
``start_ns <= t < end_ns``. It is the profiler's own rule for its event tree
(``EventList._populate_cpu_children`` in ``torch/autograd/profiler_util.py``: an event
that starts at or after an open event's end is not its child), and the rule of
Perfetto's trace processor, whose ``interval_intersect`` treats every interval as
``[ts, ts + dur)``. It follows that:

- a time equal to one interval's end and the next one's start belongs to the next one
  (a launch exactly at a step's end is counted in the following step, never in both);
- a zero-length interval ``[s, s)`` contains no time at all (not even ``s``): a
  zero-length operator has no children, and a zero-length step holds no event;
- a zero-length *event* at time ``s`` is placed by its start, as any event: one at its
  parent's end is not inside that parent (the profiler makes it a sibling).

The signature names the rule (``closed="left"``), so that a caller that must follow a
different rule says so where it calls. There is one such caller in kitlib:
``memory_by_event`` uses ``closed="both"`` because the profiler's own
``MemRecordsAcc.in_interval`` (``bisect_left`` of the start, ``bisect_right`` of the
end) counts an allocator record at either end of an operator in that operator, and the
"CUDA Mem" column kitlib rebuilds must match the profiler's.

:func:`innermost` and :func:`containing` take plain arrays (any order) and return, for
each time, the *position* (0…n-1 in the arrays given) of the chosen interval, or -1.
The analyses ask their questions of tables, through two functions that answer in
``Int64``, ``<NA>`` where no interval holds the time: :func:`step_of` (which step) and
:func:`label_at` (which row of a table of ranges: a label, an operator, a frame).

Examples
--------
Three steps back to back, and times at every boundary:

>>> from kitlib.model.window import containing
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
    """For each position, the nearest earlier position whose value is strictly greater
    (-1 where none): one pass with a stack."""
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
    """For each time, the innermost interval containing it: of those that contain it,
    the one that starts last (ties: the one that ends first), or -1 where none does.

    On intervals that nest (the events of one thread) that is the innermost one; on
    intervals that do not overlap (steps) it is the only one; on intervals that overlap
    without nesting (labels of several threads) it is the one opened most recently.

    Parameters
    ----------
    start_ns, end_ns : array-like of int, length n
        The intervals, in any order (ns).
    t_ns : array-like of int, length m
        The times, in any order (ns).
    closed : {"left", "right", "both", "neither"}
        Which ends belong to an interval. ``"left"``, kitlib's rule, is ``[start, end)``
        (see the module's docstring); ``"both"`` is ``[start, end]``.

    Returns
    -------
    ndarray of int64, length m
        Positions into ``start_ns``/``end_ns``; -1 where no interval contains the time.

    Raises
    ------
    ValueError
        An unknown ``closed``, or arrays of different lengths.

    Notes
    -----
    The intervals are sorted once by start, longest first; for each time a binary
    search finds the last one starting at or before it. If that one has ended, every
    interval between it and the nearest earlier one that ends later has ended too, so
    the search hops to that one (the previous greater end, found for all intervals in
    one pass), and so on: as many hops as the nesting is deep, all times at once.

    Examples
    --------
    A parent [0, 100), a child [20, 60) and a zero-length event at 60:

    >>> from kitlib.model.window import innermost
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
    # the last interval starting at or before t; if it has ended, no interval between it
    # and the nearest earlier one that ends later can be open either: hop to that one
    # (the previous strictly greater end), until one is open or none is left
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
    """For each time, the interval containing it, for intervals that do not overlap
    (the steps of a recording, the busy periods of a device), or -1 where none does.

    The same search as :func:`innermost` (where intervals do overlap, the one that
    starts last is chosen), named for the common case.

    Parameters
    ----------
    start_ns, end_ns : array-like of int, length n
        The intervals, any order (ns).
    t_ns : array-like of int, length m
        The times, any order (ns).
    closed : {"left", "right", "both", "neither"}
        ``"left"`` (kitlib's rule) is ``[start, end)``: a time at one step's end and the
        next one's start is in the next step only.

    Returns
    -------
    ndarray of int64, length m
        Positions into the intervals, -1 outside them all.

    Examples
    --------
    >>> from kitlib.model.window import containing
    >>> containing([10, 0], [20, 10], [0, 10, 15, 20])
    array([ 1,  0,  0, -1])
    """
    return innermost(start_ns, end_ns, t_ns, closed=closed)


def count_in(start_ns, end_ns, t_ns, closed: str = "left") -> np.ndarray:
    """How many of the times fall in each interval (overlapping intervals each count
    a time they share), by two binary searches per interval.

    Parameters
    ----------
    start_ns, end_ns : array-like of int, length n
        The intervals (ns).
    t_ns : array-like of int
        The times (ns), any order.
    closed : {"left", "right", "both", "neither"}
        ``"left"`` (kitlib's rule) is ``[start, end)``.

    Returns
    -------
    ndarray of int64, length n

    Examples
    --------
    >>> from kitlib.model.window import count_in
    >>> count_in([0, 10], [10, 20], [0, 5, 10, 20])
    array([2, 1])
    >>> count_in([0, 10], [10, 20], [0, 5, 10, 20], closed="both")
    array([3, 2])
    """
    _check(closed)
    t = np.sort(np.asarray(t_ns, dtype=np.int64).reshape(-1))
    s = np.asarray(start_ns, dtype=np.int64).reshape(-1)
    e = np.asarray(end_ns, dtype=np.int64).reshape(-1)
    lo = np.searchsorted(t, s, side="left" if closed in ("left", "both") else "right")
    hi = np.searchsorted(t, e, side="right" if closed in ("right", "both") else "left")
    return np.maximum(hi - lo, 0).astype(np.int64)


def bounds_in(start_ns, end_ns, sorted_t_ns, closed: str = "left"):
    """``(lo, hi)`` per interval: the times ``sorted_t_ns[lo:hi]`` are those it
    contains (the times sorted ascending). For sums over the times of each interval by
    cumulative sums, as :func:`count_in` counts them.

    Examples
    --------
    >>> from kitlib.model.window import bounds_in
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
    """For each time, the number of the step that holds it, ``<NA>`` outside every step.

    Parameters
    ----------
    times_ns : array-like of int, length m
        Times (ns) on the recording's clock, any order.
    steps : DataFrame
        A step table (``Trace.steps``, ``NsysReport.steps``): ``step`` (the N, int),
        ``start_ns``, ``end_ns`` (ns); steps do not overlap. An empty table puts every
        time outside.
    closed : {"left", "right", "both", "neither"}
        ``"left"``, kitlib's rule, is ``[start_ns, end_ns)``: a time at one step's end
        and the next one's start is in the next step only (see the module's docstring).

    Returns
    -------
    pandas IntegerArray (Int64), length m

    Examples
    --------
    Steps 1 and 2 back to back, [0, 10) and [10, 20):

    >>> import pandas as pd
    >>> from kitlib.model.window import step_of
    >>> steps = pd.DataFrame({"step": [1, 2], "start_ns": [0, 10], "end_ns": [10, 20]})
    >>> step_of([0, 9, 10, 20], steps).tolist()
    [1, 1, 2, <NA>]
    """
    pos = containing(steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy(), times_ns, closed=closed)
    return _int64_at(pos, steps["step"].to_numpy(dtype=np.int64))


def label_at(times_ns, ranges: pd.DataFrame, closed: str = "left") -> pd.arrays.IntegerArray:
    """For each time, the row label of the innermost range that holds it, ``<NA>`` where
    none does: which ``record_function`` label, which operator, which Python frame.

    The innermost is the one :func:`innermost` picks: of the ranges holding the time,
    the one that starts last (ties: the one that ends first); on the ranges of one
    thread, which nest, the innermost one.

    Parameters
    ----------
    times_ns : array-like of int, length m
        Times (ns), any order.
    ranges : DataFrame
        ``start_ns``, ``end_ns`` (ns), with an integer index (a reader's row labels,
        as ``Trace.ops`` has: ``ranges.loc[label]`` is the range).
    closed : {"left", "right", "both", "neither"}
        ``"left"``, kitlib's rule, is ``[start_ns, end_ns)``.

    Returns
    -------
    pandas IntegerArray (Int64), length m
        Labels from ``ranges.index``.

    Examples
    --------
    A parent [0, 100) (label 7) and its child [20, 60) (label 8):

    >>> import pandas as pd
    >>> from kitlib.model.window import label_at
    >>> ranges = pd.DataFrame({"start_ns": [0, 20], "end_ns": [100, 60]}, index=[7, 8])
    >>> label_at([0, 20, 60, 100], ranges).tolist()
    [7, 8, 7, <NA>]
    """
    pos = innermost(ranges["start_ns"].to_numpy(), ranges["end_ns"].to_numpy(), times_ns, closed=closed)
    return _int64_at(pos, ranges.index.to_numpy())


def value_at(times_ns, ranges: pd.DataFrame, column: str = "name") -> np.ndarray:
    """For each time, ``column`` of the innermost of ``ranges`` holding it (:func:`label_at`),
    None where none does: an object array of length m.

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
