"""op_events' parents, device columns and shape keys, from raw JSON or worked on paper.

``kitlib.analyses.events.op_events`` (the table of host events lessons 02, 03 and 05
build on) and ``shapes_key`` (the key of ``key_averages(group_by_input_shape=True)``):

- ``parent``: on ``data/reference/fixed_batch``, every step is a row at the top (-1) and
  every raw host event inside a step hangs under it; the steps' intervals are read from
  the raw Chrome-trace JSON by this file (gzip, json), ts and dur in µs × 1000 = ns.
- device time: a kernel launched by the table's first row, and kernels lifted through
  folds (``EventList._remove_dup_nodes`` in ``torch/autograd/profiler_util.py``: a
  same-named only child is folded into its parent, its children and kernels with it)
  into the first row. The shipped recordings never put a kernel-launching operator or
  the parent of such a fold first in the table, so tiny traces here do, in the schema of
  ``tests/data/bugcases/graph-launch-step`` (a runtime launch and its kernel sharing a
  correlation id and the operator's External id); values worked on paper from the
  events as written, µs × 1000 = ns.
- shape keys: a tensor-list argument (``aten::cat``'s), which no shipped recording
  holds, written ``[]`` in ``input_shapes`` and kept in ``input_dims_nested``; missing
  shapes; ``shapes_key``'s default.
"""
from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd

import kitlib
from kitlib.analyses.events import op_events, shapes_key

from support.events import event, gpu_event, launch_event, write_trace

REF = Path(__file__).resolve().parents[2] / "data" / "reference"
PID, TID, STREAM = 449, 449, 7
HOST_CATS = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")


def _op(name, ts, dur, ext):
    return event("cpu_op", name, ts, dur, PID, TID, **{"External id": ext})


def _launch(ts, dur, ext, corr):
    return launch_event("cudaLaunchKernel", ts, corr, dur, PID, TID, **{"External id": ext, "cbid": 211})


def _kernel(name, ts, dur, ext, corr):
    return gpu_event("kernel", name, ts, dur, corr, STREAM, **{
        "External id": ext, "queued": 0, "context": 1, "registers per thread": 32, "shared memory": 0,
        "grid": [64, 1, 1], "block": [256, 1, 1]})


def _load(tmp_path, events, name):
    return kitlib.load_trace(write_trace(tmp_path / name, [
        {"name": "process_name", "ph": "M", "ts": 0, "pid": PID, "tid": 0, "args": {"name": "python3"}}, *events],
        schemaVersion=1, displayTimeUnit="ms",
        deviceProperties=[{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150109880320,
                           "computeMajor": 9, "computeMinor": 0, "numSms": 132, "warpSize": 32}]))


def _event_rows(ev):
    cols = ["name", "source", "parent", "host_self_ns", "device_self_ns", "device_total_ns", "n_gpu_events"]
    return [tuple(r) for r in ev[cols].itertuples(index=False)]


def test_the_first_event_keeps_the_kernel_it_launched(tmp_path):
    """aten::mm is the first event of the table (ts 1000 µs) and launches one 300 µs
    kernel itself: its own device time is that kernel, counted once."""
    tr = _load(tmp_path, [_op("aten::mm", 1000, 200, 2),                 # 1000-1200 µs
                          _launch(1050, 20, 2, 101),                     # inside aten::mm
                          _kernel("gemm_kernel", 1100, 300, 2, 101)], "first.json")
    assert _event_rows(op_events(tr)) == [
        # mm: 200 µs less the launch's 20 µs; the kernel's 300 µs is its own and its total
        ("aten::mm", "ops", -1, 180_000, 300_000, 300_000, 1),
        ("cudaLaunchKernel", "launches", 0, 20_000, 0, 0, 0)]


def test_kernels_lifted_through_two_folds_into_the_first_event(tmp_path):
    """aten::linear ⊃ aten::linear ⊃ aten::linear ⊃ cudaLaunchKernel, the outer one the
    first event of the table: each inner linear is its parent's only child and has its
    name, so both fold (two folds in a row) and the innermost one's 250 µs kernel is
    lifted to the outer one, which now launched none itself but owns that device time."""
    tr = _load(tmp_path, [_op("aten::linear", 1000, 400, 2),             # 1000-1400 µs, kept
                          _op("aten::linear", 1010, 300, 3),             # 1010-1310, folded
                          _op("aten::linear", 1020, 200, 4),             # 1020-1220, folded
                          _launch(1030, 20, 4, 101),                     # the innermost one's launch
                          _kernel("gemm_kernel", 1100, 250, 4, 101)], "folds.json")
    assert _event_rows(op_events(tr)) == [
        # outer linear: a folded child's children become the parent's, so its one child is
        # the launch: 400 - 20 µs; the lifted kernel is its own and its total; no launch of its own
        ("aten::linear", "ops", -1, 380_000, 250_000, 250_000, 0),
        # the launch's parent is the outer linear once both inner ones are folded away
        ("cudaLaunchKernel", "launches", 0, 20_000, 0, 0, 0)]


def test_shape_keys_write_a_tensor_list_argument_both_ways(tmp_path):
    """``input_shapes`` is ``str()`` of the ``Input Dims`` list with a tensor-list argument
    (``aten::cat``'s, whose members' shapes the trace writes as a nested list) written
    ``[]``, as ``key_averages(group_by_input_shape=True)`` keys it; ``input_dims_nested``
    keeps the members; an event without ``Input Dims`` is ``[]`` in both."""
    cat = _op("aten::cat", 1000, 50, 2)
    cat["args"]["Input Dims"] = [[[4, 8], [4, 8]], []]      # two 4×8 tensors, then the dim (a scalar)
    mm = _op("aten::mm", 1100, 50, 3)
    mm["args"]["Input Dims"] = [[4, 8], [8, 2]]
    ev = op_events(_load(tmp_path, [cat, mm, _op("my_range", 1200, 50, 4)], "shapes.json"))
    assert [tuple(r) for r in ev[["name", "input_shapes", "input_dims_nested"]].itertuples(index=False)] == [
        ("aten::cat", "[[], []]", "[[[4, 8], [4, 8]], []]"),
        ("aten::mm", "[[4, 8], [8, 2]]", "[[4, 8], [8, 2]]"),
        ("my_range", "[]", "[]")]


def test_shapes_key_on_its_own():
    """Called directly: the profiler's key is the default; a missing value (None, pd.NA,
    NaN, as a table column holds it) is ``[]``; a tuple argument is not a tensor list."""
    assert shapes_key([[[4, 8], [4, 8]], []]) == "[[], []]"                  # the list argument as []
    assert shapes_key([[[4, 8], [4, 8]], []], lists="nested") == "[[[4, 8], [4, 8]], []]"
    assert [shapes_key(x) for x in (None, pd.NA, float("nan"))] == ["[]"] * 3
    assert shapes_key(([2, 3], (4,))) == "[[2, 3], (4,)]"                  # str() of each member as given


def test_every_event_of_a_step_hangs_under_that_step_from_raw_json():
    """fixed_batch: each ``ProfilerStep#N`` of the raw JSON is a row at the top (parent
    -1: no host event on its thread starts at or before it and ends at or after it), and
    every row that is a raw host event lying inside a step on the step's thread (matched by
    name and start, ts µs × 1000) reaches that step's row by following ``parent``. The first
    row of the table is such a step, so its children are checked too."""
    path = REF / "fixed_batch" / "trace.json.gz"
    raw = [(e["name"], e["tid"], int(e["ts"] * 1000), int(e["ts"] * 1000) + int(e["dur"] * 1000))
           for e in json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)["traceEvents"]
           if e.get("ph") == "X" and e.get("cat") in HOST_CATS]
    steps = [r for r in raw if r[0].startswith("ProfilerStep#")]
    assert len(steps) == 5
    for name, tid, s, t in steps:                  # nothing on the thread encloses a step
        assert not [r for r in raw if r[1] == tid and r[0] != name and r[2] <= s and r[3] >= t]
    inside = {(n, a): step for n, d, a, b in raw for step, tid, s, t in steps
              if d == tid and n != step and s <= a and b <= t}

    ev = op_events(kitlib.open_capture("fixed_batch").trace)
    parent = ev["parent"].to_numpy()
    pos = {(n, int(s)): i for i, (n, s) in enumerate(zip(ev["name"], ev["start_ns"]))}
    step_pos = {name: pos[(name, s)] for name, _, s, _ in steps}
    assert step_pos[steps[0][0]] == 0                           # the table starts with the first step
    assert [parent[i] for i in step_pos.values()] == [-1] * 5
    assert set(np.unique(parent[parent < 0]).tolist()) == {-1}   # a row at the top has parent -1
    rows = np.array([pos[k] for k in inside if k in pos])
    want = np.array([step_pos[inside[k]] for k in inside if k in pos])
    assert len(inside) > 9_000 and len(rows) > 0.9 * len(inside)   # all but the filtered names
    top = rows.copy()
    for _ in range(200):                                         # walk up to the top
        up = parent[top]
        top = np.where(up >= 0, up, top)
    assert (top == want).all()


def test_op_events_of_a_learners_filtered_trace():
    """A learner's edit, ``dataclasses.replace(trace, ops=ops[ops.name != "aten::empty"])``:
    the kept rows keep the reader's row labels, which are no longer positions. op_events
    read them as positions and failed (IndexError). Now every kept event keeps its name,
    times, ids and shapes, and its GPU time; only host self time grows, by the removed
    children's time."""
    import dataclasses
    import kitlib
    from kitlib.analyses.events import op_events
    tr = kitlib.open_capture("profiler_5step").trace
    ops = tr.ops
    gone = ops["name"] == "aten::empty"
    assert gone.sum() > 0
    whole = op_events(tr)
    whole = whole[whole["name"] != "aten::empty"].reset_index(drop=True)
    cut = op_events(dataclasses.replace(tr, ops=ops[~gone])).reset_index(drop=True)
    assert len(cut) == len(whole)
    for col in ("name", "kind", "start_ns", "end_ns", "source", "row", "external_id", "input_shapes",
                "sequence_number", "device_self_ns", "device_total_ns", "n_gpu_events"):
        assert cut[col].astype(object).fillna(-1).tolist() == whole[col].astype(object).fillna(-1).tolist(), col
    grew = cut["host_self_ns"].to_numpy() - whole["host_self_ns"].to_numpy()
    assert (grew >= 0).all() and grew.sum() == ops.loc[gone, "dur_ns"].sum()


# --- moved from the docstrings of kitlib/analyses/events.py (issue 39) ----------------------

def test_shapes_keys_of_a_column_both_ways():
    import numpy as np
    from kitlib.analyses.events import shapes_keys
    dims = np.empty(3, dtype=object)
    dims[:] = [[[2, 3], [3, 4]], None, [[[4, 8], [4, 8]], [2]]]
    assert shapes_keys(dims).tolist() == ["[[2, 3], [3, 4]]", "[]", "[[], [2]]"]
    assert shapes_keys(dims, "nested").tolist()[2] == "[[[4, 8], [4, 8]], [2]]"


def test_own_gpu_ns_enclosing_python_and_op_stacks_on_the_tiny_traces():
    from kitlib.analyses.chain import chain
    from kitlib.analyses.events import enclosing_python, op_events, op_stacks, own_gpu_ns
    from kitlib.model.examples import tiny_profile_doc, tiny_trace
    from kitlib.readers.trace import trace_from_json
    tr = tiny_trace()
    ns, n = own_gpu_ns(tr, tr.host_events, chain(tr))
    assert tr.host_events["name"].tolist() == ["ProfilerStep#1", "aten::relu", "cudaLaunchKernel", "aten::add"]
    assert ns.tolist() == [0, 400, 0, 0] and n.tolist() == [0, 1, 0, 0]
    tr = trace_from_json(tiny_profile_doc())
    ev = op_events(tr)
    names = ["ProfilerStep#1", "forward", "aten::conv2d", "cudaLaunchKernel", "aten::relu", "cudaLaunchKernel"]
    assert ev["name"].tolist() == names
    python = tr.ops["name"].reindex(enclosing_python(tr, ev)).tolist()
    assert python[0] != python[0]                      # NaN: no frame around the step
    assert python[1:] == ["model.py(5): forward"] * 5
    stacks = op_stacks(tr, n=2)
    assert stacks == [()] + [("model.py(5): forward", "nn.Module: Net_0")] * 5
