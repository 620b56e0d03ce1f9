"""Training steps in a trace or an Nsight report, and what each step took.

Sources: docs/SOURCES.md#steps-module

``source`` is a Trace or NsysReport (KitError, naming its file, for anything else or one
without steps). Times are int64 ns on the source's clock."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import KitError
from .intervals import idle_gaps_in_windows, per_window
from ..phases import LABELS, STEP_RANGE
from ..model.sources import check_source  # noqa: F401  (its home is the model)
from ..progress import analysis_progress
from ..model.window import bounds_in, count_in, value_at

#: The phase labels of :func:`kitlib.capture.workload.train_step` (:data:`kitlib.phases.LABELS`).
PHASES = LABELS


def steps_of(source) -> pd.DataFrame:
    """The steps of a source: the one step table every analysis uses.

    ``ProfilerStep#N``, else ``torch_step#N`` annotations (Trace); ``torch_step`` NVTX ranges
    (NsysReport). Columns ``step, name, pid, tid, start_ns, end_ns, dur_ns``.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> steps_of(tr)[["step", "name", "start_ns", "end_ns"]]
       step            name  start_ns  end_ns
    0     1  ProfilerStep#1         0    1000
    """
    check_source(source)
    st = source.steps
    if st.empty:
        hint = ""
        defects = getattr(source, "defects", None)
        if defects is not None and len(defects) and defects["table"].astype(str).str.contains("nvtx", case=False).any():
            hint = ("; the export's NVTX table has defects that left ranges out (see the report's "
                    "'defects' table)")
        raise KitError(f"{source.path}: no steps found (looked for ProfilerStep#N, {STEP_RANGE}#N "
                       f"annotations and '{STEP_RANGE}' NVTX ranges){hint}")
    return st


def active_steps(values, schedule: dict | None):
    """The one rule for cutting a capture's per-step ``values`` to the profiler's active steps.

    Sources: docs/SOURCES.md#steps-active-steps

    ``schedule`` is ``{"wait": W, "warmup": U, "active": A}`` (a manifest's ``recipe.schedule``)
    or None. Returns the last ``A`` values when there are exactly ``W + U + A``, else
    ``values`` unchanged (no schedule, or a series already cut).

    Examples
    --------
    >>> active_steps([90.0, 60.0, 51.0, 50.0, 52.0], {"wait": 1, "warmup": 1, "active": 3})
    [51.0, 50.0, 52.0]
    """
    values = list(values)
    if not schedule:
        return values
    skip = int(schedule.get("wait", 0)) + int(schedule.get("warmup", 0))
    active = int(schedule.get("active", 0))
    if active and len(values) == skip + active:
        return values[skip:]
    return values


def active_step_times(capture, series: dict | None = None) -> dict:
    """Step times in ms per series (default ``capture.step_times()``), the profiled ones cut by :func:`active_steps`.

    Sources: docs/SOURCES.md#steps-active-step-times

    ``capture`` gives ``recipe.schedule``; None (live series, already active-only) cuts nothing.
    KitError without ``capture`` or ``series``.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> {k: len(v) for k, v in active_step_times(open_capture("profiler_5step")).items()}
    {'step_ms_uninstrumented': 10, 'step_ms_fixed_batch': 10, 'step_ms_profiled_all_attribution': 5}
    """
    if series is None:
        if capture is None:
            raise KitError("active_step_times: need a capture or a series")
        series = capture.step_times()
    sched = (capture.recipe or {}).get("schedule") if capture is not None else None
    return {k: active_steps(v, sched) if k.startswith("step_ms_profile") else list(v)
            for k, v in series.items() if isinstance(v, list)}   # not ``process`` (a dict) nor a note


def labelled_ranges(source) -> pd.DataFrame:
    """``record_function`` annotations (Trace) or NVTX ranges (NsysReport): ``name, pid, tid, start_ns, end_ns, dur_ns``.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> labelled_ranges(tiny_trace())[["name", "start_ns", "end_ns"]]
                 name  start_ns  end_ns
    0  ProfilerStep#1         0    1000
    """
    check_source(source)
    return source.labelled_ranges()


def device_work(source) -> pd.DataFrame:
    """Kernels, copies and sets (not ``gpu_user_annotation`` labels): ``kind, name, start_ns,
    end_ns, dur_ns, stream, bytes``, by start.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> device_work(tiny_trace())[["kind", "name", "start_ns", "end_ns"]]
         kind         name  start_ns  end_ns
    0  kernel  relu_kernel       300     700
    """
    check_source(source)
    g = source.gpu_events()[["kind", "name", "start_ns", "end_ns", "dur_ns", "stream", "bytes"]]
    return g.sort_values("start_ns", kind="stable").reset_index(drop=True)


def host_context(source, times_ns, tid=None) -> pd.DataFrame:
    """What the thread ``tid`` (default: the steps') was inside at each of ``times_ns``.

    Returns per time: ``time_ns``; ``host_label`` (innermost labelled range); ``host_event``,
    ``host_event_kind`` (the source's ``host_event_at``); ``""`` where none.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> host_context(tiny_trace(), [150, 400])[["time_ns", "host_event", "host_event_kind"]]
       time_ns      host_event host_event_kind
    0      150      aten::relu              op
    1      400  ProfilerStep#1            step
    """
    steps = steps_of(source)
    tid = int(steps["tid"].iloc[0]) if tid is None else tid
    times = [int(t) for t in times_ns]
    lab = labelled_ranges(source)
    labels = value_at(times, lab[lab["tid"] == tid])
    events = source.host_event_at(times, tid)
    return pd.DataFrame({"time_ns": np.asarray(times, dtype=np.int64),
                         "host_label": [lb if lb is not None else "" for lb in labels],
                         "host_event": [e[0] for e in events], "host_event_kind": [e[1] for e in events]})


def step_gaps(source, min_gap_ns: int = 1_000_000) -> pd.DataFrame:
    """The device's idle gaps longer than ``min_gap_ns`` inside each step, with what the host was doing.

    Sources: docs/SOURCES.md#steps-step-gaps

    KitError also for a recording without GPU activity (no device, so no device gaps).

    Returns per gap: ``step``, ``start_ns``, ``end_ns``, ``dur_ns``, ``start_in_step_ns`` (ns),
    and :func:`host_context` at its midpoint.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> step_gaps(tr, min_gap_ns=100)[["step", "start_ns", "end_ns", "host_event"]]
       step  start_ns  end_ns      host_event
    0     1         0     300      aten::relu
    1     1       700    1000  ProfilerStep#1
    """
    steps = steps_of(source)
    work = device_work(source)
    if work.empty:
        raise KitError(f"{source.path}: no GPU activity in this recording (no kernel, copy or set): "
                       "there is no device whose idle gaps could be found")
    gaps = idle_gaps_in_windows(work, steps, min_gap_ns=min_gap_ns)   # merged once, not once per step
    k = gaps.pop("window").to_numpy()
    gaps.insert(0, "step", steps["step"].to_numpy()[k])
    gaps["start_in_step_ns"] = gaps["start_ns"].to_numpy() - steps["start_ns"].to_numpy()[k]
    ctx = host_context(source, (gaps["start_ns"] + gaps["dur_ns"] // 2).to_numpy(),
                       tid=int(steps["tid"].iloc[0]))
    return pd.concat([gaps, ctx.drop(columns="time_ns")], axis=1)


def step_measures(source, phases=None, min_gap_ns: int = 1_000_000) -> pd.DataFrame:
    """Per step, the measures that must be kept apart, all in ns.

    ``phases`` to time on the host default to :data:`PHASES` (those that occur); gaps counted
    are longer than ``min_gap_ns``. GPU work counts in the step whose host window it runs in.
    Without GPU activity the device columns are <NA>, ``gpu_launched`` 0, and
    ``.attrs["note"]`` says so. A large trace shows a progress bar unless ``KITLIB_PROGRESS=0``.

    Returns per step, ns: ``step``, ``start_ns``, ``end_ns``, ``wall_ns``; ``<phase>_ns`` (host
    time, <NA> if absent); ``device_busy_ns`` (union of GPU work); ``gpu_sum_ns`` (durations
    summed, cut to the step); ``kernel_sum_ns``; ``idle_ns`` (``wall_ns - device_busy_ns``);
    ``gaps``, ``longest_gap_ns`` (over ``min_gap_ns``); ``gpu_launched`` (launched in the step).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> step_measures(tr)[["step", "wall_ns", "device_busy_ns", "idle_ns", "gpu_launched"]]
       step  wall_ns  device_busy_ns  idle_ns  gpu_launched
    0     1     1000             400      600             1
    """
    steps = steps_of(source)
    # the bar counts the events of the operator tree, which only a profiler trace has
    bar = analysis_progress(source, "step_measures", 3) if source.has_operators else None
    lab = labelled_ranges(source)
    work = device_work(source)
    phases = PHASES if phases is None else phases
    win = steps[["step", "start_ns", "end_ns"]].copy()
    allw = per_window(work, win)
    kern = per_window(work[work["kind"] == "kernel"], win)
    out = win.copy()
    out["wall_ns"] = steps["dur_ns"].to_numpy()
    tid = steps["tid"].to_numpy()
    for ph in phases:
        p = lab[lab["name"] == ph].sort_values("start_ns", kind="stable")
        p_start, p_end = p["start_ns"].to_numpy(), p["end_ns"].to_numpy()
        p_tid, p_dur = p["tid"].to_numpy(), p["dur_ns"].to_numpy()
        # a phase belongs to the step its start is in, [start, end)
        lo, hi = bounds_in(steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy(), p_start, closed="left")
        vals = []
        for a, b, e, t in zip(lo, hi, steps["end_ns"].to_numpy(), tid):
            inside = (p_tid[a:b] == t) & (p_end[a:b] <= e)
            vals.append(int(p_dur[a:b][inside].sum()) if inside.any() else pd.NA)
        if any(v is not pd.NA for v in vals):
            out[f"{ph}_ns"] = pd.array(vals, dtype="Int64")
    if work.empty:
        for c in ("device_busy_ns", "gpu_sum_ns", "kernel_sum_ns", "idle_ns", "gaps", "longest_gap_ns"):
            out[c] = pd.array([pd.NA] * len(out), dtype="Int64")
        out["gpu_launched"] = 0
        out.attrs["note"] = "no GPU activity in this recording: the device columns are <NA>"
        if bar is not None:
            bar.close()
        return out.reset_index(drop=True)
    if bar is not None:
        bar.update(1)
    out["device_busy_ns"] = allw["busy_ns"].to_numpy()
    out["gpu_sum_ns"] = allw["sum_dur_ns"].to_numpy()
    out["kernel_sum_ns"] = kern["sum_dur_ns"].to_numpy()
    out["idle_ns"] = out["wall_ns"] - out["device_busy_ns"]
    gaps = step_gaps(source, min_gap_ns) if len(steps) else None
    if bar is not None:
        bar.update(1)
    cnt = gaps.groupby("step")["dur_ns"].agg(["size", "max"])
    out["gaps"] = out["step"].map(cnt["size"]).fillna(0).astype("int64")
    out["longest_gap_ns"] = out["step"].map(cnt["max"]).fillna(0).astype("int64")
    launched = _launch_starts(source)
    # a launch at one step's end is the next step's: [start, end), counted once
    out["gpu_launched"] = count_in(out["start_ns"].to_numpy(), out["end_ns"].to_numpy(), launched, closed="left")
    if bar is not None:
        bar.update(1)
        bar.close()
    return out.reset_index(drop=True)


def _launch_starts(source) -> np.ndarray:
    """Sorted start times (ns) of the recorded launches of GPU work."""
    return np.sort(source.gpu_events()["launch_start_ns"].dropna().to_numpy(dtype=np.int64))
