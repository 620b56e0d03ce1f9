"""The first ``data_load`` of a cold start, thread by thread, from an Nsight Systems report.

With ``pin_memory=True`` the DataLoader runs a thread in the training process,
``pt_data_pin``, that receives each finished batch from the worker processes and
copies it into page-locked (pinned) host memory before the main thread takes it
(PyTorch ``torch/utils/data/_utils/pin_memory.py``). The first time, PyTorch's
caching host allocator has no pinned blocks to reuse, so pinning a batch starts with
``cudaHostAlloc`` — a driver call that page-locks the whole buffer and can take tens
of ms for a batch of 128 images. This module reads, from the report's CUDA API and
OS-runtime rows, what lesson 04 teaches about that range:

- :func:`pin_thread_allocs`: the pin thread's ``cudaHostAlloc`` calls inside a window;
- :func:`main_thread_waits`: the main thread's waits (``sem_clockwait`` …) and when it
  woke, beside the pin thread's calls;
- :func:`lock_contention`: long ``pthread_mutex_lock`` calls of one thread, with the
  CUDA API call they sat in and the other thread's CUDA API call that returned when
  the lock was granted.

What the report cannot show here: the worker processes (forked without ``exec``,
so not traced unless ``nsys profile --trace-fork-before-exec=true``), and what any
thread computed between calls (CPU sampling was off).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import KitError
from ..model.window import containing


def _thread_ids(report, name: str) -> list:
    ids = report.threads.loc[report.threads["name"] == name, "tid"].tolist()
    if not ids:
        raise KitError(f"{report.path}: no thread named {name!r} (threads: "
                       f"{', '.join(sorted(set(report.threads['name'].astype(str)))[:12])}, …)")
    return ids


def pin_thread_allocs(report, start_ns: int, end_ns: int, thread: str = "pt_data_pin") -> pd.DataFrame:
    """The pin-memory thread's ``cudaHostAlloc`` calls that start inside a window.

    Parameters
    ----------
    report : kitlib.readers.nsys.NsysReport
    start_ns, end_ns : int
        The window on the report's clock (e.g. the first ``data_load`` range).
    thread : str
        The thread's name as the report gives it.

    Returns
    -------
    DataFrame, one row per call, in time order
        ``tid``, ``start_ns``, ``dur_ns``, ``end_ns`` (report clock), ``start_in_window_ns``,
        ``end_in_window_ns``, and ``large`` (True for calls of 10 ms or more: in the
        reference, the batch's image buffer; the short ones are its label buffer).

    Raises
    ------
    KitError
        The report has no such thread.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> from kitlib.analyses.pinning import pin_thread_allocs
    >>> report = open_capture("nsys_8step").nsys
    >>> first = report.nvtx[report.nvtx["name"] == "data_load"].iloc[0]
    >>> pin_thread_allocs(report, first["start_ns"], first["end_ns"])[["start_in_window_ns", "dur_ns", "large"]].head(3)
       start_in_window_ns    dur_ns  large
    0           764275464  60686072   True
    1           845342935   1233992  False
    2           858648309  55130573   True
    """
    tids = _thread_ids(report, thread)
    api = report.launches
    a = api[api["tid"].isin(tids) & (api["name"] == "cudaHostAlloc")
            & (api["start_ns"] >= start_ns) & (api["start_ns"] < end_ns)].sort_values("start_ns")
    out = a[["tid", "start_ns", "dur_ns", "end_ns"]].reset_index(drop=True)
    out["start_in_window_ns"] = out["start_ns"] - start_ns
    out["end_in_window_ns"] = out["end_ns"] - start_ns
    out["large"] = out["dur_ns"] >= 10_000_000
    return out


def main_thread_waits(report, start_ns: int, end_ns: int, tid: int,
                      calls=("sem_clockwait", "sem_timedwait", "sem_wait", "poll")) -> pd.DataFrame:
    """The waits of one thread inside a window: each OS-runtime wait call and when it returned.

    Parameters
    ----------
    report : kitlib.readers.nsys.NsysReport
    start_ns, end_ns : int
    tid : int
        The thread (the main thread: the ``data_load`` range's ``tid``).
    calls : tuple of str
        OS-runtime calls that count as waiting for another thread.

    Returns
    -------
    DataFrame, one row per wait of 1 ms or more, in time order
        ``name``, ``start_in_window_ns``, ``dur_ns``, ``woke_in_window_ns`` (its end).

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> from kitlib.analyses.pinning import main_thread_waits
    >>> report = open_capture("nsys_8step").nsys
    >>> first = report.nvtx[report.nvtx["name"] == "data_load"].iloc[0]
    >>> main_thread_waits(report, first["start_ns"], first["end_ns"], first["tid"]).head(3)
                name  start_in_window_ns     dur_ns  woke_in_window_ns
    0       sem_wait           185527264    1401690          186928954
    1  sem_clockwait           190706109  665147426          855853535
    2  sem_clockwait           856185521   83348343          939533864
    """
    o = report.osrt
    w = o[(o["tid"] == tid) & o["name"].isin(calls) & (o["start_ns"] < end_ns) & (o["end_ns"] > start_ns)
          & (o["dur_ns"] >= 1_000_000)].sort_values("start_ns")
    return pd.DataFrame({"name": w["name"].to_numpy(), "start_in_window_ns": (w["start_ns"] - start_ns).to_numpy(),
                         "dur_ns": w["dur_ns"].to_numpy(), "woke_in_window_ns": (w["end_ns"] - start_ns).to_numpy()})


def lock_contention(report, start_ns: int, end_ns: int, tid: int, min_ns: int = 1_000_000) -> pd.DataFrame:
    """Long ``pthread_mutex_lock`` calls of one thread, and who released the lock.

    For each lock wait of at least ``min_ns`` on thread ``tid`` inside the window:
    the CUDA API call of the same thread that contains it, and the CUDA API call of
    any *other* thread of the process whose end lies closest to the moment the lock
    was granted. A release within microseconds of another thread's call returning,
    with that call running the whole time, is what cross-thread contention looks like
    (the report does not name the lock: the pairing is by time). The pairing itself
    asks only that the other call started before the wait and ended before the grant
    (+ 1 ms): it also pairs a wait with a call that returned long before it, so read
    ``granted_after_other_returned_ns`` (µs for a release, ms for a coincidence) and
    ``other_start_in_window_ns`` before calling a row contention.

    Parameters
    ----------
    report : kitlib.readers.nsys.NsysReport
    start_ns, end_ns : int
    tid : int
    min_ns : int
        Shortest lock wait reported.

    Returns
    -------
    DataFrame, one row per long lock wait
        ``lock_start_in_window_ns``, ``lock_dur_ns``, ``inside_call`` (the containing
        CUDA API call, or <NA>), ``other_thread``, ``other_call``,
        ``other_start_in_window_ns``, ``other_dur_ns``, ``granted_after_other_returned_ns``
        (lock end − other call's end; small and positive for a release).

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> from kitlib.analyses.pinning import lock_contention
    >>> report = open_capture("nsys_8step").nsys
    >>> first = report.nvtx[report.nvtx["name"] == "data_load"].iloc[0]
    >>> lock_contention(report, first["start_ns"], first["end_ns"], first["tid"]).T
                                                   0
    lock_start_in_window_ns               1405266099
    lock_dur_ns                             64028555
    inside_call                      cudaMemcpyAsync
    other_thread                         pt_data_pin
    other_call                         cudaHostAlloc
    other_start_in_window_ns              1405144666
    other_dur_ns                            64132986
    granted_after_other_returned_ns            17002
    """
    o = report.osrt
    locks = o[(o["tid"] == tid) & (o["name"] == "pthread_mutex_lock") & (o["start_ns"] >= start_ns)
              & (o["start_ns"] < end_ns) & (o["dur_ns"] >= min_ns)].sort_values("start_ns")
    api = report.launches
    pid = report.threads.loc[report.threads["tid"] == tid, "pid"]
    others = api[(api["tid"] != tid) & (api["pid"].isin(pid.tolist() or [tid]))]
    names = report.threads.set_index("tid")["name"]
    rows = []
    for lk in locks.itertuples():
        own = api[(api["tid"] == tid) & (api["start_ns"] <= lk.start_ns) & (api["end_ns"] >= lk.end_ns)]
        cand = others[(others["start_ns"] <= lk.start_ns) & (others["end_ns"] <= lk.end_ns + 1_000_000)]
        if len(cand):
            j = (lk.end_ns - cand["end_ns"]).abs().idxmin()
            oc = cand.loc[j]
            other = (names.get(oc["tid"], str(oc["tid"])), oc["name"], int(oc["start_ns"] - start_ns),
                     int(oc["dur_ns"]), int(lk.end_ns - oc["end_ns"]))
        else:
            other = (pd.NA, pd.NA, pd.NA, pd.NA, pd.NA)
        rows.append((int(lk.start_ns - start_ns), int(lk.dur_ns), own["name"].iloc[0] if len(own) else pd.NA) + other)
    return pd.DataFrame(rows, columns=["lock_start_in_window_ns", "lock_dur_ns", "inside_call", "other_thread",
                                       "other_call", "other_start_in_window_ns", "other_dur_ns",
                                       "granted_after_other_returned_ns"])


def wakes_after_pinning(waits: pd.DataFrame, allocs: pd.DataFrame) -> pd.DataFrame:
    """Each wake-up of the main thread beside the pin thread's last large allocation before it.

    Parameters
    ----------
    waits : DataFrame
        :func:`main_thread_waits`.
    allocs : DataFrame
        :func:`pin_thread_allocs` of the same window.

    Returns
    -------
    DataFrame, one row per wake-up after the pin thread's first allocation
        ``woke_in_window_ns``, ``pinning_cycle`` (1, 2, …: how many large allocations
        had begun by then) and ``since_cycle_start_ns`` (wake-up − that allocation's start).

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> from kitlib.analyses.pinning import main_thread_waits, pin_thread_allocs, wakes_after_pinning
    >>> report = open_capture("nsys_8step").nsys
    >>> first = report.nvtx[report.nvtx["name"] == "data_load"].iloc[0]
    >>> window = first["start_ns"], first["end_ns"]
    >>> wakes_after_pinning(main_thread_waits(report, *window, first["tid"]),
    ...                     pin_thread_allocs(report, *window)).head(3)
       woke_in_window_ns  pinning_cycle  since_cycle_start_ns
    0          855853535              1              91578071
    1          939533864              2              80885555
    2         1017116429              3              75116026
    """
    big = allocs.loc[allocs["large"], "start_in_window_ns"].to_numpy()
    woke = waits["woke_in_window_ns"].to_numpy()
    if len(big) == 0:
        return pd.DataFrame(columns=["woke_in_window_ns", "pinning_cycle", "since_cycle_start_ns"])
    woke = woke[woke > big[0]]
    # cycle k runs from the k-th large allocation's start to the next one's, [start, end)
    # (kitlib.model.window; the last runs on): a wake-up at a later allocation's very
    # start is in the cycle that allocation opens
    cycle = containing(big, np.r_[big[1:], np.iinfo(np.int64).max], woke, closed="left") + 1
    return pd.DataFrame({"woke_in_window_ns": woke, "pinning_cycle": cycle,
                         "since_cycle_start_ns": woke - big[cycle - 1]})
