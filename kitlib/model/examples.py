"""Small values to try the model on, built in code: for docstring examples and tests.

Examples
--------
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
from .tree import build_host_tree, depths


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

    All on thread (pid 1, tid 1), the kernel on device 0. ``aten::add`` starts where
    ``aten::relu`` ends: under ``[start, end)`` relu's sibling, a child of the step.

    Examples
    --------
    >>> tiny_trace().ops[["name", "kind", "start_ns", "end_ns"]]
                 name  kind  start_ns  end_ns
    0  ProfilerStep#1  step         0    1000
    1      aten::relu    op       100     400
    2       aten::add    op       400     400
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
    gpu = _table([["relu_kernel", 0, 7, 300, 400, 700, "kernel", 0, 7, 7, 1, (1, 1, 1), (128, 1, 1), None, np.nan]],
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
    ops["parent"], ops["depth"] = parent, depths(parent)
    meta = {"format": "kineto", "devices": [], "profiler_options": {}, "versions": {},
            "base_time_ns": 0, "process_names": {}, "thread_names": {}, "category_counts": {},
            "python_frames_are_children": False, "python_frames_rule": "no Python frames",
            "time_resolution_ns": 1}
    return Trace(path=Path("tiny.json"), ops=ops, launches=launches, gpu=gpu, memory=memory,
                 other=other, meta=meta, host_events=tree)


def tiny_profile_doc() -> dict:
    """A small torch.profiler trace *document* (parsed JSON) with what a full recording has:
    Python frames, a module, a ``record_function`` label and its GPU row, input shapes,
    two kernels, three allocator events. Build the :class:`Trace` with
    :func:`kitlib.readers.trace.trace_from_json`. Times in µs, as the profiler writes them:

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

    Host events on (pid 1, tid 1); GPU rows on (pid 0, tid 7), device 0.

    Examples
    --------
    >>> from kitlib.readers.trace import trace_from_json
    >>> trace_from_json(tiny_profile_doc()).ops[["name", "kind", "start_ns", "end_ns"]]
                          name        kind  start_ns  end_ns
    0           ProfilerStep#1        step         0   20000
    1  train.py(10): <module>      python       500   19500
    2         nn.Module: Net_0      python      1000   13000
    3     model.py(5): forward      python      1500   12500
    4                  forward  annotation      1600   12400
    5             aten::conv2d          op      2000    8000
    6               aten::relu          op      9000   11000
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


#: The ranks of :func:`tiny_rank_docs` (µs): each rank's all-reduce calls ``(seq, kernel
#: start, kernel end)`` and compute kernels ``(start, end)``; both ranks have the steps
#: ``ProfilerStep#1`` [0, 10000) and ``ProfilerStep#2`` [10000, 20000).
TINY_RANKS = {
    0: {"calls": [(0, 3100, 6000), (1, 13100, 15000)],
        "compute": [(1000, 3000), (4000, 5000), (11000, 13000)]},
    1: {"calls": [(0, 5100, 6000), (1, 14100, 15000)],
        "compute": [(1000, 5000), (11000, 14000)]},
}


def tiny_rank_docs() -> dict:
    """Two ranks of a data-parallel NCCL run as torch.profiler trace *documents*, by rank:
    two steps, one gradient all-reduce per step, rank 1 late at both.

    ====  ======  ======================  ==================================  ==============
    rank  step    compute kernels (µs)    all-reduce kernel (µs)              note
    ====  ======  ======================  ==================================  ==============
    0     1       1000–3000, 4000–5000    seq 0: 3100–6000                    waits 2000 µs
    1     1       1000–5000               seq 0: 5100–6000                    last, 2000 µs
    0     2       11000–13000             seq 1: 13100–15000                  waits 1000 µs
    1     2       11000–14000             seq 1: 14100–15000                  last, 1000 µs
    ====  ======  ======================  ==================================  ==============

    Steps as :data:`TINY_RANKS`. Each call is ``record_param_comms`` (group ``"0"``, ``Seq``,
    4096 elements) ⊃ ``nccl:all_reduce`` ⊃ ``cudaLaunchKernel`` (100 µs before its
    ``ncclDevKernel_AllReduce_*`` kernel, stream 20); compute kernels come from ``aten::mm``,
    stream 7. Rank 0's kernel 4000–5000 hides 1 ms of communication. Every document has
    ``distributedInfo`` (``nccl``, world size 2), no ``baseTimeNanoseconds``.

    Examples
    --------
    >>> tiny_rank_docs()[1]["distributedInfo"]
    {'backend': 'nccl', 'rank': 1, 'world_size': 2}
    """
    kernel = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"

    def x(cat, name, ts, dur, args, pid=100, tid=1):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}

    docs = {}
    for rank, spec in TINY_RANKS.items():
        ev = [x("user_annotation", "ProfilerStep#1", 0, 10000, {}),
              x("user_annotation", "ProfilerStep#2", 10000, 10000, {})]
        corr = 0
        for seq, a, b in spec["calls"]:
            corr += 1
            h = a - 100
            ev += [x("cpu_op", "record_param_comms", h - 20, 60, {
                       "External id": corr, "Collective name": "allreduce", "Process Group Name": "0",
                       "Seq": seq, "In msg nelems": 4096, "Out msg nelems": 4096, "Group size": 2}),
                   x("user_annotation", "nccl:all_reduce", h - 10, 40, {"External id": corr}),
                   x("cuda_runtime", "cudaLaunchKernel", h, 10, {"correlation": corr, "External id": corr}),
                   x("kernel", kernel, a, b - a, {"device": 0, "stream": 20, "correlation": corr,
                                                  "External id": corr}, pid=0, tid=20)]
        for a, b in spec["compute"]:
            corr += 1
            ev += [x("cpu_op", "aten::mm", a - 80, 30, {"External id": corr}),
                   x("cuda_runtime", "cudaLaunchKernel", a - 75, 10, {"correlation": corr, "External id": corr}),
                   x("kernel", "sm90_gemm_kernel", a, b - a, {"device": 0, "stream": 7, "correlation": corr,
                                                              "External id": corr}, pid=0, tid=7)]
        docs[rank] = {"schemaVersion": 1,
                      "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": len(TINY_RANKS)},
                      "traceEvents": sorted(ev, key=lambda e: (e["pid"], e["tid"], e["ts"]))}
    return docs


def tiny_rank_folder() -> Path:
    """The folder (in :func:`kitlib.paths.cache_dir`, named by a hash of the contents) holding
    :func:`tiny_rank_docs` as ``rank0.json`` and ``rank1.json``; files already right are kept.

    Examples
    --------
    >>> sorted(p.name for p in tiny_rank_folder().iterdir())
    ['rank0.json', 'rank1.json']
    """
    import hashlib
    import json
    import os
    import tempfile

    from ..paths import cache_dir
    data = {f"rank{r}.json": json.dumps(d, sort_keys=True).encode() for r, d in tiny_rank_docs().items()}
    digest = hashlib.sha256(b"".join(data[k] for k in sorted(data))).hexdigest()[:12]
    folder = cache_dir() / "examples" / f"tiny-ranks-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in data.items():
        path = folder / name
        try:
            if path.read_bytes() == body:
                continue
        except OSError:
            pass
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        os.replace(tmp, path)
    return folder
