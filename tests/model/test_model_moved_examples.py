"""Assertions that were ``Examples`` of ``kitlib/model`` (issue 39: the model keeps one or two
short runnable examples per public function; the test-like ones live here, unchanged). A table
is compared as it printed (``flat``: whitespace runs as one space, as doctest's
NORMALIZE_WHITESPACE did)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from support.text import flat


def test_count_in_both_ends():
    from kitlib.model.window import count_in
    assert count_in([0, 10], [10, 20], [0, 5, 10, 20], closed="both").tolist() == [3, 2]


def test_bounds_in():
    from kitlib.model.window import bounds_in
    lo, hi = bounds_in([0, 10], [10, 20], [0, 5, 10, 20])
    assert (lo.tolist(), hi.tolist()) == ([0, 2], [2, 3])


def test_tiny_trace_launches():
    from kitlib.model.examples import tiny_trace
    assert flat(repr(tiny_trace().launches[["name", "start_ns", "end_ns", "correlation", "external_id"]])) == flat('''
               name  start_ns  end_ns  correlation  external_id
0  cudaLaunchKernel       150     250            7            1''')


def test_tiny_profile_doc_gpu():
    from kitlib.model.examples import tiny_profile_doc
    from kitlib.readers.trace import trace_from_json
    tr = trace_from_json(tiny_profile_doc())
    assert flat(repr(tr.gpu[["name", "kind", "start_ns", "end_ns"]])) == flat('''
          name            kind  start_ns  end_ns
0  conv_kernel          kernel      5000    9000
1      forward  gpu_annotation      5000   11500
2  relu_kernel          kernel     10500   11500''')


def test_tiny_rank_docs_kernels():
    from kitlib.model.examples import tiny_rank_docs
    from kitlib.readers.trace import trace_from_json
    k = trace_from_json(tiny_rank_docs()[1]).kernels
    assert flat(repr(k.assign(name=k["name"].str[:30])[["name", "stream", "start_ns", "end_ns"]])) == flat('''
                             name  stream  start_ns    end_ns
0                sm90_gemm_kernel       7   1000000   5000000
1  ncclDevKernel_AllReduce_Sum_f3      20   5100000   6000000
2                sm90_gemm_kernel       7  11000000  14000000
3  ncclDevKernel_AllReduce_Sum_f3      20  14100000  15000000''')


def test_tiny_rank_folder():
    from kitlib.model.examples import tiny_rank_folder
    from kitlib.readers.ranks import load_traces
    folder = tiny_rank_folder()
    assert sorted(p.name for p in folder.iterdir()) == ['rank0.json', 'rank1.json']
    assert repr(load_traces(folder)) == "RankTraces(ranks [0, 1] of world size 2, backend nccl)"


def test_tree_walkers():
    from kitlib.model.examples import tiny_trace
    from kitlib.model.tree import ancestors, depths, descendants, nearest_ancestor
    t = tiny_trace().host_events
    assert list(t["name"]) == ['ProfilerStep#1', 'aten::relu', 'cudaLaunchKernel', 'aten::add']
    assert (ancestors(t, 2), ancestors(t["parent"].to_numpy(), 3)) == ([1, 0], [0])
    assert (descendants(t, 0), descendants(t, 1), descendants(t, 3)) == ([1, 2, 3], [2], [])
    assert list(zip(t["name"], t["kind"])) == [('ProfilerStep#1', 'step'), ('aten::relu', 'op'),
                                               ('cudaLaunchKernel', 'runtime'), ('aten::add', 'op')]
    is_op = (t["kind"] == "op").to_numpy()
    assert nearest_ancestor(t["parent"], is_op).tolist() == [-1, -1, 1, -1]
    assert nearest_ancestor(t["parent"], is_op, include_self=True).tolist() == [-1, 1, 1, 3]
    assert depths(np.array([2, -1, 1])).tolist() == [1, 0, 1]        # a parent after its child: one pass


def test_trace_derived_is_worked_out_once():
    from kitlib.model.examples import tiny_trace
    tr = tiny_trace()
    calls = []

    def count():
        calls.append(1)
        return len(tr.ops)
    assert (tr.derived("n_ops", ("ops",), count), tr.derived("n_ops", ("ops",), count), len(calls)) == (3, 3, 1)


def test_trace_steps_follow_ops():
    from kitlib.model.examples import tiny_trace
    tr = tiny_trace()
    tr.ops = tr.ops[tr.ops["kind"] != "step"]
    assert len(tr.steps) == 0


def test_trace_small_facts():
    from kitlib.model.examples import tiny_trace
    assert tiny_trace().device_names() == []
    assert tiny_trace().thread_names() == {}
    assert tiny_trace().has_gpu is True


def test_defect_table_empty():
    from kitlib.model.nsys import defect_table
    assert len(defect_table([])) == 0


def test_launches_by_correlation():
    from kitlib.model.nsys import launches_by_correlation
    launches = pd.DataFrame({"pid": [1, 1, 1], "correlation": [7, 7, None], "tid": [2, 3, 4]})
    assert flat(repr(launches_by_correlation(launches))) == flat('''
                 tid
pid correlation
1   7.0            2''')


def test_nsys_report_facts():
    from kitlib.readers.bundle import open_capture
    report = open_capture("nsys_8step").nsys
    assert (report.kernels[["short_name", "stream", "dur_ns"]].shape[1], len(report.kernels)) == (3, 4340)
    other = report.copy()
    other.meta["note"] = "mine"
    assert ("note" in report.meta, len(other.kernels) == len(report.kernels)) == (False, True)
    assert report.has_gpu is True
    assert report.device_names() == ['NVIDIA H200']
    names = report.thread_names()
    assert (len(names), "pt_autograd_0" in names.values()) == (289, True)
    assert report.version == '2025.3.2.0'
    assert flat(repr(report.steps[["step", "name", "start_ns", "dur_ns"]].head(3))) == flat('''
   step        name     start_ns      dur_ns
0     0  torch_step   9342297646  2656480289
1     1  torch_step  11998789830    52518179
2     2  torch_step  12051313275    39306474''')
    assert flat(report.describe()) == flat('''report.sqlite (Nsight Systems 2025.3.2.0, 1 GPU(s): NVIDIA H200)
  kernels 4340, API calls 12084, memcpy 541, memset 1612
  NVTX ranges 40, OS runtime calls 2392, threads 289
  absent tables: none
  defects read around: none''')


def test_check_source():
    import pytest
    from kitlib.errors import KitError
    from kitlib.model.examples import tiny_trace
    from kitlib.model.sources import check_source
    assert check_source(tiny_trace()) is None
    with pytest.raises(KitError) as e:
        check_source({"traceEvents": []}, what="before")
    assert str(e.value) == "before: expected a kitlib Trace (load_trace) or NsysReport (load_nsys), got dict"


def test_rank_traces_properties():
    from kitlib.model.examples import tiny_rank_folder
    from kitlib.readers.ranks import load_traces
    traces = load_traces(tiny_rank_folder())
    assert (traces.ranks, traces.world_size, traces.backend) == ([0, 1], 2, 'nccl')
