"""Small values to try the model on, built in code: for docstring examples and tests.

Examples
--------
>>> from kitlib.model.examples import tiny_trace
>>> tr = tiny_trace()
>>> tr.ops[["name", "kind", "start_ns", "end_ns"]]
             name        kind  start_ns  end_ns
0  ProfilerStep#1        step         0    1000
1      aten::relu          op       100     400
2      aten::add          op       400     400
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .schema import GPU_COLUMNS, LAUNCH_COLUMNS, MEMORY_COLUMNS, OPS_COLUMNS, OTHER_COLUMNS
from .trace import Trace
from .tree import build_host_tree


def _table(rows: list, columns: list, ints=("pid", "tid", "start_ns", "dur_ns", "end_ns")) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=columns)
    df = df.astype({c: "int64" for c in ints if c in df.columns})
    for c in ("external_id", "correlation", "sequence_number", "fwd_thread_id", "python_id",
              "python_parent_id", "device", "stream", "cbid", "bytes"):
        if c in df.columns:
            df[c] = df[c].astype("Int64")
    return df


def tiny_trace() -> Trace:
    """A five-event trace: one step, two operators, one launch, one kernel.

    =================  ==========  ==========  ======  ==================================
    event              table       start (ns)  end     note
    =================  ==========  ==========  ======  ==================================
    ``ProfilerStep#1`` ops (step)  0           1000
    ``aten::relu``     ops (op)    100         400     external id 1
    ``aten::add``      ops (op)    400         400     zero-length, at relu's end
    cudaLaunchKernel   launches    150         250     correlation 7, external id 1
    ``relu_kernel``    gpu         300         700     correlation 7, stream 7
    =================  ==========  ==========  ======  ==================================

    All on thread (pid 1, tid 1); the kernel on device 0. ``aten::add`` starts exactly
    where ``aten::relu`` ends, so under the kit's boundary rule (half-open
    ``[start, end)``) it is relu's sibling, a child of the step.

    Returns
    -------
    Trace
        With ``host_events`` built by :func:`kitlib.model.tree.build_host_tree`.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tiny_trace().launches[["name", "start_ns", "end_ns", "correlation", "external_id"]]
                   name  start_ns  end_ns  correlation  external_id
    0  cudaLaunchKernel       150     250            7            1
    """
    def op(name, kind, s, e, ext):
        row = dict.fromkeys(OPS_COLUMNS)
        row.update(name=name, pid=1, tid=1, start_ns=s, dur_ns=e - s, end_ns=e, kind=kind,
                   external_id=ext, parent=-1, depth=0)
        return [row[c] for c in OPS_COLUMNS]
    ops = _table([op("ProfilerStep#1", "step", 0, 1000, None), op("aten::relu", "op", 100, 400, 1),
                  op("aten::add", "op", 400, 400, None)], OPS_COLUMNS, ints=(
                      "pid", "tid", "start_ns", "dur_ns", "end_ns", "parent", "depth"))
    launches = _table([["cudaLaunchKernel", 1, 1, 150, 100, 250, "runtime", 7, 1, 211]], LAUNCH_COLUMNS)
    gpu = _table([["relu_kernel", 0, 7, 300, 400, 700, "kernel", 0, 7, 7, 1, (1, 1, 1), (128, 1, 1), None]],
                 GPU_COLUMNS)
    memory = _table([], MEMORY_COLUMNS)
    other = _table([], OTHER_COLUMNS)
    tree = build_host_tree(ops, launches)
    # ops' own parent and depth, read off the tree (launches are leaves)
    is_op = (tree["source"] == "ops").to_numpy()
    rows, tpar = tree["row"].to_numpy(), tree["parent"].to_numpy()
    parent = np.full(len(ops), -1, dtype=np.int64)
    for i in np.flatnonzero(is_op):
        if tpar[i] >= 0:
            parent[rows[i]] = rows[tpar[i]]
    depth = np.zeros(len(ops), dtype=np.int64)
    for r, p in enumerate(parent):
        depth[r] = depth[p] + 1 if p >= 0 else 0
    ops["parent"], ops["depth"] = parent, depth
    meta = {"format": "kineto", "devices": [], "profiler_options": {}, "versions": {},
            "base_time_ns": 0, "process_names": {}, "thread_names": {}, "category_counts": {},
            "python_frames_are_children": False, "python_frames_rule": "no Python frames",
            "time_resolution_ns": 1}
    return Trace(path=Path("tiny.json"), ops=ops, launches=launches, gpu=gpu, memory=memory,
                 other=other, meta=meta, host_events=tree)
