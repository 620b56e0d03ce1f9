"""Why does the GPU sit idle before the first step? The cold-start ``data_load`` gap.

Sources: docs/SOURCES.md#coldstart-module

``source`` is a Trace or NsysReport, ``report`` an NsysReport; ``label`` names the
data-loading range (default ``data_load``). Times are int64 ns. A recording without steps
or without the range raises KitError naming its file."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import KitError, KitFileError
from ..phases import DATA_LOAD, FORWARD
from ..units import ms_to_ns
from .intervals import clip
from ..model import NsysReport
from .steps import check_source, labelled_ranges, steps_of

__all__ = ["read_wallclock", "data_load_ranges", "batch_copies", "gap_activity", "traced_processes",
           "cold_start_figures", "step_time_stats", "epoch_positions", "loader_epoch_length",
           "slowest_step_position"]


# --------------------------------------------------------------------------- ranges and clocks
def read_wallclock(doc, path="wallclock.json") -> pd.DataFrame:
    """The wall-clock stamps of the reference cold start, one row per step.

    ``doc`` is the parsed ``wallclock.json``: ``t0_ns``, ``end_ns`` and ``steps``, a list of
    ``{next_start_ns, next_end_ns, step_submitted_ns}`` (``perf_counter_ns``); ``path`` is
    named in errors (KitFileError: a field missing or not an integer).

    Returns ``step`` (0…), ``next_start_ns``, ``next_end_ns``, ``next_ns`` (``next()``'s time),
    ``step_submitted_ns``, ``submit_ns`` (``next()``'s start to GPU work submitted),
    ``since_t0_ns`` (``next()``'s start since ``t0_ns``).

    Examples
    --------
    >>> doc = {"t0_ns": 0, "end_ns": 900, "steps": [
    ...     {"next_start_ns": 0, "next_end_ns": 500, "step_submitted_ns": 600},
    ...     {"next_start_ns": 700, "next_end_ns": 720, "step_submitted_ns": 800}]}
    >>> read_wallclock(doc)[["step", "next_ns", "submit_ns", "since_t0_ns"]]
       step  next_ns  submit_ns  since_t0_ns
    0     0      500        600            0
    1     1       20        100          700
    """
    try:
        t0 = int(doc["t0_ns"])
        st = pd.DataFrame(doc["steps"])[["next_start_ns", "next_end_ns", "step_submitted_ns"]]
        st = st.astype("int64")
    except (KeyError, TypeError, ValueError) as e:
        raise KitFileError(path, f"not a cold-start wallclock file: needs t0_ns and steps with next_start_ns, "
                                 f"next_end_ns, step_submitted_ns (integers) ({type(e).__name__}: {e})") from None
    st.insert(0, "step", np.arange(len(st)))
    st["next_ns"] = st["next_end_ns"] - st["next_start_ns"]
    st["submit_ns"] = st["step_submitted_ns"] - st["next_start_ns"]
    st["since_t0_ns"] = st["next_start_ns"] - t0
    return st


def data_load_ranges(source, label: str = DATA_LOAD) -> pd.DataFrame:
    """The ``data_load`` range of each step that has one.

    Returns ``step``, ``step_start_ns``, ``start_ns``, ``end_ns``, ``dur_ns``,
    ``start_in_step_ns``, ``end_in_step_ns`` (since the step's start).

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> data_load_ranges(open_capture("cold_start_8step").trace)[["step", "dur_ns"]].head(2)
       step      dur_ns
    0     0  1523361537
    1     1      200233
    """
    steps = steps_of(source)
    lab = labelled_ranges(source)
    lab = lab[lab["name"] == label]
    rows = []
    for s in steps.itertuples():
        r = lab[(lab["tid"] == s.tid) & (lab["start_ns"] >= s.start_ns) & (lab["end_ns"] <= s.end_ns)]
        if len(r):
            r = r.iloc[0]
            rows.append({"step": s.step, "step_start_ns": s.start_ns, "start_ns": int(r["start_ns"]),
                         "end_ns": int(r["end_ns"]), "dur_ns": int(r["dur_ns"]),
                         "start_in_step_ns": int(r["start_ns"]) - s.start_ns,
                         "end_in_step_ns": int(r["end_ns"]) - s.start_ns})
    if not rows:
        raise KitError(f"{source.path}: no '{label}' range inside any step")
    return pd.DataFrame(rows)


def _h2d_copies(source) -> pd.DataFrame:
    """Host-to-device copies with their launch's start and thread."""
    ev = source.gpu_events()
    ev = ev[ev["copy_kind"] == "HtoD"]
    out = pd.DataFrame({"start_ns": ev["start_ns"].astype("int64"), "end_ns": ev["end_ns"].astype("int64"),
                        "dur_ns": ev["dur_ns"].astype("int64"), "bytes": ev["bytes"].astype("Int64"),
                        "launch_start_ns": ev["launch_start_ns"].astype("Int64"),
                        "launch_tid": ev["tid"].astype("Int64")})
    return out.reset_index(drop=True)


def batch_copies(source, label: str = DATA_LOAD, next_label: str = FORWARD) -> pd.DataFrame:
    """When each step's batch reached the device, relative to the end of its ``data_load`` range.

    Sources: docs/SOURCES.md#coldstart-batch-copies

    ``next_label`` is the first range after the transfer. KitError also for a step without
    host-to-device copies, or whose copies carry no byte count.

    Returns per step: ``range_end_in_step_ns``; ``copies``; ``images_bytes`` (the largest copy);
    ``copy_launched_in_range``; ``images_end_in_step_ns``, ``batch_end_in_step_ns`` (end of the
    images', of the last copy); ``images_end_after_range_ns``, ``batch_end_after_range_ns`` (ns).

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> batch_copies(open_capture("nsys_8step").nsys)[["step", "copies", "images_bytes", "batch_end_after_range_ns"]].head(3)
       step  copies  images_bytes  batch_end_after_range_ns
    0     0       2      77070336                   -116850
    1     1       2      77070336                   1336030
    2     2       2      77070336                   1326331
    """
    check_source(source)
    dl = data_load_ranges(source, label)
    steps = steps_of(source).set_index("step")
    lab = labelled_ranges(source)
    cp = _h2d_copies(source)
    rows = []
    for d in dl.itertuples():
        s = steps.loc[d.step]
        nxt = lab[(lab["name"] == next_label) & (lab["tid"] == s["tid"]) & (lab["start_ns"] >= d.end_ns)
                  & (lab["start_ns"] < s["end_ns"])]                      # [start, end): kitlib.model.window
        stop = int(nxt["start_ns"].min()) if len(nxt) else int(s["end_ns"])
        mine = cp[(cp["launch_start_ns"] >= s["start_ns"]) & (cp["launch_start_ns"] < stop)
                  & (cp["launch_tid"] == s["tid"])]
        if mine.empty:
            raise KitError(f"{source.path}: step {d.step} has no host-to-device copy launched before "
                           f"its '{next_label}' range")
        if mine["bytes"].isna().all():
            raise KitError(f"{source.path}: step {d.step}'s host-to-device copies carry no byte count "
                           f"(the trace's memcpy events have no 'bytes'), so the image copy cannot be told "
                           f"from the others")
        img = mine.loc[mine["bytes"].fillna(0).astype("int64").idxmax()]
        last = int(mine["end_ns"].max())
        rows.append({"step": d.step, "range_end_in_step_ns": d.end_in_step_ns, "copies": len(mine),
                     "images_bytes": int(img["bytes"]),
                     "copy_launched_in_range": bool(d.start_ns <= img["launch_start_ns"] < d.end_ns),
                     "images_end_in_step_ns": int(img["end_ns"]) - d.step_start_ns,
                     "batch_end_in_step_ns": last - d.step_start_ns,
                     "images_end_after_range_ns": int(img["end_ns"]) - d.end_ns,
                     "batch_end_after_range_ns": last - d.end_ns})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- what the threads did
def gap_activity(report, start_ns: int, end_ns: int) -> pd.DataFrame:
    """What the OS-runtime and CUDA-API rows say each thread did in ``[start_ns, end_ns]``.

    Sources: docs/SOURCES.md#coldstart-gap-activity

    Returns per (thread, source, call), by thread then ``in_window_ns`` descending: ``pid``,
    ``tid``, ``thread``, ``source`` (``OS runtime``/``CUDA API``), ``call``, ``calls``,
    ``in_window_ns`` (cut to the window), ``longest_ns`` (uncut).

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> report = open_capture("nsys_8step").nsys
    >>> first = report.nvtx[report.nvtx["name"] == "data_load"].iloc[0]
    >>> gap_activity(report, first["start_ns"], first["end_ns"])[["thread", "source", "call", "calls"]].head(3)
        thread      source             call  calls
    0  python3  OS runtime    sem_clockwait      8
    1  python3  OS runtime             fork      8
    2  python3    CUDA API  cudaMemcpyAsync      2
    """
    check_source(report, kinds=NsysReport, message="gap_activity needs an NsysReport (load_nsys), got {got}")
    if end_ns < start_ns:
        raise KitError(f"window ends before it starts: {start_ns} > {end_ns}")
    names = report.threads.drop_duplicates(["pid", "tid"]).set_index(["pid", "tid"])["name"]
    parts = []
    for src, tab in (("OS runtime", report.osrt), ("CUDA API", report.launches)):
        t = tab[["name", "pid", "tid", "start_ns", "dur_ns"]].dropna().astype(
            {"start_ns": "int64", "dur_ns": "int64"})
        c = clip(t, int(start_ns), int(end_ns))
        if c.empty:
            continue
        c = c.assign(source=src, longest=t.loc[c.index, "dur_ns"])
        parts.append(c)
    cols = ["pid", "tid", "thread", "source", "call", "calls", "in_window_ns", "longest_ns"]
    if not parts:
        return pd.DataFrame(columns=cols)
    a = pd.concat(parts, ignore_index=True)
    g = a.groupby(["pid", "tid", "source", "name"]).agg(calls=("dur_ns", "size"), in_window_ns=("dur_ns", "sum"),
                                                        longest_ns=("longest", "max")).reset_index()
    g = g.rename(columns={"name": "call"})
    g["thread"] = [names.get((p, t), "?") for p, t in zip(g["pid"], g["tid"])]
    g = g.sort_values(["pid", "tid", "in_window_ns"], ascending=[True, True, False])
    return g[cols].astype({"in_window_ns": "int64", "longest_ns": "int64"}).reset_index(drop=True)


def traced_processes(report) -> pd.DataFrame:
    """Which processes of a report have OS-runtime or CUDA-API rows (a worker with none was not traced).

    Returns per process name: ``process``, ``processes``, ``threads``, ``osrt_rows``,
    ``cuda_api_rows``, ``nvtx_ranges``.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> traced_processes(open_capture("nsys_8step").nsys)[["process", "processes", "osrt_rows", "cuda_api_rows"]].head(2)
              process  processes  osrt_rows  cuda_api_rows
    0         python3          1       2392          12084
    1  pt_data_worker          8          0              0
    """
    th = report.threads
    # rows per pid, counted once per table (a process name's rows are the sum over its pids)
    per_pid = {col: table["pid"].value_counts().to_dict() for col, table in
               (("osrt_rows", report.osrt), ("cuda_api_rows", report.launches), ("nvtx_ranges", report.nvtx))}
    rows = []
    for name, g in th.groupby("process", dropna=False):
        pids = set(g["pid"])
        rows.append({"process": name, "processes": len(pids), "threads": len(g),
                     **{col: int(sum(counts.get(pid, 0) for pid in pids)) for col, counts in per_pid.items()}})
    cols = ["process", "processes", "threads", "osrt_rows", "cuda_api_rows", "nvtx_ranges"]
    return pd.DataFrame(rows, columns=cols).sort_values(["osrt_rows", "processes"], ascending=False) \
        .reset_index(drop=True)


def cold_start_figures(report=None, trace=None, wallclock: pd.DataFrame | None = None,
                       b300: dict | None = None) -> pd.DataFrame:
    """The first step's data loading, measured three ways, beside the B300 source figures.

    ``report`` (``nsys_8step``) and ``trace`` (``cold_start_8step``) have ``data_load`` ranges;
    ``wallclock`` is from :func:`read_wallclock`; ``b300`` is :data:`kitlib.course.sources.B300`
    (without it ``b300_ns`` is <NA>).

    Returns ``measure``, ``value_ns`` (this machine's), ``b300_ns`` (the sources', or <NA>), ``tool``.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> cold_start_figures(report=open_capture("nsys_8step").nsys)[["measure", "value_ns"]]
                                             measure    value_ns
    0            first data_load range (Nsight NVTX)  1469484230
    1  end of first data_load since torch_step start  1469486714
    2         batch copy end minus range end, step 0     -116850
    """
    def src_ns(*keys):
        if not b300:
            return pd.NA
        ms = b300[keys[0]] - (b300[keys[1]] if len(keys) > 1 else 0)
        return ms_to_ns(ms)

    rows = []
    if report is not None:
        d = data_load_ranges(report).iloc[0]
        rows.append(("first data_load range (Nsight NVTX)", int(d["dur_ns"]),
                     src_ns("first_data_load_ms"), "Nsight Systems"))
        rows.append(("end of first data_load since torch_step start", int(d["end_in_step_ns"]),
                     src_ns("first_data_load_end_ms"), "Nsight Systems"))
        bc = batch_copies(report).iloc[0]
        rows.append(("batch copy end minus range end, step 0", int(bc["batch_end_after_range_ns"]),
                     src_ns("first_h2d_copy_end_ms", "first_data_load_end_ms"), "Nsight Systems"))
    if wallclock is not None:
        rows.append(("first next() (wall clock, perf_counter_ns)", int(wallclock["next_ns"].iloc[0]), pd.NA,
                     "perf_counter_ns"))
    if trace is not None:
        d = data_load_ranges(trace).iloc[0]
        rows.append(("first data_load range (torch.profiler annotation)", int(d["dur_ns"]), pd.NA,
                     "torch.profiler"))
    out = pd.DataFrame(rows, columns=["measure", "value_ns", "b300_ns", "tool"])
    out["b300_ns"] = out["b300_ns"].astype("Int64")
    return out


# --------------------------------------------------------------------------- step times
def step_time_stats(series: dict, outlier_factor: float = 2.0) -> pd.DataFrame:
    """Summary of repeated step times (``series``: name -> step times in ms), with their spread.

    A step above ``outlier_factor`` × the median is an outlier. KitError: an empty series or a
    non-numeric value.

    Returns per series: ``n``, ``median_ms``, ``p25_ms``, ``p75_ms``, ``iqr_ms``, ``min_ms``,
    ``max_ms``, ``mean_ms`` (ms), ``outliers`` (count), ``max_over_median``.

    Examples
    --------
    >>> step_time_stats({"plain": [10.0, 10.5, 9.5, 30.0]})[["n", "median_ms", "iqr_ms", "outliers", "max_over_median"]]
           n  median_ms  iqr_ms  outliers  max_over_median
    plain  4      10.25     5.5         1         2.926829
    """
    rows = {}
    for name, vals in series.items():
        try:
            v = np.asarray(list(vals), dtype="float64")
        except (TypeError, ValueError):
            raise KitError(f"step times {name!r}: not a list of numbers") from None
        if v.size == 0 or not np.all(np.isfinite(v)):
            raise KitError(f"step times {name!r}: empty or holds NaN/inf")
        med = float(np.median(v))
        p25, p75 = np.percentile(v, [25, 75])
        rows[name] = {"n": int(v.size), "median_ms": med, "p25_ms": p25, "p75_ms": p75, "iqr_ms": p75 - p25,
                      "min_ms": v.min(), "max_ms": v.max(), "mean_ms": v.mean(),
                      "outliers": int((v > outlier_factor * med).sum()), "max_over_median": v.max() / med}
    return pd.DataFrame(rows).T.astype({"n": int, "outliers": int})


def epoch_positions(first_batch: int, n_steps: int, batches_per_epoch: int) -> pd.DataFrame:
    """Which loader batch each of ``n_steps`` steps consumed, and where in its epoch.

    ``first_batch``: batches handed out before the first step (0 for a fresh loader);
    ``batches_per_epoch``: ``len(loader)`` (14 in the reference).

    Returns ``step_index``, ``batch`` (since the loader was made), ``epoch``, ``batch_in_epoch``,
    ``epoch_start`` (it began an epoch after the first: workers restarted).

    Examples
    --------
    >>> epoch_positions(first_batch=2, n_steps=4, batches_per_epoch=3)
       step_index  batch  epoch  batch_in_epoch  epoch_start
    0           0      2      0               2        False
    1           1      3      1               0         True
    2           2      4      1               1        False
    3           3      5      1               2        False
    """
    if first_batch < 0 or n_steps < 0 or batches_per_epoch < 1:
        raise KitError("epoch_positions: need first_batch >= 0, n_steps >= 0, batches_per_epoch >= 1")
    b = first_batch + np.arange(n_steps)
    return pd.DataFrame({"step_index": np.arange(n_steps), "batch": b, "epoch": b // batches_per_epoch,
                         "batch_in_epoch": b % batches_per_epoch,
                         "epoch_start": (b % batches_per_epoch == 0) & (b > 0)})


def loader_epoch_length(capture) -> int:
    """Batches per loader epoch (``len(loader)``) of the workload a capture ran.

    From a Capture's manifest (``batch_size``, ``drop_last``, and the image count in
    ``dataset``), or a WorkloadConfig's own ``batches_per_epoch()``. KitError: no batch size
    or image count.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> loader_epoch_length(SimpleNamespace(workload={"batch_size": 128, "dataset": "synthetic: 1,792 JPEGs"}))
    14
    """
    import re
    if hasattr(capture, "batches_per_epoch"):       # a WorkloadConfig knows its own dataset
        return int(capture.batches_per_epoch())
    w = capture.workload or {}
    m = re.search(r"(\d[\d,]*)\s+(?:JPEGs|images)", str(w.get("dataset", "")))
    if m is None or not w.get("batch_size"):
        raise KitError(f"{getattr(capture, 'name', 'capture')}: manifest workload has no image count in 'dataset' "
                       f"({w.get('dataset')!r}) or no 'batch_size'")
    n, b = int(m.group(1).replace(",", "")), int(w["batch_size"])
    return n // b if w.get("drop_last", True) else -(-n // b)


def slowest_step_position(series_ms, first_batch: int, batches_per_epoch: int) -> dict:
    """Where in the loader's epochs the slowest of ``series_ms`` fell.

    Returns a dict: ``step_index``, ``step_ms``, ``median_ms``, ``epoch``, ``batch_in_epoch``,
    ``epoch_start`` (as :func:`epoch_positions`).

    Examples
    --------
    >>> slowest_step_position([50.0, 51.0, 90.0, 50.5], first_batch=1, batches_per_epoch=3)
    {'step_index': 2, 'step_ms': 90.0, 'median_ms': 50.75,
     'epoch': 1, 'batch_in_epoch': 0, 'epoch_start': True}
    """
    v = np.asarray(list(series_ms), dtype=float)
    pos = epoch_positions(first_batch, len(v), batches_per_epoch)
    i = int(v.argmax())
    r = pos.iloc[i]
    return {"step_index": i, "step_ms": float(v[i]), "median_ms": float(np.median(v)), "epoch": int(r["epoch"]),
            "batch_in_epoch": int(r["batch_in_epoch"]), "epoch_start": bool(r["epoch_start"])}
