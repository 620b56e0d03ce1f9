"""``grouping.group_ops`` pinned column by column, row by row and in its row order.

Written against the survivors of a mutation run (README, "For developers"): each test
names the kind of one-line change it catches. The oracle is the profiler's own
``key_averages()`` of the same run (``data/reference/fixed_batch/key_averages.json.gz``,
saved by ``data/reference/how_captured/capture_tables.py``) or sums over the same trace.
"""
import gzip
import json

import numpy as np
import pandas as pd
import pytest

from kitlib.analyses import grouping as G

REF_COLUMNS = ["name", "device_type", "count", "host_total_ns", "host_self_ns", "device_total_ns",
               "device_self_ns", "cpu_memory_bytes", "self_cpu_memory_bytes", "device_memory_bytes",
               "self_device_memory_bytes", "flops", "host_per_call_ns", "device_per_call_ns"]


@pytest.fixture(scope="module")
def fixed(ref_trace):
    t = ref_trace("fixed_batch")
    return t, G.group_ops(t)


def _key_averages():
    from conftest import REF
    return pd.DataFrame(json.loads(gzip.open(REF / "fixed_batch" / "key_averages.json.gz").read())["by_name"])


def test_memory_and_flops_columns_equal_key_averages_row_by_row(fixed):
    """CPU/CUDA Mem, Self CPU/CUDA Mem and FLOPs of every name the profiler prints once
    (162 of 168; forward, backward and Optimizer.step#SGD.step appear as a CPU and a CUDA
    row), exactly, as int64; a row without allocations has 0, not a filler value."""
    _, g = fixed
    ka = _key_averages()
    twice = set(ka["key"][ka["key"].duplicated()]) | set(g["name"][g["name"].duplicated()])
    assert twice == {"forward", "backward", "Optimizer.step#SGD.step"}
    m = g[~g["name"].isin(twice)].merge(ka[~ka["key"].isin(twice)], left_on="name", right_on="key",
                                        suffixes=("", "_profiler"), validate="one_to_one")
    assert len(m) == 162
    for ours, theirs in [("count", "count_profiler"), ("cpu_memory_bytes", "cpu_memory_usage_bytes"),
                         ("self_cpu_memory_bytes", "self_cpu_memory_usage_bytes"),
                         ("device_memory_bytes", "device_memory_usage_bytes"),
                         ("self_device_memory_bytes", "self_device_memory_usage_bytes"), ("flops", "flops_profiler")]:
        assert g[ours].dtype == np.int64, ours
        assert (m[ours] == m[theirs]).all(), (ours, m.loc[m[ours] != m[theirs], ["name", ours, theirs]].head())
    # rows with no allocation at all exist and read 0 (the profiler prints them blank or 0)
    assert ((m["cpu_memory_usage_bytes"] == 0) & (m["device_memory_usage_bytes"] == 0)).sum() > 50


def test_columns_order_and_index(fixed):
    """The documented columns in order, a fresh 0..n-1 index, sorted by self device time,
    then self host time, largest first (key_averages' table sorted by self CUDA time)."""
    _, g = fixed
    assert g.columns.tolist() == REF_COLUMNS
    assert isinstance(g.index, pd.RangeIndex) and g.index.start == 0 and g.index.step == 1
    d, h = g["device_self_ns"].to_numpy(), g["host_self_ns"].to_numpy()
    assert (d[:-1] >= d[1:]).all()
    tie = d[:-1] == d[1:]
    assert (h[:-1][tie] >= h[1:][tie]).all() and tie.any()
    assert g["name"].iloc[0] == _key_averages().sort_values("self_device_time_total_us", ascending=False)["key"].iloc[0]
    for c in REF_COLUMNS[2:12]:
        assert g[c].dtype == np.int64, c


def test_default_is_by_name_and_a_wrong_key_is_named(fixed):
    t, g = fixed
    pd.testing.assert_frame_equal(G.group_ops(t, events=None), g)
    with pytest.raises(ValueError, match=r"by must be 'name', 'input_shape' or 'stack', not 'shape'"):
        G.group_ops(t, by="shape")


def test_without_gpu_rows_the_host_rows_are_unchanged(fixed):
    """include_gpu=False leaves out the CUDA rows (kernels, memcpy, memset) only."""
    t, g = fixed
    host = G.group_ops(t, include_gpu=False)
    assert set(host["device_type"]) == {"CPU"} and set(g["device_type"]) == {"CPU", "CUDA"}
    cols = ["name", "count", "host_total_ns", "host_self_ns", "device_total_ns", "device_self_ns"]
    a = host[cols].sort_values("name").reset_index(drop=True)
    b = g.loc[g["device_type"] == "CPU", cols].sort_values("name").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_the_python_frames_rule_travels_with_the_table(fixed):
    t, g = fixed
    assert g.attrs["python_frames_rule"] == t.meta["python_frames_rule"]
    assert "Python frames" in g.attrs["python_frames_rule"]


def test_every_grouping_keeps_every_call_and_every_ns(fixed):
    """By name, by input shape and by stack are three cuts of the same events: counts and
    self times add up to the same totals (no event dropped for a missing shape or stack)."""
    t, g = fixed
    totals = g[["count", "host_self_ns", "device_self_ns"]].sum()
    for by in ("input_shape", "stack"):
        other = G.group_ops(t, by=by)
        pd.testing.assert_series_equal(other[["count", "host_self_ns", "device_self_ns"]].sum(), totals, check_names=False)
        key = {"input_shape": "input_shapes", "stack": "stack"}[by]
        assert other[key].isna().sum() == 0
    # and the CUDA rows' self time is all the GPU time of the window's launches
    cuda = g[g["device_type"] == "CUDA"]
    assert cuda["count"].sum() == len(t.gpu) and cuda["device_self_ns"].sum() == int(t.gpu["dur_ns"].sum())


# -- 1 December, the survivors of the whole-module run: each test calls group_ops itself -----
# (mutmut credits a module fixture's analysis to the first test that uses it, so the tests
# above, which read ``fixed``, were never run against most of group_ops' mutants.)

def _paper_trace(tmp_path):
    """A hand-built trace, thread (1, 1), times in µs:
    aten::b [0, 10] launches kb (4 µs on the GPU) by cudaLaunchKernel [2, 3];
    aten::a [20, 30] launches ka (4 µs) by cudaLaunchKernel [22, 23];
    aten::c [40, 45] with input [[4]] and aten::c [50, 55] with input [[5]], no launch.
    a and b have the same figures, and so do ka and kb: ties, b and kb first in time."""
    from kitlib.readers.trace import load_trace
    ev = []
    for name, ts, dur, ext, dims in (("aten::b", 0, 10, 1, [[2, 3]]), ("aten::a", 20, 10, 2, [[2, 3]]),
                                     ("aten::c", 40, 5, 3, [[4]]), ("aten::c", 50, 5, 4, [[5]])):
        ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                   "args": {"External id": ext, "Input Dims": dims}})
    for ts, ext, corr, kernel, kts in ((2, 1, 101, "kb", 100), (22, 2, 102, "ka", 110)):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts,
                   "dur": 1, "args": {"External id": ext, "correlation": corr}})
        ev.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": kts, "dur": 4,
                   "args": {"correlation": corr, "device": 0, "stream": 7, "External id": ext}})
    path = tmp_path / "paper.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    return load_trace(path)


#: group_ops(by="name") of the paper trace, worked by hand (ns): a/b total 10 µs, self 10 - 1
#: (the launch is a child) = 9 µs, their kernel's 4 µs as self and total device time; each
#: kernel a CUDA row of its own; aten::c 2 calls, 2 x 5 µs; the two launches 2 x 1 µs. Sorted by
#: device self then host self time, largest first; ties (b/a, kb/ka) in the order they first
#: appear (b at 0 µs before a at 20 µs, kb at 100 µs before ka at 110 µs), not by name.
_PAPER_BY_NAME = [
    # name, device_type, count, host_total, host_self, device_total, device_self
    ("aten::b", "CPU", 1, 10_000, 9_000, 4_000, 4_000),
    ("aten::a", "CPU", 1, 10_000, 9_000, 4_000, 4_000),
    ("kb", "CUDA", 1, 0, 0, 4_000, 4_000),
    ("ka", "CUDA", 1, 0, 0, 4_000, 4_000),
    ("aten::c", "CPU", 2, 10_000, 10_000, 0, 0),
    ("cudaLaunchKernel", "CPU", 2, 2_000, 2_000, 0, 0),
]


def _expected(rows, shapes=None):
    cols = ["name", "device_type", "count", "host_total_ns", "host_self_ns", "device_total_ns", "device_self_ns"]
    df = pd.DataFrame(rows, columns=cols)
    if shapes is not None:
        df.insert(2, "input_shapes", shapes)
    for c in cols[2:]:
        df[c] = df[c].astype(np.int64)
    df["host_per_call_ns"] = df["host_total_ns"] / df["count"]
    df["device_per_call_ns"] = df["device_total_ns"] / df["count"]
    return df


def _same_table(got, want):
    assert got.columns.tolist() == want.columns.tolist()
    assert isinstance(got.index, pd.RangeIndex) and got.index.equals(pd.RangeIndex(len(want)))
    for c in want.columns:
        assert got[c].tolist() == want[c].tolist(), c
        if want[c].dtype.kind in "if":
            assert got[c].dtype == want[c].dtype, c


def test_group_ops_rows_order_and_ties_on_paper(tmp_path):
    """Every cell of group_ops on the paper trace, by name and by input shape, with and
    without the GPU rows; the fresh 0..n-1 index; ties keep their first-appearance order."""
    tr = _paper_trace(tmp_path)
    _same_table(G.group_ops(tr), _expected(_PAPER_BY_NAME))
    _same_table(G.group_ops(tr, include_gpu=False), _expected([r for r in _PAPER_BY_NAME if r[1] == "CPU"]))
    # by input shape: aten::c splits into its two shapes (1 call, 5 µs each, [[4]] first in time);
    # GPU rows and launches have no shapes: "[]"
    rows = _PAPER_BY_NAME[:4] + [("aten::c", "CPU", 1, 5_000, 5_000, 0, 0)] * 2 + _PAPER_BY_NAME[5:]
    shapes = ["[[2, 3]]", "[[2, 3]]", "[]", "[]", "[[4]]", "[[5]]", "[]"]
    _same_table(G.group_ops(tr, by="input_shape"), _expected(rows, shapes))


def test_group_ops_carries_the_traces_python_frames_rule(tmp_path, ref_trace):
    """attrs["python_frames_rule"] is the rule the trace was read with (its meta), on the
    paper trace (no Python frames) and on fixed_batch (frames of torch <= 2.11: not children)."""
    tr = _paper_trace(tmp_path)
    g = G.group_ops(tr)
    assert g.attrs == {"python_frames_rule": tr.meta["python_frames_rule"]}
    assert g.attrs["python_frames_rule"].startswith("no Python frames in the trace")
    fb = ref_trace("fixed_batch")
    g = G.group_ops(fb, include_gpu=False)
    assert g.attrs == {"python_frames_rule": fb.meta["python_frames_rule"]}
    assert "Python frames" in g.attrs["python_frames_rule"] and "not children" in g.attrs["python_frames_rule"]


def test_memory_and_flops_per_event_on_paper(tmp_path):
    """_with_memory_and_flops (what group_ops and shape_table sum) on a hand-built trace:
    aten::mm [0, 10] µs with inputs [2, 3] x [3, 4], and inside it aten::empty [2, 4] µs;
    two CUDA memory records (Device Type 1): +512 B at 3 µs (inside both) and -128 B at
    8 µs (inside aten::mm only); no CPU record.
    By hand: aten::empty CUDA Mem 512, self 512; aten::mm CUDA Mem 512 - 128 = 384, self
    384 - 512 (its child's) = -128; CPU Mem 0 everywhere (no CPU record: 0, not missing);
    FLOPs of mm = 2 x 2 x 3 x 4 = 48 (the profiler's formula), of empty 0. All int64."""
    from kitlib.analyses.events import op_events
    from kitlib.readers.trace import load_trace

    def mem(ts, nbytes, total):
        return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts, "s": "t",
                "args": {"Total Reserved": 2048, "Total Allocated": total, "Bytes": nbytes, "Addr": 4096,
                         "Device Id": 0, "Device Type": 1}}
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10,
           "args": {"External id": 1, "Input Dims": [[2, 3], [3, 4]]}},
          {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 2, "dur": 2,
           "args": {"External id": 2, "Input Dims": []}},
          mem(3, 512, 512), mem(8, -128, 384)]
    path = tmp_path / "memory.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    tr = load_trace(path)
    w = G._with_memory_and_flops(tr, op_events(tr)).set_index("name")
    want = {"cpu_memory_bytes": [0, 0], "self_cpu_memory_bytes": [0, 0], "device_memory_bytes": [384, 512],
            "self_device_memory_bytes": [-128, 512], "flops": [48, 0]}
    for c, values in want.items():
        assert w.loc[["aten::mm", "aten::empty"], c].tolist() == values, c
        assert w[c].dtype == np.int64, c
    # and the same figures in group_ops' rows
    g = G.group_ops(tr).set_index("name")
    for c, values in want.items():
        assert g.loc[["aten::mm", "aten::empty"], c].tolist() == values, c
        assert g[c].dtype == np.int64, c


def test_shape_table_of_an_operator_that_never_ran(ref_trace):
    """The docstring's promise: an empty table with the usual columns, not an error (a CPU
    rank trace has no cudnn convolution; no trace has ``aten::no_such_op``)."""
    t = ref_trace("ranks_balanced/rank0")
    for name in ("aten::cudnn_convolution", "aten::no_such_op"):
        e = G.shape_table(t, name)
        assert e.empty and list(e.columns) == ["input_shapes", "first_input", "tensors", "count", "device_total_ns",
                                               "device_per_call_ns", "device_share", "host_total_ns"]
        assert str(e["first_input"].dtype) == str(e["tensors"].dtype) == str(e["input_shapes"].dtype)
