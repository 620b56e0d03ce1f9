"""The first ``data_load`` of a cold start, thread by thread, from an Nsight Systems report.

With ``pin_memory=True`` the DataLoader's ``pt_data_pin`` thread copies each batch into
page-locked memory; the first time, that starts with a slow ``cudaHostAlloc``. ``report`` is
an :class:`~kitlib.model.nsys.NsysReport`, ``start_ns, end_ns`` a window on its clock (e.g.
the first ``data_load``); ``*_in_window_ns`` columns are ns since the window's start.

Sources: docs/SOURCES.md#pinning-cold-start
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
    """The ``thread``'s ``cudaHostAlloc`` calls that start inside the window, in time order:
    ``tid, start_ns, dur_ns, end_ns, start_in_window_ns, end_in_window_ns``, ``large``
    (10 ms or more). Raises KitError when the report has no such thread.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
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
    """The waits (OS-runtime ``calls``) of 1 ms or more of thread ``tid`` inside the window, in
    time order: ``name, start_in_window_ns, dur_ns, woke_in_window_ns`` (its end).

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> report = open_capture("nsys_8step").nsys
    >>> first = report.nvtx[report.nvtx["name"] == "data_load"].iloc[0]
    >>> main_thread_waits(report, first["start_ns"], first["end_ns"], first["tid"]).head(2)
                name  start_in_window_ns     dur_ns  woke_in_window_ns
    0       sem_wait           185527264    1401690          186928954
    1  sem_clockwait           190706109  665147426          855853535
    """
    o = report.osrt
    w = o[(o["tid"] == tid) & o["name"].isin(calls) & (o["start_ns"] < end_ns) & (o["end_ns"] > start_ns)
          & (o["dur_ns"] >= 1_000_000)].sort_values("start_ns")
    return pd.DataFrame({"name": w["name"].to_numpy(), "start_in_window_ns": (w["start_ns"] - start_ns).to_numpy(),
                         "dur_ns": w["dur_ns"].to_numpy(), "woke_in_window_ns": (w["end_ns"] - start_ns).to_numpy()})


def lock_contention(report, start_ns: int, end_ns: int, tid: int, min_ns: int = 1_000_000) -> pd.DataFrame:
    """Long (``min_ns`` or more) ``pthread_mutex_lock`` calls of thread ``tid`` in the window,
    each with the CUDA API call of the same thread containing it and the other thread's call
    whose end lies closest to the grant (started before the wait, ended before the grant
    + 1 ms: check ``granted_after_other_returned_ns`` before calling it contention).

    Returns ``lock_start_in_window_ns, lock_dur_ns, inside_call`` (or <NA>),
    ``other_thread, other_call, other_start_in_window_ns, other_dur_ns,
    granted_after_other_returned_ns`` (lock end − other call's end).

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> report = open_capture("nsys_8step").nsys
    >>> first = report.nvtx[report.nvtx["name"] == "data_load"].iloc[0]
    >>> lock_contention(report, first["start_ns"], first["end_ns"], first["tid"])[
    ...     ["inside_call", "other_thread", "other_call"]]
           inside_call other_thread     other_call
    0  cudaMemcpyAsync  pt_data_pin  cudaHostAlloc
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
    """Each wake-up of :func:`main_thread_waits` after the first large allocation of
    :func:`pin_thread_allocs`: ``woke_in_window_ns``, ``pinning_cycle`` (how many large
    allocations had begun, 1, 2, …), ``since_cycle_start_ns``.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> report = open_capture("nsys_8step").nsys
    >>> first = report.nvtx[report.nvtx["name"] == "data_load"].iloc[0]
    >>> window = first["start_ns"], first["end_ns"]
    >>> wakes_after_pinning(main_thread_waits(report, *window, first["tid"]),
    ...                     pin_thread_allocs(report, *window)).head(2)
       woke_in_window_ns  pinning_cycle  since_cycle_start_ns
    0          855853535              1              91578071
    1          939533864              2              80885555
    """
    big = allocs.loc[allocs["large"], "start_in_window_ns"].to_numpy()
    woke = waits["woke_in_window_ns"].to_numpy()
    if len(big) == 0:
        return pd.DataFrame(columns=["woke_in_window_ns", "pinning_cycle", "since_cycle_start_ns"])
    woke = woke[woke > big[0]]
    # cycle k: [k-th large allocation's start, the next one's), the last runs on
    cycle = containing(big, np.r_[big[1:], np.iinfo(np.int64).max], woke, closed="left") + 1
    return pd.DataFrame({"woke_in_window_ns": woke, "pinning_cycle": cycle,
                         "since_cycle_start_ns": woke - big[cycle - 1]})
