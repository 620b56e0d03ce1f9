"""Assertions that were ``Examples`` of ``kitlib/model`` (issue 39: the model keeps one or two
short runnable examples per public function; the test-like ones live here, unchanged). A table
is compared as it printed (``flat``: whitespace runs as one space, as doctest's
NORMALIZE_WHITESPACE did)."""
from __future__ import annotations

import numpy as np
import pandas as pd


def flat(text: str) -> str:
    return " ".join(text.split())


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
