"""Intervals on one clock: how long was something busy, and where were the gaps?

Every function here takes a table of intervals, a :class:`pandas.DataFrame`
with integer-nanosecond columns ``start_ns`` and ``dur_ns`` (or ``end_ns``),
such as ``Trace.gpu`` (kernels, copies, sets) or the NVTX ranges of an
Nsight Systems report. An interval covers ``[start_ns, start_ns + dur_ns)``:
two intervals that touch (one ends where the next starts) leave no gap.

Overlap is counted once: two kernels running at the same time on two streams
make the GPU busy for the length of their *union*, not for the sum of their
durations. To look at one stream alone, filter the rows first
(``gpu[gpu.stream == 7]``) or group
(``{s: busy_ns(g) for s, g in gpu.groupby("stream")}``).

:func:`union_arrays` and :func:`covered_before` do the same work on two arrays of
starts and ends, unchecked, for the analyses that already hold them.

Pure functions: no I/O, no printing; the input is never modified.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import KitError

__all__ = ["IntervalError", "clip", "union", "union_arrays", "covered_before", "busy_ns", "idle_gaps", "per_window"]

_SPAN_COLUMNS = ["start_ns", "end_ns", "dur_ns"]


class IntervalError(KitError, ValueError):
    """A table of intervals or windows is not usable (missing column, negative
    duration, missing or non-integer time, a window that ends before it starts).

    Examples
    --------
    >>> import pandas as pd
    >>> from kitlib.analyses.intervals import IntervalError, busy_ns
    >>> try:
    ...     busy_ns(pd.DataFrame({"start_ns": [10], "end_ns": [5]}))
    ... except IntervalError as e:
    ...     print(type(e).__name__, isinstance(e, ValueError))
    IntervalError True
    """


# -- reading the input -------------------------------------------------------

def _int_array(df: pd.DataFrame, col: str, what: str) -> np.ndarray:
    """Column ``col`` as an int64 array; refuse missing and fractional values."""
    values = df[col]
    if values.isna().any():
        n = int(values.isna().sum())
        raise IntervalError(f"{what}: column {col!r} has {n} missing value(s)")
    arr = values.to_numpy()
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise IntervalError(f"{what}: column {col!r} holds fractional or infinite values; "
                                "times in kitlib are integer nanoseconds")
    elif arr.dtype.kind not in "iu":
        try:
            arr = arr.astype(np.int64)
        except (TypeError, ValueError):
            raise IntervalError(f"{what}: column {col!r} is not numeric "
                                f"(dtype {values.dtype})") from None
    return arr.astype(np.int64)


def _bounds(df, what: str = "intervals") -> tuple[np.ndarray, np.ndarray]:
    """Start and end (ns) of every row, checked."""
    if not isinstance(df, pd.DataFrame):
        raise IntervalError(f"{what}: expected a pandas DataFrame, got {type(df).__name__}")
    if len(df) == 0 and "start_ns" not in df.columns:   # pd.DataFrame(): nothing to do
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if "start_ns" not in df.columns or not ({"dur_ns", "end_ns"} & set(df.columns)):
        raise IntervalError(f"{what}: need columns 'start_ns' and 'dur_ns' (or 'end_ns'); "
                            f"the table has {list(df.columns)}")
    start = _int_array(df, "start_ns", what)
    if "dur_ns" in df.columns:
        dur = _int_array(df, "dur_ns", what)
        end = start + dur
    else:
        end = _int_array(df, "end_ns", what)
        dur = end - start
    bad = np.flatnonzero(dur < 0)
    if bad.size:
        i = bad[0]
        raise IntervalError(f"{what}: {bad.size} row(s) have a negative duration, the first at "
                            f"row {df.index[i]!r} (start_ns={start[i]}, dur_ns={dur[i]})")
    return start, end


def _window(window) -> tuple[int, int]:
    try:
        w0, w1 = (int(x) for x in window)
    except (TypeError, ValueError):
        raise IntervalError("window must be a pair (start_ns, end_ns) of integers, "
                            f"got {window!r}") from None
    if w1 < w0:
        raise IntervalError(f"window ends before it starts: start_ns={w0}, end_ns={w1}")
    return w0, w1


def _spans(start, end) -> pd.DataFrame:
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    return pd.DataFrame({"start_ns": start, "end_ns": end, "dur_ns": end - start})


def union_arrays(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the intervals ``[start, end)`` given as two arrays (:func:`union` for
    arrays, unchecked).

    Returns
    -------
    (ndarray, ndarray)
        The starts and ends of the union, sorted, disjoint and not touching (intervals
        that touch are merged; zero-length ones cover no time and are dropped), in the
        input's unit and dtype (kitlib's: integer ns). The input is not checked: give
        equal-length numeric arrays with ``end >= start`` (:func:`union` checks a table).

    Examples
    --------
    >>> import numpy as np
    >>> from kitlib.analyses.intervals import union_arrays
    >>> s, e = union_arrays(np.array([10, 0, 5, 30]), np.array([20, 5, 8, 30]))
    >>> s.tolist(), e.tolist()
    ([0, 10], [8, 20])
    """
    keep = end > start                      # zero-length intervals cover no time
    start, end = start[keep], end[keep]
    if start.size == 0:
        return start, end
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)      # furthest end seen so far
    first = np.empty(start.size, dtype=bool)
    first[0] = True
    first[1:] = start[1:] > reach[:-1]      # strictly after: touching intervals merge
    heads = np.flatnonzero(first)
    lasts = np.append(heads[1:] - 1, start.size - 1)
    return start[heads], reach[lasts]


# -- public functions ----------------------------------------------------------

def clip(df: pd.DataFrame, start: int, end: int) -> pd.DataFrame:
    """The intervals that fall in ``[start, end)``, cut to it.

    Parameters
    ----------
    df : DataFrame
        Intervals: ``start_ns`` and ``dur_ns`` (or ``end_ns``), integer ns; any other
        columns are kept.
    start, end : int
        The window, ns on the same clock.

    Returns
    -------
    DataFrame
        The rows that overlap the window (a zero-length row counts when
        ``start <= start_ns < end``), in their original order and index, with
        ``start_ns``, ``dur_ns`` and, when present, ``end_ns`` cut to the window.
        Empty (same columns) when nothing overlaps.

    Raises
    ------
    IntervalError
        Missing columns, missing or fractional times, negative durations, or
        ``end < start``.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"start_ns": [0, 50, 200], "end_ns": [100, 150, 300]})
    >>> df["dur_ns"] = df["end_ns"] - df["start_ns"]
    >>> from kitlib.analyses.intervals import clip
    >>> clip(df, 50, 250)
       start_ns  end_ns  dur_ns
    0        50     100      50
    1        50     150     100
    2       200     250      50
    """
    w0, w1 = _window((start, end))
    s, e = _bounds(df)
    cs, ce = np.maximum(s, w0), np.minimum(e, w1)
    inside = (ce > cs) | ((s == e) & (s >= w0) & (s < w1))
    out = df.loc[inside].copy()
    out["start_ns"] = cs[inside]
    out["dur_ns"] = (ce - cs)[inside]
    if "end_ns" in out.columns:
        out["end_ns"] = out["start_ns"] + out["dur_ns"]
    return out


def union(df: pd.DataFrame) -> pd.DataFrame:
    """Merge overlapping and touching intervals into disjoint ones.

    All rows are merged together, whatever their stream or device: this is the
    time during which *anything* in the table was running.

    Parameters
    ----------
    df : DataFrame
        Intervals: ``start_ns`` and ``dur_ns`` (or ``end_ns``), integer ns.

    Returns
    -------
    DataFrame
        Columns ``start_ns, end_ns, dur_ns`` (int64, ns), sorted by ``start_ns``,
        index 0..n-1. Two output rows never overlap or touch. Zero-length input
        rows cover no time and do not appear. Empty input gives an empty frame.

    Raises
    ------
    IntervalError
        Missing columns, missing or fractional times, negative durations.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"start_ns": [0, 50, 200], "end_ns": [100, 150, 300]})
    >>> df["dur_ns"] = df["end_ns"] - df["start_ns"]
    >>> from kitlib.analyses.intervals import union
    >>> union(df)
       start_ns  end_ns  dur_ns
    0         0     150     150
    1       200     300     100
    """
    return _spans(*union_arrays(*_bounds(df)))


def busy_ns(df: pd.DataFrame, window=None) -> int:
    """Total time covered by at least one interval (overlap counted once).

    Parameters
    ----------
    df : DataFrame
        Intervals: ``start_ns`` and ``dur_ns`` (or ``end_ns``), integer ns.
    window : (int, int), optional
        ``(start_ns, end_ns)``: count only the time inside this window.

    Returns
    -------
    int
        Busy time in ns; 0 for an empty table.

    Raises
    ------
    IntervalError
        Bad intervals (see :func:`union`) or a window that ends before it starts.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"start_ns": [0, 50, 200], "end_ns": [100, 150, 300]})
    >>> df["dur_ns"] = df["end_ns"] - df["start_ns"]
    >>> from kitlib.analyses.intervals import busy_ns
    >>> busy_ns(df), int(df["dur_ns"].sum())       # overlap counted once, not twice
    (250, 300)
    """
    s, e = union_arrays(*_bounds(df))
    if window is not None:
        w0, w1 = _window(window)
        s, e = np.maximum(s, w0), np.minimum(e, w1)
    return int(np.clip(e - s, 0, None).sum())


def idle_gaps(df: pd.DataFrame, window=None, min_gap_ns: int = 0) -> pd.DataFrame:
    """The gaps between busy periods: when nothing in the table was running.

    Parameters
    ----------
    df : DataFrame
        Intervals: ``start_ns`` and ``dur_ns`` (or ``end_ns``), integer ns.
    window : (int, int), optional
        ``(start_ns, end_ns)``: look only inside this window, and count the time
        from the window's start to the first interval and from the last interval
        to the window's end as gaps too (an empty table is then one gap: the
        whole window). Without a window, only gaps *between* intervals count.
    min_gap_ns : int, default 0
        Keep only gaps strictly longer than this (ns).

    Returns
    -------
    DataFrame
        Columns ``start_ns, end_ns, dur_ns`` (int64, ns), in time order, index 0..n-1.

    Raises
    ------
    IntervalError
        Bad intervals (see :func:`union`), a window that ends before it starts,
        or a negative ``min_gap_ns``.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"start_ns": [0, 50, 200], "end_ns": [100, 150, 300]})
    >>> df["dur_ns"] = df["end_ns"] - df["start_ns"]
    >>> from kitlib.analyses.intervals import idle_gaps
    >>> idle_gaps(df, (0, 400))
       start_ns  end_ns  dur_ns
    0       150     200      50
    1       300     400     100
    """
    if min_gap_ns < 0:
        raise IntervalError(f"min_gap_ns must be >= 0, got {min_gap_ns}")
    s, e = union_arrays(*_bounds(df))
    if window is None:
        gs, ge = e[:-1], s[1:]
    else:
        w0, w1 = _window(window)
        s, e = np.maximum(s, w0), np.minimum(e, w1)
        keep = e > s
        s, e = s[keep], e[keep]
        gs, ge = np.append(w0, e), np.append(s, w1)
    keep = (ge - gs) > min_gap_ns
    return _spans(gs[keep], ge[keep])


def idle_gaps_in_windows(df: pd.DataFrame, windows: pd.DataFrame, min_gap_ns: int = 0) -> pd.DataFrame:
    """:func:`idle_gaps` inside each of many windows, merging the intervals once.

    The same gaps as ``idle_gaps(df, window=(w.start_ns, w.end_ns), min_gap_ns)`` for
    every row ``w`` of ``windows``, but the busy intervals are merged a single time and
    each window reads its slice of them by binary search, so the cost grows with the
    table plus the windows, not with their product.

    Parameters
    ----------
    df : DataFrame
        Intervals: ``start_ns`` and ``dur_ns`` (or ``end_ns``), integer ns.
    windows : DataFrame
        ``start_ns``, ``end_ns`` per window (e.g. a step table); other columns are
        ignored.
    min_gap_ns : int, default 0

    Returns
    -------
    DataFrame
        ``window`` (row position in ``windows``), ``start_ns, end_ns, dur_ns`` (int64
        ns), in window then time order, index 0..n-1.

    Raises
    ------
    IntervalError
        As :func:`idle_gaps`.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"start_ns": [0, 50, 200], "end_ns": [100, 150, 300]})
    >>> df["dur_ns"] = df["end_ns"] - df["start_ns"]
    >>> from kitlib.analyses.intervals import idle_gaps_in_windows
    >>> windows = pd.DataFrame({"start_ns": [0, 200], "end_ns": [200, 400]})
    >>> idle_gaps_in_windows(df, windows)
       window  start_ns  end_ns  dur_ns
    0       0       150     200      50
    1       1       300     400     100
    """
    if min_gap_ns < 0:
        raise IntervalError(f"min_gap_ns must be >= 0, got {min_gap_ns}")
    s, e = union_arrays(*_bounds(df))
    w_start = _int_array(windows, "start_ns", "windows")
    w_end = _int_array(windows, "end_ns", "windows")
    parts_w, parts_s, parts_e = [], [], []
    for k in range(len(w_start)):
        w0, w1 = _window((w_start[k], w_end[k]))
        lo = np.searchsorted(e, w0, "right")          # first busy period ending after w0
        hi = np.searchsorted(s, w1, "left")           # busy periods starting before w1
        ss, ee = np.maximum(s[lo:hi], w0), np.minimum(e[lo:hi], w1)
        gs, ge = np.append(w0, ee), np.append(ss, w1)
        keep = (ge - gs) > min_gap_ns
        parts_w.append(np.full(int(keep.sum()), k, dtype=np.int64))
        parts_s.append(gs[keep])
        parts_e.append(ge[keep])
    cat = (lambda xs: np.concatenate(xs).astype(np.int64) if xs else np.zeros(0, dtype=np.int64))
    out = _spans(cat(parts_s), cat(parts_e))
    out.insert(0, "window", cat(parts_w))
    return out


def covered_before(start: np.ndarray, end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each time in ``t``: the summed length of the intervals' ``[start, end)`` parts
    before it (overlap counted as often as it occurs; give :func:`union_arrays`' output to
    count it once).

    For one interval, the part before ``t`` is ``(t - start) - (t - end)`` for
    the terms that are positive; with sorted starts and ends and their prefix
    sums this is two ``searchsorted`` calls, whatever the number of windows.

    Returns
    -------
    ndarray
        One length per time of ``t``, in the input's unit (kitlib's: integer ns). The
        input is not checked.

    Examples
    --------
    >>> import numpy as np
    >>> from kitlib.analyses.intervals import covered_before
    >>> covered_before(np.array([0, 10]), np.array([5, 20]), np.array([3, 12, 100])).tolist()
    [3, 7, 15]
    """
    ss, se = np.sort(start), np.sort(end)
    cs = np.concatenate([[0], np.cumsum(ss)])
    ce = np.concatenate([[0], np.cumsum(se)])
    ns = np.searchsorted(ss, t, side="left")    # starts < t
    ne = np.searchsorted(se, t, side="left")    # ends < t
    return (ns * t - cs[ns]) - (ne * t - ce[ne])


def per_window(df: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """Busy and idle time inside each of several windows (e.g. training steps).

    Parameters
    ----------
    df : DataFrame
        Intervals: ``start_ns`` and ``dur_ns`` (or ``end_ns``), integer ns
        (e.g. the GPU's kernels).
    windows : DataFrame
        One row per window: ``start_ns`` and ``end_ns`` (or ``dur_ns``), integer ns,
        on the same clock; other columns (``name``…) are kept. Windows may overlap;
        each is measured on its own.

    Returns
    -------
    DataFrame
        ``windows``' columns plus, all int64:

        - ``window_ns``: the window's length;
        - ``busy_ns``: time covered by at least one interval inside the window
          (overlap counted once);
        - ``sum_dur_ns``: the intervals' durations cut to the window and summed
          (overlap counted as often as it occurs; ``sum_dur_ns >= busy_ns``);
        - ``idle_ns``: ``window_ns - busy_ns``;
        - ``n_intervals``: intervals that overlap the window (a zero-length one
          counts when it lies in ``[start_ns, end_ns)``).

    Raises
    ------
    IntervalError
        Bad intervals or windows (missing columns, negative durations, missing or
        fractional times).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"start_ns": [0, 50, 200], "end_ns": [100, 150, 300]})
    >>> df["dur_ns"] = df["end_ns"] - df["start_ns"]
    >>> from kitlib.analyses.intervals import per_window
    >>> windows = pd.DataFrame({"start_ns": [0, 200], "end_ns": [200, 400]})
    >>> per_window(df, windows)
       start_ns  end_ns  window_ns  busy_ns  sum_dur_ns  idle_ns  n_intervals
    0         0     200        200      150         200       50            2
    1       200     400        200      100         100      100            1
    """
    w0, w1 = _bounds(windows, "windows")
    s, e = _bounds(df)
    out = windows.copy()
    if "end_ns" not in out.columns:
        out["end_ns"] = w1
    # Work relative to the earliest time: epoch-based ns (~1.8e18) would overflow
    # int64 once multiplied by a count or summed.
    both = np.concatenate([s, w0])
    origin = both.min() if both.size else 0
    s, e, w0, w1 = s - origin, e - origin, w0 - origin, w1 - origin
    us, ue = union_arrays(s, e)
    busy = covered_before(us, ue, w1) - covered_before(us, ue, w0)
    summed = covered_before(s, e, w1) - covered_before(s, e, w0)
    pos = e > s
    sp, ep = np.sort(s[pos]), np.sort(e[pos])
    zero = np.sort(s[~pos])
    n = (np.searchsorted(sp, w1, side="left") - np.searchsorted(ep, w0, side="right")
         + np.searchsorted(zero, w1, side="left") - np.searchsorted(zero, w0, side="left"))
    n = np.where(w1 > w0, n, 0)
    out["window_ns"] = (w1 - w0).astype(np.int64)
    out["busy_ns"] = busy.astype(np.int64)
    out["sum_dur_ns"] = summed.astype(np.int64)
    out["idle_ns"] = out["window_ns"] - out["busy_ns"]
    out["n_intervals"] = n.astype(np.int64)
    return out
