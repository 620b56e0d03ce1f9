"""Intervals on one clock: how long was something busy, and where were the gaps?

``df`` is a table of intervals with integer-ns ``start_ns`` and ``dur_ns`` (or ``end_ns``),
such as ``Trace.gpu``; other columns are ignored. An interval covers ``[start_ns, start_ns +
dur_ns)``: touching intervals leave no gap; overlap counts once (two streams' kernels at once:
their *union*). Windows are ``(start_ns, end_ns)`` on the same clock. :class:`IntervalError`
for missing columns, missing or fractional times, negative durations, or a window ending
before it starts; :func:`union_arrays` and :func:`covered_before` take arrays, unchecked.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import KitError

__all__ = ["IntervalError", "clip", "union", "union_arrays", "covered_before", "busy_ns", "idle_gaps", "per_window"]

_SPAN_COLUMNS = ["start_ns", "end_ns", "dur_ns"]


class IntervalError(KitError, ValueError):
    """A table of intervals or windows is not usable; also a ValueError.

    Examples
    --------
    >>> busy_ns(pd.DataFrame({"start_ns": [10], "end_ns": [5]}))
    Traceback (most recent call last):
    ...
    kitlib.analyses.intervals.IntervalError: intervals: 1 row(s) have a negative duration, the first at row 0 ...
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
    """The union of the intervals ``[start, end)`` given as two arrays (:func:`union`,
    unchecked): sorted, disjoint, non-touching ``(starts, ends)``, zero-length ones dropped.

    Examples
    --------
    >>> union_arrays(np.array([10, 0, 5, 30]), np.array([20, 5, 8, 30]))
    (array([ 0, 10]), array([ 8, 20]))
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
    """The rows of ``df`` that overlap ``[start, end)`` (a zero-length row when
    ``start <= start_ns < end``), in their order and index, their times cut to the window.

    Examples
    --------
    >>> clip(pd.DataFrame({"start_ns": [0, 200], "end_ns": [100, 300], "dur_ns": 100}), 50, 250)
       start_ns  end_ns  dur_ns
    0        50     100      50
    1       200     250      50
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
    """Merge overlapping and touching intervals (all rows, whatever their stream) into disjoint
    ones: ``start_ns, end_ns, dur_ns`` (int64 ns), sorted, index 0..n-1; zero-length rows vanish.

    Examples
    --------
    >>> df = pd.DataFrame({"start_ns": [0, 50, 200], "dur_ns": [100, 100, 100]})
    >>> union(df)
       start_ns  end_ns  dur_ns
    0         0     150     150
    1       200     300     100
    """
    return _spans(*union_arrays(*_bounds(df)))


def busy_ns(df: pd.DataFrame, window=None) -> int:
    """Total time (int ns) covered by at least one interval, inside ``window`` when given.

    Examples
    --------
    >>> df = pd.DataFrame({"start_ns": [0, 50, 200], "dur_ns": [100, 100, 100]})
    >>> busy_ns(df), int(df["dur_ns"].sum())       # overlap counted once, not twice
    (250, 300)
    """
    s, e = union_arrays(*_bounds(df))
    if window is not None:
        w0, w1 = _window(window)
        s, e = np.maximum(s, w0), np.minimum(e, w1)
    return int(np.clip(e - s, 0, None).sum())


def idle_gaps(df: pd.DataFrame, window=None, min_gap_ns: int = 0) -> pd.DataFrame:
    """The gaps longer than ``min_gap_ns`` between busy periods: ``start_ns, end_ns, dur_ns``
    (int64 ns) in time order. With a ``window``, the time from its start to the first
    interval and from the last to its end are gaps too (an empty table is one gap).
    Raises IntervalError also for a negative ``min_gap_ns``.

    Examples
    --------
    >>> df = pd.DataFrame({"start_ns": [0, 50, 200], "dur_ns": [100, 100, 100]})
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
    """:func:`idle_gaps` inside each row of ``windows`` (``start_ns, end_ns``), the intervals
    merged once: ``window`` (row position), ``start_ns, end_ns, dur_ns``, in window then time order.

    Examples
    --------
    >>> df = pd.DataFrame({"start_ns": [0, 200], "dur_ns": [100, 100]})
    >>> idle_gaps_in_windows(df, pd.DataFrame({"start_ns": [0, 200], "end_ns": [200, 400]}))
       window  start_ns  end_ns  dur_ns
    0       0       100     200     100
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
    """For each time in ``t``, the summed length of the ``[start, end)`` parts before it
    (overlap counted as often as it occurs; pass :func:`union_arrays`' output to count it
    once), by prefix sums and two ``searchsorted``. Unchecked.

    Examples
    --------
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
    """Busy and idle time inside each of ``windows`` (``start_ns`` and ``end_ns`` or
    ``dur_ns``; may overlap; other columns kept).

    Adds, int64 ns: ``window_ns``; ``busy_ns`` (overlap counted once); ``sum_dur_ns``
    (durations cut to the window, overlap counted as often as it occurs); ``idle_ns``
    (``window_ns - busy_ns``); ``n_intervals`` (overlapping the window; a zero-length one
    when inside ``[start_ns, end_ns)``).

    Examples
    --------
    >>> df = pd.DataFrame({"start_ns": [0, 50, 200], "dur_ns": [100, 100, 100]})
    >>> per_window(df, pd.DataFrame({"start_ns": [0, 200], "end_ns": [200, 400]}))
       start_ns  end_ns  window_ns  busy_ns  sum_dur_ns  idle_ns  n_intervals
    0         0     200        200      150         200       50            2
    1       200     400        200      100         100      100            1
    """
    w0, w1 = _bounds(windows, "windows")
    s, e = _bounds(df)
    out = windows.copy()
    if "end_ns" not in out.columns:
        out["end_ns"] = w1
    # relative to the earliest time: epoch ns (~1.8e18) times a count would overflow int64
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
