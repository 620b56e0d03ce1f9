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
