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


def tiny_profile_doc() -> dict:
    """A small torch.profiler trace *document* (the parsed JSON), with what a full
    recording has: Python frames, a module, a ``record_function`` label and its GPU-side
    row, input shapes, two kernels and three allocator events.

    Build the :class:`Trace` with :func:`kitlib.readers.trace.trace_from_json` (the
    model does not decode JSON). Times in µs, as the profiler writes them:

    =======================================  ===================  ======  ======
    event                                    cat                  ts      end
    =======================================  ===================  ======  ======
    ``ProfilerStep#1``                       user_annotation      0       20
    ``train.py(10): <module>``               python_function      0.5     19.5
    ``nn.Module: Net_0``                     python_function      1       13
    ``model.py(5): forward``                 python_function      1.5     12.5
    ``forward``                              user_annotation      1.6     12.4
    ``aten::conv2d`` (1×3×8×8, 4×3×3×3)      cpu_op               2       8
    ``cudaLaunchKernel`` (correlation 10)    cuda_runtime         3       4
    ``aten::relu`` (1×4×6×6)                 cpu_op               9       11
    ``cudaLaunchKernel`` (correlation 11)    cuda_runtime         9.5     10
    ``conv_kernel``                          kernel (stream 7)    5       9
    ``relu_kernel``                          kernel (stream 7)    10.5    11.5
    ``forward``                              gpu_user_annotation  5       11.5
    ``[memory]`` +4096 B, +1024 B, −4096 B   cpu_instant_event    2.5, 9.2, 15
    =======================================  ===================  ======  ======

    All host events on (pid 1, tid 1); the GPU rows on (pid 0, tid 7), device 0.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> tr = trace_from_json(tiny_profile_doc())
    >>> tr.ops[["name", "kind", "start_ns", "end_ns"]]
                          name        kind  start_ns  end_ns
    0           ProfilerStep#1        step         0   20000
    1  train.py(10): <module>      python       500   19500
    2         nn.Module: Net_0      python      1000   13000
    3     model.py(5): forward      python      1500   12500
    4                  forward  annotation      1600   12400
    5             aten::conv2d          op      2000    8000
    6               aten::relu          op      9000   11000
    >>> tr.gpu[["name", "kind", "start_ns", "end_ns"]]
              name            kind  start_ns  end_ns
    0  conv_kernel          kernel      5000    9000
    1      forward  gpu_annotation      5000   11500
    2  relu_kernel          kernel     10500   11500
    """
    def x(cat, name, ts, dur, args=None, pid=1, tid=1):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
                "args": args or {}}

    def mem(ts, nbytes, addr, total):
        return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1,
                "tid": 1, "ts": ts, "args": {"Total Reserved": 2097152, "Total Allocated": total,
                                             "Bytes": nbytes, "Device Id": 0, "Device Type": 1,
                                             "Addr": addr}}
    gpu = {"device": 0, "context": 1, "stream": 7}
    events = [
        x("user_annotation", "ProfilerStep#1", 0, 20, {"External id": 1}),
        x("python_function", "train.py(10): <module>", 0.5, 19, {"Python id": 1, "Python parent id": None}),
        x("python_function", "nn.Module: Net_0", 1, 12, {"Python id": 2, "Python parent id": 1}),
        x("python_function", "model.py(5): forward", 1.5, 11, {"Python id": 3, "Python parent id": 2}),
        x("user_annotation", "forward", 1.6, 10.8, {"External id": 2}),
        x("cpu_op", "aten::conv2d", 2, 6, {
            "External id": 3, "Sequence number": 5, "Fwd thread id": 0,
            "Input Dims": [[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], []],
            "Input type": ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
            "Input Strides": [[192, 64, 8, 1], [27, 9, 3, 1], [], [], [], [], []],
            "Concrete Inputs": ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "1"]}),
        x("cuda_runtime", "cudaLaunchKernel", 3, 1, {"External id": 3, "cbid": 211, "correlation": 10}),
        x("cpu_op", "aten::relu", 9, 2, {
            "External id": 4, "Sequence number": 6, "Fwd thread id": 0,
            "Input Dims": [[1, 4, 6, 6]], "Input type": ["float"], "Input Strides": [[144, 36, 6, 1]],
            "Concrete Inputs": [""]}),
        x("cuda_runtime", "cudaLaunchKernel", 9.5, 0.5, {"External id": 4, "cbid": 211, "correlation": 11}),
        x("kernel", "conv_kernel", 5, 4, {"External id": 3, "correlation": 10, **gpu}, pid=0, tid=7),
        x("kernel", "relu_kernel", 10.5, 1, {"External id": 4, "correlation": 11, **gpu}, pid=0, tid=7),
        x("gpu_user_annotation", "forward", 5, 6.5, {"External id": 2, **gpu}, pid=0, tid=7),
        mem(2.5, 4096, 1000, 4096), mem(9.2, 1024, 2000, 5120), mem(15, -4096, 1000, 1024),
    ]
    return {"schemaVersion": 1, "record_shapes": 1, "profile_memory": 1, "with_stack": 1,
            "with_flops": 1, "traceEvents": events}
