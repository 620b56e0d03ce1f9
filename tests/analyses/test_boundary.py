"""One boundary rule in every module (issue 27): half-open ``[start, end)``.

A tiny hand-written trace puts an event exactly at every boundary — a zero-length
operator at its parent's end, a launch at a step's end, a label ending as another
starts, allocator records at a label boundary and at a step boundary — and feeds it to
every analysis that assigns events to steps, parents or labels. Each event must be
counted in exactly one step and one parent, and every module must agree with the rule
written in :mod:`kitlib.model.window` (and with the profiler's tree, which is where the
rule comes from). The one stated exception, ``memory_by_event`` (the profiler's own
``MemRecordsAcc.in_interval`` includes both ends), is checked as the exception it is.

Thread (pid 1, tid 1), times in µs (the trace's unit; ×1000 for ns)::

    ProfilerStep#1  [0, 1000)        ProfilerStep#2  [1000, 2000)     ProfilerStep#3 [2000, 3000)
      forward       [0, 500)           aten::add     [1000, 1030)       aten::relu [2000, 2000)
        aten::mm    [100, 500)           cudaLaunchKernel [1000, 1010)  zero-length, at the
          cudaLaunchKernel [400, 410)    at step 1's end (corr 2)       step boundary
          (corr 1)
      backward      [500, 1000)      (forward ends as backward starts)
        aten::zero_ [500, 500)       zero-length, at mm's and forward's end
    memory: +1024 B at 500 (a label boundary), -1024 B at 1000 (the step boundary)
    GPU (device 0, stream 7): mm_kernel [420, 450) (corr 1), relu_kernel [1020, 1050) (corr 2,
    launched at 1000: the gap before it crosses the step boundary)
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from kitlib.readers.trace import load_trace

US = 1000   # ns per µs


def _x(cat, name, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def _trace_json():
    ev = [
        _x("user_annotation", "ProfilerStep#1", 0, 1000),
        _x("user_annotation", "ProfilerStep#2", 1000, 1000),
        _x("user_annotation", "ProfilerStep#3", 2000, 1000),
        _x("user_annotation", "forward", 0, 500),
        _x("cpu_op", "aten::mm", 100, 400, **{"External id": 11, "Input Dims": [[2, 3], [3, 4]],
                                              "Input type": ["float", "float"]}),
        _x("cuda_runtime", "cudaLaunchKernel", 400, 10, correlation=1, **{"External id": 11}),
        _x("user_annotation", "backward", 500, 500),
        _x("cpu_op", "aten::zero_", 500, 0, **{"External id": 12, "Input Dims": [[4]], "Input type": ["float"]}),
        _x("cpu_op", "aten::add", 1000, 30, **{"External id": 13, "Input Dims": [[4], [4], []],
                                               "Input type": ["float", "float", "Scalar"]}),
        _x("cpu_op", "aten::relu", 2000, 0, **{"External id": 14, "Input Dims": [[4]], "Input type": ["float"]}),
        _x("cuda_runtime", "cudaLaunchKernel", 1000, 10, correlation=2, **{"External id": 13}),
        {"ph": "X", "cat": "kernel", "name": "mm_kernel", "pid": 0, "tid": 7, "ts": 420, "dur": 30,
         "args": {"correlation": 1, "External id": 11, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "relu_kernel", "pid": 0, "tid": 7, "ts": 1020, "dur": 30,
         "args": {"correlation": 2, "External id": 13, "device": 0, "stream": 7}},
    ]
    for ts, b, total in ((500, 1024, 1024), (1000, -1024, 0)):
        ev.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
                   "s": "t", "args": {"Device Type": 1, "Device Id": 0, "Bytes": b, "Addr": 99,
                                      "Total Allocated": total, "Total Reserved": 2048}})
    ev[0]["cat"] = ev[1]["cat"] = "user_annotation"
    return {"traceEvents": ev, "schemaVersion": 1,
            "deviceProperties": [{"id": 0, "name": "NVIDIA Test GPU", "totalGlobalMem": 1 << 30}]}


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    p = tmp_path_factory.mktemp("boundary") / "boundary.json"
    p.write_text(json.dumps(_trace_json()))
    return load_trace(p)


# what the rule says, worked by hand: the step, the parent and the label of each event
STEP = {"forward": 1, "aten::mm": 1, "backward": 1, "aten::zero_": 1, "aten::add": 2, "aten::relu": 3}
PARENT = {"aten::mm": "forward", "aten::zero_": "backward", "aten::add": "ProfilerStep#2",
          "aten::relu": "ProfilerStep#3",
          "forward": "ProfilerStep#1", "backward": "ProfilerStep#1"}
LAUNCH = {400 * US: ("aten::mm", 1), 1000 * US: ("aten::add", 2)}       # launch start -> (op, step)
MEMORY = {500 * US: (1, "backward", "backward"), 1000 * US: (2, None, "aten::add")}   # step, phase, op


def _name_of(trace, row):
    return trace.ops.loc[row, "name"] if row >= 0 else None


def test_the_steps(trace):
    st = trace.steps
    assert st[["step", "start_ns", "end_ns"]].values.tolist() == [
        [1, 0, 1000 * US], [2, 1000 * US, 2000 * US], [3, 2000 * US, 3000 * US]]


def test_the_event_tree_gives_each_event_one_parent(trace):
    t = trace.host_events
    names = t["name"].tolist()
    for i, n in enumerate(names):
        if n in PARENT:
            assert names[t["parent"].iat[i]] == PARENT[n], n
    ops = trace.ops
    for row, n in zip(ops.index, ops["name"]):
        if n in PARENT:
            assert _name_of(trace, ops.loc[row, "parent"]) == PARENT[n], n


def test_the_window_function_is_the_trees_rule(trace):
    from kitlib.model.tree import innermost_at
    t = trace.host_events
    ops = t[t["source"] == "ops"]
    for i in ops.index:
        n = t.at[i, "name"]
        if n in PARENT and t.at[i, "dur_ns"] == 0:
            # a zero-length event is placed by its start: the innermost event open then
            where = innermost_at(t, 1, 1, [t.at[i, "start_ns"]])[0]
            assert t.at[where, "name"] == PARENT[n], n


def test_chain_links_each_launch_to_one_operator(trace):
    from kitlib.analyses.chain import chain, innermost_op_at
    for method in ("external_id", "time_nesting"):
        c = chain(trace, method)
        got = dict(zip(c["launch_start_ns"], c["op_name"]))
        assert got == {t: op for t, (op, _) in LAUNCH.items()}, method
    rows = innermost_op_at(trace, 1, 1, list(LAUNCH))
    assert [_name_of(trace, r) for r in rows] == ["aten::mm", "aten::add"]


def test_step_measures_count_each_launch_in_one_step(trace):
    from kitlib.analyses.steps import step_measures
    m = step_measures(trace, min_gap_ns=1)
    assert m["gpu_launched"].tolist() == [1, 1, 0]           # the launch at 1000 µs: step 2 only
    assert int(m["gpu_launched"].sum()) == len(trace.launches)
    # forward [0, 500) and backward [500, 1000) each in step 1, once
    assert m["forward_ns"].tolist()[0] == 500 * US and m["backward_ns"].tolist()[0] == 500 * US


def test_flops_give_each_operator_one_step(trace):
    from kitlib.analyses.flops import flops_by_event
    f = flops_by_event(trace)
    assert dict(zip(f["name"], f["step"].astype(object))) == {n: STEP[n] for n in f["name"]}


def test_memory_timeline_gives_each_record_one_step_label_and_operator(trace):
    from kitlib.analyses.memory import memory_timeline
    tl = memory_timeline(trace)
    got = {t: (None if pd.isna(s) else int(s), p if isinstance(p, str) else None, o)
           for t, s, p, o in zip(tl["start_ns"], tl["step"], tl["phase"], tl["op"])}
    assert got == MEMORY


def test_memory_by_event_is_the_one_stated_exception(trace):
    """The profiler's ``MemRecordsAcc.in_interval`` counts a record at either end of an
    event in that event: the record at 500 µs is in aten::mm [100, 500] and in
    backward [500, 1000] (closed="both", named where memory_by_event calls the window)."""
    from kitlib.analyses.memory import memory_by_event
    ev = memory_by_event(trace)
    n = dict(zip(ev["name"], ev["n_memory_events"]))
    assert n["aten::mm"] == 1 and n["backward"] == 2 and n["forward"] == 1


def test_host_context_and_collectives_agree(trace):
    from kitlib.analyses.steps import host_context
    from kitlib.model.window import step_of
    hc = host_context(trace, [500 * US, 1000 * US])
    assert hc["host_label"].tolist()[0] == "backward"
    assert hc["host_event"].tolist() == ["backward", "aten::add"]
    assert step_of(np.array([0, 500 * US, 1000 * US, 2000 * US, 3000 * US]), trace.steps).fillna(-1).tolist() == [
        1, 1, 2, 3, -1]


def test_lint_counts_each_operator_in_one_step(trace):
    from kitlib.model.window import count_in
    st = trace.steps
    ops = trace.ops[trace.ops["kind"] == "op"]
    n = count_in(st["start_ns"], st["end_ns"], ops["start_ns"])
    assert n.tolist() == [2, 1, 1] and n.sum() == len(ops)


def test_nsys_ranges_nest_by_the_same_rule():
    from kitlib.model.nsys import range_nesting
    r = pd.DataFrame({"pid": [1] * 4, "tid": [1] * 4, "range_id": [10, 11, 12, 13],
                      "start_ns": [0, 100, 500, 500], "end_ns": [1000, 500, 1000, 500]})
    r["end_ns"] = r["end_ns"].astype("Int64")
    depth, parent = range_nesting(r.sort_values(["start_ns", "end_ns"], ascending=[True, False]))
    # the zero-length range at 500 starts where [100, 500) ends: inside [500, 1000), not [100, 500)
    assert parent.tolist() == [-1, 10, 10, 12] and depth.tolist() == [0, 1, 1, 2]


def test_first_op_and_four_measures_take_a_step_as_the_rest_do(trace):
    """first_op's step filter and four_measures' launches of a step: the launch (and
    operator) at step 1's end are step 2's."""
    from kitlib.analyses.chain import first_op
    from kitlib.analyses.four_measures import four_measures
    assert trace.ops.loc[first_op(trace, "aten::add", step=2), "name"] == "aten::add"
    with pytest.raises(KeyError):
        first_op(trace, "aten::add", step=1)
    m1 = dict(zip(*four_measures(trace, step=1)[["measure", "value_ns"]].T.values))
    m2 = dict(zip(*four_measures(trace, step=2)[["measure", "value_ns"]].T.values))
    assert m1["kernel_sum"] == 30 * US and m2["kernel_sum"] == 30 * US     # one kernel each, not two in step 1


@pytest.mark.parametrize("closed", ["left", "right", "both", "neither"])
def test_the_window_function_against_its_definition(closed):
    """innermost, on random intervals (nested, overlapping, zero-length, equal) and times at
    and between their ends, against the definition: of the intervals containing t under
    ``closed``, the one that starts last, of those the one that ends first (the last in
    start order, longest first); -1 when none."""
    from kitlib.model.window import count_in, innermost
    rng = np.random.default_rng(7)
    for trial in range(30):
        n = int(rng.integers(0, 40))
        s = rng.integers(0, 60, n)
        e = s + rng.integers(0, 25, n) * (rng.random(n) > 0.15)        # some zero-length
        t = np.concatenate([s, e, rng.integers(-5, 90, 40)])
        got = innermost(s, e, t, closed=closed)
        order = np.lexsort((-e, s))
        lo_in, hi_in = closed in ("left", "both"), closed in ("right", "both")
        for ti, g in zip(t.tolist(), got.tolist()):
            inside = [i for i in order.tolist()
                      if (s[i] <= ti if lo_in else s[i] < ti) and (ti <= e[i] if hi_in else ti < e[i])]
            assert g == (inside[-1] if inside else -1), (trial, ti, closed)
        cnt = count_in(s, e, t, closed=closed)
        assert cnt.tolist() == [sum(1 for x in t.tolist() if (a <= x if lo_in else a < x) and (x <= b if hi_in else x < b))
                                for a, b in zip(s.tolist(), e.tolist())]


def test_gpu_idle_cuts_at_the_step_boundary_and_counts_each_launch_once(trace):
    """The gap [450, 1020) µs before relu_kernel (launched at 1000, after mm_kernel ended:
    host wait) is cut at step 1's end: 550 µs in step 1, 20 µs in step 2, the part that
    starts at the boundary in step 2. The launch at exactly 1000 is in step 2's queue and
    blocked launches, never in step 1's."""
    from kitlib.analyses import gpu_idle as G
    g = G.stream_gaps(trace)
    assert g[["step", "start_ns", "end_ns", "category"]].values.tolist() == [
        [1, 450 * US, 1000 * US, "host_wait"], [2, 1000 * US, 1020 * US, "host_wait"]]
    b = G.idle_breakdown(trace)
    assert b[["step", "busy_ns", "host_wait_ns", "no_work_ns"]].values.tolist() == [
        [1, 30 * US, 550 * US, 420 * US], [2, 30 * US, 20 * US, 950 * US], [3, 0, 0, 1000 * US]]
    q = G.queue_summary(trace)
    # launched, unfinished: [400, 450) in step 1; from 1000 (the boundary) to 1050 in step 2
    assert q[["step", "queue_length_max", "queue_empty_ns"]].values.tolist() == [
        [1, 1, 950 * US], [2, 1, 950 * US], [3, 0, 1000 * US]]
    full = G.queue_summary(trace, max_queue_length=0)      # every launch "blocked": where is each counted?
    assert full["blocked_launches"].tolist() == [1, 1, 0]
    assert full["blocked_host_ns"].tolist() == [10 * US, 10 * US, 0]


def test_collectives_pieces_follow_the_same_rule():
    """collectives' pieces (exposed communication): a time at one interval's end and the
    next one's start is in the next one only, and a touching pair of sets splits time
    into pieces that are each in exactly one set."""
    from kitlib.analyses.collectives import _inside, _segments
    merged = (np.array([0, 30]), np.array([10, 40]))
    assert _inside(merged, np.array([-1, 0, 9, 10, 29, 30, 39, 40])).tolist() == [
        False, True, True, False, False, True, True, False]
    comm, compute = (np.array([0]), np.array([10])), (np.array([10]), np.array([20]))
    left, length, (in_comm, in_compute) = _segments(comm, compute)
    assert left.tolist() == [0, 10] and length.tolist() == [10, 10]
    assert in_comm.tolist() == [True, False] and in_compute.tolist() == [False, True]


# --------------------------------------------------------------------------- one window function
#: Every ``searchsorted`` (or ``bisect``/``digitize``) left in kitlib/analyses, by module and
#: function, and why it is not a "which interval holds this time" lookup (those go through
#: kitlib.model.window: innermost, containing, count_in, bounds_in). A new call anywhere
#: else fails the test below: use the window function, or add the call here with its reason.
INTERVAL_ARITHMETIC = {
    ("intervals.py", "idle_gaps_in_windows"):
        "the merged busy periods that overlap a window (end > w0, start < w1): an overlap, "
        "cut to the window to measure the gaps between them",
    ("intervals.py", "covered_before"):
        "prefix sums of sorted starts and ends: the covered length before each time, not a membership",
    ("intervals.py", "per_window"):
        "how many intervals overlap each window (start < w1 and end > w0): an overlap count",
}
SEARCH_CALLS = {"searchsorted", "digitize", "bisect", "bisect_left", "bisect_right", "insort"}


def _search_calls():
    import ast
    from pathlib import Path
    found = {}
    for path in sorted((Path(__file__).resolve().parents[2] / "kitlib" / "analyses").glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))

        def walk(node, where):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    walk(child, child.name if where == "<module>" else f"{where}.{child.name}")
                    continue
                if isinstance(child, ast.Call):
                    f = child.func
                    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
                    if name in SEARCH_CALLS:
                        found.setdefault((path.name, where), []).append(child.lineno)
                if isinstance(child, (ast.Import, ast.ImportFrom)) and any(
                        a.name.split(".")[0] == "bisect" for a in child.names) or (
                        isinstance(child, ast.ImportFrom) and child.module == "bisect"):
                    found.setdefault((path.name, where), []).append(child.lineno)
                walk(child, where)
        walk(tree, "<module>")
    return found


def test_every_analysis_asks_the_window_function_which_interval_holds_a_time():
    found = _search_calls()
    unlisted = {k: v for k, v in found.items() if k not in INTERVAL_ARITHMETIC}
    assert not unlisted, ("binary searches outside kitlib.model.window (module, function: lines); "
                          f"use containing/innermost/count_in/bounds_in, or list the call in "
                          f"INTERVAL_ARITHMETIC with its reason: {unlisted}")
    stale = set(INTERVAL_ARITHMETIC) - set(found)
    assert not stale, f"INTERVAL_ARITHMETIC lists functions that no longer search: {stale}"
