"""The interval helpers and the step helpers, pinned on inputs worked on paper and on the raw files.

``kitlib.analyses.intervals`` (``clip``, ``idle_gaps`` and the window check) is checked
on tiny tables whose answers are worked out by hand from the rules in its docstrings: an
interval covers ``[start_ns, start_ns + dur_ns)``, a zero-length row counts in a window
when ``start <= start_ns < end``, a gap is kept when strictly longer than ``min_gap_ns``.
``kitlib.analyses.steps``' ``active_steps`` / ``active_step_times`` are checked on
hand-built series against the rule of their docstring (the last ``active`` values of a
series that holds exactly ``wait + warmup + active``; only ``step_ms_profiled*`` series
are cut; ``capture=None`` leaves the series as they are). ``host_context``, ``step_gaps``
and ``device_work`` are checked against the raw recordings read here without kitlib: the
torch.profiler trace of ``profiler_5step`` (gzip JSON, µs with 3 decimals) and the Nsight
Systems export of ``nsys_8step`` (sqlite3; thread ids are the low 24 bits of
``globalTid``), and on four-line traces written here (ties at equal start times, a trace
without steps). Every expected value is computed here by an exhaustive search, not
kitlib's (block search, sweeps).
"""
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from conftest import sql_rows, raw_trace_events

from kitlib.analyses.intervals import clip, idle_gaps
from kitlib.analyses.steps import active_step_times, active_steps
from kitlib.errors import KitError

REF = Path(__file__).resolve().parent.parent / "data" / "reference"
T24 = 0xFFFFFF                             # globalTid & T24: the thread id


# -- intervals: clip and idle_gaps on tables worked on paper ----------------------------

def test_clip_keeps_what_overlaps_and_zero_length_rows_in_start_inclusive_end_exclusive():
    """Window [10, 20). Worked on paper:
    a [0, 10) ends where the window starts: no overlap, dropped;
    b [10, 20) is the window: kept whole;
    c [20, 30) starts where the window ends: dropped;
    d [15, 25) overlaps: cut to [15, 20);
    z0 at 10 (the window's start), z1 at 15: zero-length rows inside, kept;
    z2 at 20 (the window's end) and z3 at 40: outside, dropped."""
    df = pd.DataFrame({"name": ["a", "b", "c", "d", "z0", "z1", "z2", "z3"],
                       "start_ns": [0, 10, 20, 15, 10, 15, 20, 40],
                       "dur_ns": [10, 10, 10, 10, 0, 0, 0, 0]},
                      index=[100, 101, 102, 103, 104, 105, 106, 107])
    got = clip(df, 10, 20)
    assert got["name"].tolist() == ["b", "d", "z0", "z1"]          # original order
    assert got.index.tolist() == [101, 103, 104, 105]              # and original index
    assert got["start_ns"].tolist() == [10, 15, 10, 15]
    assert got["dur_ns"].tolist() == [10, 5, 0, 0]
    # the same rows given by end_ns: end_ns is cut too (b: 20, d: 20, z0: 10, z1: 15)
    by_end = clip(df.assign(end_ns=df["start_ns"] + df["dur_ns"]).drop(columns="dur_ns"), 10, 20)
    assert by_end["name"].tolist() == ["b", "d", "z0", "z1"]
    assert by_end["end_ns"].tolist() == [20, 20, 10, 15]


def test_idle_gaps_default_keeps_a_one_ns_gap():
    """[0, 10) and [11, 20) leave the gap [10, 11): 1 ns, strictly longer than the default
    ``min_gap_ns=0``, so it is listed; with ``min_gap_ns=1`` it is not (strictly longer)."""
    df = pd.DataFrame({"start_ns": [0, 11], "dur_ns": [10, 9]})
    assert idle_gaps(df).values.tolist() == [[10, 11, 1]]
    assert idle_gaps(df, window=(0, 20)).values.tolist() == [[10, 11, 1]]
    assert idle_gaps(df, min_gap_ns=1).empty


# -- steps: the schedule's active steps --------------------------------------------------

def test_active_steps_reads_each_schedule_key_and_counts_a_missing_one_as_zero():
    """Worked on paper from the docstring's rule: a series of exactly ``wait + warmup + active``
    values keeps its last ``active``; a key the schedule lacks counts as 0 (the function's
    ``schedule.get(key, 0)``)."""
    v = [10, 11, 12, 13]
    # wait missing: 0 + 1 + 3 = 4 values -> the last 3
    assert active_steps(v, {"warmup": 1, "active": 3}) == [11, 12, 13]
    # warmup missing: 1 + 0 + 3 = 4 -> the last 3
    assert active_steps(v, {"wait": 1, "active": 3}) == [11, 12, 13]
    # active missing: 0 active steps -> nothing to cut, the series as it is (even though
    # 1 + 2 + one active step would make the 4 values)
    assert active_steps(v, {"wait": 1, "warmup": 2}) == v
    # both wait and warmup missing: 0 + 0 + 4 = 4 -> all 4 are active
    assert active_steps(v, {"active": 4}) == v
    # wait missing, and the series is not 1 + 0 + ... : 0 + 2 + 2 = 4 -> the last 2
    assert active_steps(v, {"warmup": 2, "active": 2}) == [12, 13]


def test_active_step_times_cuts_only_the_profiled_series_and_leaves_live_series_alone():
    """Hand-built series. With ``capture=None`` (a live series, already active-only) every
    series comes back unchanged; with a capture whose schedule is wait 1, warmup 1, active 2,
    a ``step_ms_profiled*`` series of 4 values loses its first 2, and an uninstrumented
    series of the same length (4) is left whole."""
    series = {"step_ms_uninstrumented": [1.0, 2.0, 3.0, 4.0], "step_ms_profiled": [9.0, 8.0, 7.0, 6.0]}
    assert active_step_times(None, series) == series

    class Cap:                                      # what active_step_times reads of a Capture
        recipe = {"schedule": {"wait": 1, "warmup": 1, "active": 2}}

        def step_times(self):
            return series
    got = active_step_times(Cap())
    assert got == {"step_ms_uninstrumented": [1.0, 2.0, 3.0, 4.0], "step_ms_profiled": [7.0, 6.0]}
    with pytest.raises(KitError, match=r"^active_step_times: need a capture or a series$"):
        active_step_times(None)


# -- steps: what the host was inside (host_context), from the raw recordings ------------


def _innermost(rows, t):
    """The innermost of ``rows`` ``(start, end, name, kind)`` containing ``t``
    (``start <= t < end``): the latest start, and of equal starts the shortest (ranges on
    one thread nest); None if none. An exhaustive search, not kitlib's block search."""
    inside = [r for r in rows if r[0] <= t < r[1]]
    return max(inside, key=lambda r: (r[0], -(r[1] - r[0]))) if inside else None


def _merge(spans):
    """Union of ``[start, end)`` spans: overlapping and touching ones merged, zero-length ones
    dropped (the rule of ``kitlib.analyses.intervals``' module docstring)."""
    out = []
    for s, e in sorted(x for x in spans if x[1] > x[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def test_step_gaps_of_the_nsys_export_and_what_the_main_thread_was_inside():
    """``step_gaps(nsys_8step)`` recomputed from the export with sqlite3: steps are the
    ``torch_step`` NVTX ranges; device work the KERNEL, MEMCPY and MEMSET rows merged over
    streams; a gap is idle time inside a step, the step's ends counting as edges, longer
    than 1 ms. At each gap's midpoint (start + dur // 2) on the steps' thread:
    ``host_label`` is the innermost NVTX range; ``host_event`` the innermost OS-runtime
    call (OSRT_API), else CUDA API call (CUPTI_ACTIVITY_KIND_RUNTIME, named without its
    ``_v<digits>`` version suffix, as ``NsysReport.launches`` documents), else that NVTX range."""
    from kitlib.analyses.steps import step_gaps
    from kitlib.readers.nsys import load_nsys
    db = REF / "nsys_8step" / "report.sqlite"
    nvtx = sql_rows(db, "SELECT e.start, e.end, coalesce(e.text, s.value), e.globalTid & 16777215 FROM NVTX_EVENTS e "
                        "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.end IS NOT NULL ORDER BY e.start")
    steps = [(s, e, tid) for s, e, name, tid in nvtx if name == "torch_step"]
    assert len(steps) == 8 and {tid for *_, tid in steps} == {1213}
    main = 1213
    work = _merge([(s, e) for t in ("KERNEL", "MEMCPY", "MEMSET")
                   for s, e in sql_rows(db, f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{t}")])
    expected = []
    for k, (w0, w1, _) in enumerate(steps):
        busy = [(max(s, w0), min(e, w1)) for s, e in work if min(e, w1) > max(s, w0)]
        edges = [w0] + [x for b in busy for x in b] + [w1]
        for gs, ge in zip(edges[0::2], edges[1::2]):
            if ge - gs > 1_000_000:
                expected.append((k, gs, ge, ge - gs, gs - w0))
    assert len(expected) == 85                  # the gaps, as counted here from the export
    osrt = [(s, e, n, "OS runtime") for s, e, n, g in sql_rows(
        db, "SELECT o.start, o.end, s.value, o.globalTid FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId")
        if g & T24 == main]
    api = [(s, e, re.sub(r"_v\d+$", "", n), "CUDA API") for s, e, n, g in sql_rows(
        db, "SELECT r.start, r.end, s.value, r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
            "JOIN StringIds s ON s.id = r.nameId") if g & T24 == main]
    labels = [(s, e, n, "NVTX") for s, e, n, tid in nvtx if tid == main]
    host = []
    for _, gs, _, dur, _ in expected:
        t = gs + dur // 2
        lb = _innermost(labels, t)
        ev = _innermost(osrt, t) or _innermost(api, t) or lb
        host.append((lb[2] if lb else "", ev[2] if ev else "", ev[3] if ev else ""))
    kinds = [h[2] for h in host]
    # what the 85 midpoints fall in, as counted here: every branch of the rule is reached
    assert [kinds.count(k) for k in ("OS runtime", "CUDA API", "NVTX", "")] == [46, 11, 28, 0]

    got = step_gaps(load_nsys(db))
    assert list(got.columns) == ["step", "start_ns", "end_ns", "dur_ns", "start_in_step_ns",
                                 "host_label", "host_event", "host_event_kind"]
    assert list(got[["step", "start_ns", "end_ns", "dur_ns", "start_in_step_ns"]].itertuples(index=False, name=None)) \
        == expected
    assert list(got[["host_label", "host_event", "host_event_kind"]].itertuples(index=False, name=None)) == host


def test_host_context_of_the_nsys_export_falls_back_from_os_runtime_to_cuda_api_to_nvtx():
    """``host_context(nsys_8step, times)`` with the default thread (the steps' thread, 1213)
    at times picked in the export with sqlite3: inside an OS-runtime call; inside a CUDA
    API call and no OS-runtime call; inside an NVTX range and neither call; before the
    first event (nothing: empty strings)."""
    from kitlib.analyses.steps import host_context
    from kitlib.readers.nsys import load_nsys
    db = REF / "nsys_8step" / "report.sqlite"
    main = 1213
    nvtx = [(s, e, n, "NVTX") for s, e, n, g in sql_rows(
        db, "SELECT e.start, e.end, coalesce(e.text, s.value), e.globalTid FROM NVTX_EVENTS e "
            "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.end IS NOT NULL") if g & T24 == main]
    osrt_all = sql_rows(db, "SELECT o.start, o.end, s.value, o.globalTid FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId")
    api_all = sql_rows(db, "SELECT r.start, r.end, s.value, r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                           "JOIN StringIds s ON s.id = r.nameId")
    osrt = [(s, e, n, "OS runtime") for s, e, n, g in osrt_all if g & T24 == main]
    api = [(s, e, re.sub(r"_v\d+$", "", n), "CUDA API") for s, e, n, g in api_all if g & T24 == main]
    other_api = [(s, e) for s, e, n, g in api_all if g & T24 != main]

    def expect(t):
        lb = _innermost(nvtx, t)
        ev = _innermost(osrt, t) or _innermost(api, t) or lb
        return (t, lb[2] if lb else "", ev[2] if ev else "", ev[3] if ev else "")

    # midpoints of main-thread API calls outside any OS-runtime call (the first 40), of the
    # first 20 OS-runtime calls, of the NVTX ranges, and of other threads' API calls
    t_api = [s + (e - s) // 2 for s, e, *_ in sorted(api) if _innermost(osrt, s + (e - s) // 2) is None][:40]
    t_os = [s + (e - s) // 2 for s, e, *_ in sorted(osrt)][:20]
    t_nvtx = [s + (e - s) // 2 for s, e, *_ in nvtx]
    t_other = [s + (e - s) // 2 for s, e in sorted(other_api)][:40]
    t_before = [min(s for s, *_ in nvtx + osrt + api) - 1_000]
    times = t_api + t_os + t_nvtx + t_other + t_before
    expected = [expect(t) for t in times]
    kinds = [x[3] for x in expected]
    assert all(k in kinds for k in ("OS runtime", "CUDA API", "NVTX", ""))
    got = host_context(load_nsys(db), times)
    assert list(got.columns) == ["time_ns", "host_label", "host_event", "host_event_kind"]
    assert list(got.itertuples(index=False, name=None)) == expected


@pytest.fixture(scope="module")
def trace5():
    return raw_trace_events(REF / "profiler_5step" / "trace.json.gz")


def _ns(us):
    return round(us * 1000)      # Kineto writes µs with 3 decimals: ns, as kitlib reads them


def test_host_context_of_a_trace_on_the_steps_thread_by_default_and_on_a_named_thread(trace5):
    """``host_context(profiler_5step, times[, tid])`` against the raw JSON. The steps
    (``ProfilerStep#N``, cat ``user_annotation``) run on tid 449; autograd's backward
    operators on tid 536. ``host_label``: the innermost ``user_annotation`` on the thread
    containing the time; ``host_event``: the innermost ``cpu_op`` or ``user_annotation``
    there (kind ``step`` for ``ProfilerStep#N``, ``annotation`` for the other labels,
    ``op`` for operators; python frames are not events here)."""
    import kitlib
    from kitlib.analyses.steps import host_context

    def rows(tid, cats):
        return [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), e["name"],
                 "op" if e["cat"] == "cpu_op" else "step" if e["name"].startswith("ProfilerStep#") else "annotation")
                for e in trace5 if e.get("ph") == "X" and e.get("tid") == tid and e.get("cat") in cats]
    steps = [e for e in trace5 if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    assert {e["tid"] for e in steps} == {449} and len(steps) == 5
    labels, events = rows(449, ("user_annotation",)), rows(449, ("user_annotation", "cpu_op"))
    back = rows(536, ("user_annotation", "cpu_op"))
    assert len(labels) == 45 and len(back) == 7925      # counted in the JSON: a guard on the reading

    def expect(t, lab, ev):
        lb, e = _innermost(lab, t), _innermost(ev, t)
        return (t, lb[2] if lb else "", e[2] if e else "", e[3] if e else "")

    mid = lambda r: r[0] + (r[1] - r[0]) // 2          # noqa: E731
    # kitlib searches the events in blocks of 1024 (in start order): times just before the
    # events at the block edges, and the exact ends of the labels (a range ending at t does
    # not contain t; the one around it, opened blocks earlier, does)
    starts = sorted(r[0] for r in events)
    edges = [starts[j] - 1 for m in range(1, len(starts) // 1024 + 1) for j in (m * 1024 - 1, m * 1024, m * 1024 + 1)
             if j < len(starts)]
    times = ([mid(r) for r in labels] + [mid(r) for r in events[::97]]
             + [r[0] + 1 for r in labels if r[3] == "step"]    # a step's first ns: inside it alone
             + [r[1] for r in labels] + edges
             + [min(r[0] for r in events) - 1_000])            # before the first event: nothing
    tr = kitlib.open_capture("profiler_5step").trace
    got = host_context(tr, times)                      # default: the steps' thread, 449
    want = [expect(t, labels, events) for t in times]
    assert {w[3] for w in want} == {"step", "annotation", "op", ""}
    assert list(got.itertuples(index=False, name=None)) == want
    # a named thread: the backward thread has operators and no labels
    t_back = [mid(r) for r in back[::151]]
    got = host_context(tr, t_back, tid=536)
    want = [expect(t, [], back) for t in t_back]
    assert {w[3] for w in want} == {"op"}
    assert list(got.itertuples(index=False, name=None)) == want
    # no times: an empty table, times still int64 ns
    none = host_context(tr, [])
    assert len(none) == 0 and str(none["time_ns"].dtype) == "int64"


def test_host_context_at_equal_start_times_takes_the_shorter_range(tmp_path):
    """A four-line trace worked on paper (µs in the JSON, ns in kitlib). At equal starts
    the longer range encloses the shorter one, so the shorter is the innermost: in
    [1010, 1030) µs that is ``inner`` (written first) inside ``outer`` [1010, 1050); in
    [1060, 1065) ``aten::add`` inside ``aten::mm`` [1060, 1070) (written second)."""
    import kitlib
    from kitlib.analyses.steps import host_context
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 100.0},
          {"ph": "X", "cat": "user_annotation", "name": "inner", "pid": 1, "tid": 1, "ts": 1010.0, "dur": 20.0},
          {"ph": "X", "cat": "user_annotation", "name": "outer", "pid": 1, "tid": 1, "ts": 1010.0, "dur": 40.0},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1060.0, "dur": 10.0},
          {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1060.0, "dur": 5.0}]
    p = tmp_path / "trace.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    got = host_context(kitlib.load_trace(p), [1_015_000, 1_040_000, 1_062_000, 1_067_000, 1_090_000])
    assert list(got.itertuples(index=False, name=None)) == [
        (1_015_000, "inner", "inner", "annotation"),
        (1_040_000, "outer", "outer", "annotation"),
        (1_062_000, "ProfilerStep#1", "aten::add", "op"),
        (1_067_000, "ProfilerStep#1", "aten::mm", "op"),
        (1_090_000, "ProfilerStep#1", "ProfilerStep#1", "step")]


def test_window_that_is_not_a_pair_is_refused_in_words():
    """``_window``'s message, worked from its source text: a window that is not a pair of
    integers is named as given."""
    from kitlib.analyses.intervals import IntervalError, busy_ns
    df = pd.DataFrame({"start_ns": [0], "dur_ns": [10]})
    with pytest.raises(IntervalError, match=r"^window must be a pair \(start_ns, end_ns\) of integers, got 5$"):
        busy_ns(df, window=5)


# -- steps: the device's work, from the raw recordings -----------------------------------

def test_device_work_of_the_nsys_export_from_sqlite():
    """``device_work(nsys_8step)`` against the export read with sqlite3: every KERNEL
    (kind ``kernel``, no byte count: <NA>, as a Trace's kernels have), MEMCPY (``memcpy``)
    and MEMSET (``memset``) row, with its start, end, duration, stream and bytes, in start
    order (no two start at the same ns here), index 0..n-1."""
    from kitlib.analyses.steps import device_work
    from kitlib.readers.nsys import load_nsys
    db = REF / "nsys_8step" / "report.sqlite"
    rows = [("kernel", s, e, e - s, st, None) for s, e, st in sql_rows(db, "SELECT start, end, streamId FROM CUPTI_ACTIVITY_KIND_KERNEL")]
    rows += [("memcpy", s, e, e - s, st, b) for s, e, st, b in sql_rows(db, "SELECT start, end, streamId, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY")]
    rows += [("memset", s, e, e - s, st, b) for s, e, st, b in sql_rows(db, "SELECT start, end, streamId, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET")]
    assert (len(rows), len({r[1] for r in rows})) == (6493, 6493)       # 4340 + 541 + 1612, distinct starts
    rows.sort(key=lambda r: r[1])
    got = device_work(load_nsys(db))
    assert list(got.columns) == ["kind", "name", "start_ns", "end_ns", "dur_ns", "stream", "bytes"]
    assert got.index.tolist() == list(range(6493))
    assert [str(t) for t in got[["start_ns", "end_ns", "dur_ns"]].dtypes] == ["int64"] * 3
    kernels = got["kind"] == "kernel"
    assert all(b is pd.NA for b in got.loc[kernels, "bytes"])
    got_rows = [(k, s, e, d, st, None if k == "kernel" else b) for k, s, e, d, st, b in
                got[["kind", "start_ns", "end_ns", "dur_ns", "stream", "bytes"]].itertuples(index=False, name=None)]
    assert got_rows == rows


def test_device_work_of_a_trace_from_raw_json(trace5):
    """``device_work(profiler_5step)``: the JSON's ``kernel``, ``gpu_memcpy`` and
    ``gpu_memset`` events as kinds ``kernel``, ``memcpy``, ``memset``, start and duration in
    ns, stream from ``args``; the documented columns only, in start order, index 0..n-1."""
    import kitlib
    from kitlib.analyses.steps import device_work
    kinds = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
    rows = sorted(((kinds[e["cat"]], _ns(e["ts"]), _ns(e["dur"]), e["args"]["stream"]) for e in trace5
                   if e.get("ph") == "X" and e.get("cat") in kinds), key=lambda r: r[1])
    assert len(rows) == 2705 + 15 + 1005
    got = device_work(kitlib.open_capture("profiler_5step").trace)
    assert list(got.columns) == ["kind", "name", "start_ns", "end_ns", "dur_ns", "stream", "bytes"]
    assert got.index.tolist() == list(range(len(rows)))
    assert list(got[["kind", "start_ns", "dur_ns", "stream"]].itertuples(index=False, name=None)) == rows


# -- steps: a recording without steps is refused, named with its file -------------------

def _no_steps_message(path, hint=""):
    # the message, worked from steps_of's source text (STEP_RANGE is "torch_step")
    return (f"{path}: no steps found (looked for ProfilerStep#N, torch_step#N annotations and "
            f"'torch_step' NVTX ranges){hint}")


def test_steps_of_a_trace_without_steps_says_what_it_looked_for(tmp_path):
    """A one-operator trace (no ``ProfilerStep#N``, no ``torch_step#N``): refused, no hint."""
    import kitlib
    from kitlib.analyses.steps import steps_of
    p = tmp_path / "trace.json"
    p.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 10.0}]}))
    tr = kitlib.load_trace(p)
    with pytest.raises(KitError) as e:
        steps_of(tr)
    assert str(e.value) == _no_steps_message(tr.path)


def test_a_source_that_is_not_a_recording_is_refused_in_words():
    """The message, worked from ``check_source``'s text: what was expected and the type given."""
    from kitlib.analyses.steps import device_work, labelled_ranges, steps_of
    for fn in (steps_of, labelled_ranges, device_work):
        with pytest.raises(KitError) as e:
            fn(pd.DataFrame())
        assert str(e.value) == ("source: expected a kitlib Trace (load_trace) or NsysReport (load_nsys), "
                                "got DataFrame")


def test_steps_of_an_export_whose_nvtx_ranges_were_left_out_says_why(tmp_path):
    """nsys_8step with every NVTX range's end cleared: the reader leaves them out and lists
    the defect (table "nvtx", source "NVTX_EVENTS"), so no step is found, and the refusal
    says that the NVTX table's defects are why (the hint never showed until 1 December: it
    looked for "NVTX" in the table column, which says "nvtx")."""
    import warnings

    from damage import damaged_export
    from kitlib.analyses.steps import steps_of
    from kitlib.readers.nsys import load_nsys
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                      # the reader's warning about the defect
        rep = load_nsys(damaged_export(tmp_path, "UPDATE NVTX_EVENTS SET end = NULL"))
    assert rep.defects[["table", "source"]].values.tolist() == [["nvtx", "NVTX_EVENTS"]]
    with pytest.raises(KitError) as e:
        steps_of(rep)
    assert str(e.value) == (f"{tmp_path / 'damaged.sqlite'}: no steps found (looked for ProfilerStep#N, torch_step#N "
                            "annotations and 'torch_step' NVTX ranges); the export's NVTX table has defects that "
                            "left ranges out (see the report's 'defects' table)")
