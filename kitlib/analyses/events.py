"""The host and device events that ``key_averages()`` counts: one event model.

:mod:`kitlib.analyses.grouping` and :mod:`kitlib.analyses.callsites` start here. Times are ns.

Sources: docs/SOURCES.md#events-python-stacks
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.tree import nearest_ancestor
from ..model.window import label_at
from ..model import Trace

#: Stack frames the profiler drops (``torch.autograd.profiler_util._filter_stack_entry``).
FILTERED_FRAMES = (("autograd/__init__", "_make_grads"), ("autograd/__init__", "backward"),
                   ("torch/tensor", "backward"), ("_internal/common_utils", "prof_callable"),
                   ("_internal/common_utils", "prof_func_call"), ("_internal/common_utils", "prof_meth_call"))

EVENT_COLUMNS = ["name", "key", "kind", "device_type", "pid", "tid", "start_ns", "end_ns", "dur_ns",
                 "external_id", "input_shapes", "input_dims_nested", "sequence_number", "fwd_thread_id",
                 "source", "row",
                 "parent", "host_self_ns", "device_self_ns", "device_total_ns", "n_gpu_events"]

def _key_names(names: np.ndarray) -> np.ndarray:
    """``ProfilerStep#N`` → ``ProfilerStep*`` for a whole column (each distinct name tested once)."""
    codes, uniques = pd.factorize(np.asarray(names, dtype=object), use_na_sentinel=False)
    step = np.array([isinstance(u, str) and u.startswith("ProfilerStep#") for u in uniques], dtype=bool)
    if not step.any():
        return np.asarray(names, dtype=object)
    return np.where(step[codes], "ProfilerStep*", names).astype(object)


def shapes_key(input_dims, lists: str = "profiler") -> str:
    """The profiler's ``input_shapes`` string, ``str()`` of the ``Input Dims`` list; ``"[]"``
    without shapes. A tensor-list argument (``aten::cat``) is written ``[]`` as the profiler
    keys it (``lists="profiler"``) or with its members' shapes (``lists="nested"``).

    Examples
    --------
    >>> shapes_key([[2, 3], [3, 4]])
    '[[2, 3], [3, 4]]'
    """
    if input_dims is None or input_dims is pd.NA or (isinstance(input_dims, float) and np.isnan(input_dims)):
        return "[]"
    dims = list(input_dims)
    if lists == "profiler":
        dims = [[] if isinstance(d, (list, tuple)) and any(isinstance(x, (list, tuple)) for x in d) else d
                for d in dims]
    return str(dims)


def shapes_keys(dims: np.ndarray, lists: str = "profiler") -> np.ndarray:
    """:func:`shapes_key` of a whole column of ``Input Dims`` (None/NaN: ``"[]"``), each
    distinct object worked out once; an object array.

    Examples
    --------
    >>> shapes_keys(np.array([[[2, 3], [3, 4]], None], dtype=object)).tolist()
    ['[[2, 3], [3, 4]]', '[]']
    """
    return _shapes_key_columns(dims, (lists,))[0]


def _shapes_key_columns(dims: np.ndarray, lists: tuple = ("profiler", "nested")) -> tuple:
    """:func:`shapes_key` of a column for each way in ``lists``, each distinct object once."""
    dims = np.asarray(dims, dtype=object)
    out = tuple(np.full(len(dims), "[]", dtype=object) for _ in lists)   # no shapes: "[]"
    at = np.flatnonzero(pd.notna(dims))
    if len(at):
        codes, _ = pd.factorize(np.fromiter(map(id, dims[at]), dtype=np.uint64, count=len(at)))
        _, first = np.unique(codes, return_index=True)
        keys = [_keys_of(dims[at[j]], lists) for j in first.tolist()]
        for w, col in enumerate(out):
            col[at] = np.array([k[w] for k in keys], dtype=object)[codes]
    return out


def _keys_of(d, lists: tuple) -> tuple:
    dims = list(d)
    if not any(isinstance(a, (list, tuple)) and any(isinstance(x, (list, tuple)) for x in a) for a in dims):
        k = str(dims)                                 # no tensor list: both ways write the same
        return tuple(k for _ in lists)
    return tuple(shapes_key(dims, w) for w in lists)


def op_events(trace: Trace, chain_df: pd.DataFrame | None = None, python_frames: bool = False) -> pd.DataFrame:
    """Every host event ``key_averages`` counts, with its parent and its own times.

    The events of ``trace.host_events``, Python frames only when ``python_frames`` (and the
    trace's rule makes them events). ``chain_df`` reuses :func:`kitlib.analyses.chain.chain`.

    Returns :data:`EVENT_COLUMNS` by start: ``key`` (``ProfilerStep*`` for steps),
    ``device_type`` ("CPU"), ``start_ns, end_ns, dur_ns`` (ns), ``input_shapes``
    (:func:`shapes_key`), ``source`` and ``row`` (where it comes from), ``parent`` (position
    here, -1 at the top); ns: ``host_self_ns`` (minus the children), ``device_self_ns`` (GPU
    time it launched), ``device_total_ns`` (with all below); ``n_gpu_events``.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> op_events(tiny_trace())[["name", "kind", "start_ns", "end_ns"]]
                   name     kind  start_ns  end_ns
    0    ProfilerStep#1     step         0    1000
    1        aten::relu       op       100     400
    2  cudaLaunchKernel  runtime       150     250
    3         aten::add       op       400     400
    """
    from .chain import chain as _chain
    c = _chain(trace) if chain_df is None else chain_df
    tree = trace.host_events
    if tree is None or not len(tree):
        return pd.DataFrame({k: [] for k in EVENT_COLUMNS})
    n = len(tree)
    src, rows = tree["source"].to_numpy(), tree["row"].to_numpy()
    is_ops, is_la = src == "ops", src == "launches"
    ops, L = trace.ops, trace.launches
    ext = np.full(n, pd.NA, dtype=object)
    dims = np.full(n, None, dtype=object)
    seq = np.full(n, pd.NA, dtype=object)
    fwd = np.full(n, pd.NA, dtype=object)
    if is_ops.any():
        r = _positions(ops, rows[is_ops])          # tree rows are labels (ops may have been filtered)
        ext[is_ops] = ops["external_id"].to_numpy(dtype=object)[r]
        dims[is_ops] = ops["input_dims"].to_numpy(dtype=object)[r]
        seq[is_ops] = ops["sequence_number"].to_numpy(dtype=object)[r]
        fwd[is_ops] = ops["fwd_thread_id"].to_numpy(dtype=object)[r]
    if is_la.any():
        ext[is_la] = L["external_id"].to_numpy(dtype=object)[_positions(L, rows[is_la])]

    own, n_own = own_gpu_ns(trace, tree, c)
    merged = tree["merged"].to_numpy()
    par = tree["profiler_parent"].to_numpy()
    total = _subtree_totals(own, par, merged)
    dur = tree["dur_ns"].to_numpy()
    self_host = dur - tree["children_ns"].to_numpy()

    keep = ~merged & (python_frames | (tree["kind"].to_numpy() != "python"))
    new_pos = np.cumsum(keep) - 1
    up = nearest_ancestor(par, keep)[keep]          # parent among kept rows, in the profiler's tree
    names = tree["name"].to_numpy()
    shapes, nested = _shapes_key_columns(dims[keep], ("profiler", "nested"))
    ev = pd.DataFrame({
        "name": names[keep], "key": _key_names(names[keep]), "kind": tree["kind"].to_numpy()[keep],
        "device_type": "CPU", "pid": tree["pid"].to_numpy()[keep], "tid": tree["tid"].to_numpy()[keep],
        "start_ns": tree["start_ns"].to_numpy()[keep], "end_ns": tree["end_ns"].to_numpy()[keep],
        "dur_ns": dur[keep], "external_id": ext[keep],
        "input_shapes": shapes, "input_dims_nested": nested,
        "sequence_number": seq[keep], "fwd_thread_id": fwd[keep],
        "source": src[keep], "row": rows[keep],
        "parent": np.where(up >= 0, new_pos[np.maximum(up, 0)], -1),
        "host_self_ns": self_host[keep], "device_self_ns": own[keep], "device_total_ns": total[keep],
        "n_gpu_events": n_own[keep]})
    return ev[EVENT_COLUMNS]


def _positions(table: pd.DataFrame, labels: np.ndarray) -> np.ndarray:
    """Positions in ``table`` of its row ``labels`` (the labels themselves on a 0..n-1 index)."""
    if table.index.equals(pd.RangeIndex(len(table))):
        return labels.astype(np.int64)
    return table.index.get_indexer(labels)


def own_gpu_ns(trace: Trace, tree: pd.DataFrame, c: pd.DataFrame) -> tuple:
    """``(ns, count)`` per row of ``tree`` (``trace.host_events``): the GPU time ("Self CUDA",
    int64 ns) and number of GPU events it launched itself, from the chain ``c``, damaged
    rows left out; a folded child's time is lifted into its nearest unfolded ancestor.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> from kitlib.analyses.chain import chain
    >>> tr = tiny_trace()
    >>> own_gpu_ns(tr, tr.host_events, chain(tr))
    (array([  0, 400,   0,   0]), array([0, 1, 0, 0]))
    """
    from .chain import impossible_gpu_events
    n = len(tree)
    src, rows = tree["source"].to_numpy(), tree["row"].to_numpy()
    is_ops = src == "ops"
    labels = trace.ops.index
    pos_of_op = np.full((int(labels.max()) + 2) if len(labels) else 1, -1, dtype=np.int64)   # by row label
    pos_of_op[rows[is_ops]] = np.flatnonzero(is_ops)
    bad = impossible_gpu_events(trace, c)
    op_row, gpu_row = c["op_row"].to_numpy(dtype=np.int64), c["gpu_row"].to_numpy()
    use = (op_row >= 0) & ~np.isin(gpu_row, bad["gpu_row"].to_numpy())   # damaged rows are not work
    pos = pos_of_op[op_row[use]]
    ok = pos >= 0
    own = np.zeros(n, dtype=np.int64)
    n_own = np.zeros(n, dtype=np.int64)
    np.add.at(own, pos[ok], c["gpu_dur_ns"].to_numpy()[use][ok].astype(np.int64))
    np.add.at(n_own, pos[ok], 1)
    merged = tree["merged"].to_numpy()
    folded = np.flatnonzero(merged)
    if len(folded):
        par = tree["profiler_parent"].to_numpy()
        into = nearest_ancestor(par, ~merged)[folded]
        has = into >= 0
        folded, into = folded[has], into[has]
        # several folded children of one ancestor: the last one's, as a loop over them would leave it
        _, last = np.unique(into[::-1], return_index=True)
        last = len(into) - 1 - last
        own[into[last]] = own[folded[last]]
    return own, n_own


def _subtree_totals(own: np.ndarray, par: np.ndarray, merged: np.ndarray) -> np.ndarray:
    """``own`` plus that of every unfolded event below it in the tree ``par`` (folded: nothing up)."""
    total = own.copy()
    at = np.flatnonzero(~merged & (par >= 0))
    val, up = own[at], par[at]
    while len(up):
        np.add.at(total, up, val)
        go = ~merged[up] & (par[up] >= 0)
        up, val = par[up[go]], val[go]
    return total


def gpu_events(trace: Trace) -> pd.DataFrame:
    """The device rows of ``key_averages``: every GPU event keyed by its own name, with
    ``device_type`` "CUDA", ``input_shapes`` "[]", ``host_self_ns`` 0, device self and total
    its own duration, ``source`` "gpu" and ``row`` (label in ``trace.gpu``).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> gpu_events(tiny_trace())[["name", "device_type", "start_ns", "end_ns"]]
              name device_type  start_ns  end_ns
    0  relu_kernel        CUDA       300     700
    """
    g = trace.gpu
    return pd.DataFrame({
        "name": g["name"].to_numpy(), "key": g["name"].to_numpy(), "kind": g["kind"].to_numpy(),
        "device_type": "CUDA", "start_ns": g["start_ns"].to_numpy(), "end_ns": g["end_ns"].to_numpy(),
        "dur_ns": g["dur_ns"].to_numpy(), "input_shapes": "[]", "host_self_ns": 0,
        "device_self_ns": g["dur_ns"].to_numpy(), "device_total_ns": g["dur_ns"].to_numpy(), "n_gpu_events": 1,
        "source": "gpu", "row": g.index.to_numpy()})


def _python_frames(trace: Trace):
    """Python rows of ``trace.ops`` and, for each, its frame names up to the root (innermost
    first), by ``Python parent id`` where the caller is in the trace, else by the tree."""
    ops = trace.ops
    is_py_col = (ops["kind"] == "python").to_numpy()
    py = ops[is_py_col]
    if not ops.index.equals(pd.RangeIndex(len(ops))):      # parent holds row labels
        names = ops["name"].to_dict()
        parent = ops["parent"].to_dict()
        is_py = dict(zip(ops.index, is_py_col.tolist()))
    else:                                                   # labels are positions: plain lists
        names = ops["name"].tolist()
        parent = ops["parent"].tolist()
        is_py = is_py_col.tolist()
    rows = py.index.tolist()
    caller = {}                                             # frame row -> its caller's row, by the tracer's ids
    if "python_parent_id" in py.columns and py["python_parent_id"].notna().any():
        key = list(zip(py["pid"].tolist(), py["tid"].tolist()))
        by_id = {(k, i): r for r, k, i in zip(rows, key, py["python_id"].tolist()) if i is not pd.NA}
        start, end = dict(zip(rows, py["start_ns"].tolist())), dict(zip(rows, py["end_ns"].tolist()))
        for r, k, i in zip(rows, key, py["python_parent_id"].tolist()):
            c = by_id.get((k, i)) if i is not pd.NA else None
            # the caller on the same thread, open when the frame began (an id reused elsewhere is not it)
            if c is not None and c != r and start[c] <= start[r] <= end[c]:
                caller[r] = c

    def up(r):
        p = caller.get(r, -1)
        if p < 0:
            p = parent[r]
            while p >= 0 and not is_py[p]:            # only Python frames make a Python stack
                p = parent[p]
        return p

    memo: dict[int, tuple] = {}
    for r in rows:               # start order: a caller usually precedes its callees
        chain, seen = [], set()
        while r >= 0 and r not in memo and r not in seen:
            chain.append(r)
            seen.add(r)
            r = up(r)
        base = memo.get(r, ()) if r >= 0 else ()
        for c in reversed(chain):
            base = (names[c],) + base
            memo[c] = base
    return py, memo


def enclosing_python(trace: Trace, events: pd.DataFrame) -> np.ndarray:
    """Row label (in ``trace.ops``) of the innermost Python frame open on the same thread when
    each of ``events`` (``pid, tid, start_ns``) began; -1 where none is.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> tr = trace_from_json(tiny_profile_doc())
    >>> enclosing_python(tr, op_events(tr)).tolist()
    [-1, 3, 3, 3, 3, 3]
    """
    ops = trace.ops
    py = ops[ops["kind"] == "python"]
    out = np.full(len(events), -1, dtype=np.int64)
    if py.empty or len(events) == 0:
        return out
    for (pid, tid), grp in events.assign(_pos=np.arange(len(events))).groupby(["pid", "tid"], sort=False):
        p = py[(py["pid"] == pid) & (py["tid"] == tid)]
        if p.empty:
            continue
        out[grp["_pos"].to_numpy()] = label_at(grp["start_ns"].to_numpy(), p).to_numpy(np.int64, na_value=-1)
    return out


def _keep_frame(f: str) -> bool:
    return all(not (a in f and b in f) for a, b in FILTERED_FRAMES)


def _backward_nodes(events: pd.DataFrame) -> np.ndarray:
    """Which ``events`` are autograd nodes (``X`` inside ``autograd::engine::evaluate_function: X``)."""
    names = events["name"].to_numpy()
    parent = events["parent"].to_numpy()
    prefix = "autograd::engine::evaluate_function: "
    return np.array([parent[i] >= 0 and names[parent[i]] == prefix + names[i] for i in range(len(events))])


def op_stacks(trace: Trace, events: pd.DataFrame | None = None, n: int | None = None,
              filtered: bool = True, backward: bool = True) -> list:
    """The Python stack of every host event (``events``, :func:`op_events` by default), as
    ``key_averages(group_by_stack_n=…)`` forms it: the ``n`` innermost frames, with the
    profiler's dropped frames out (``filtered``) and events under an autograd node given the
    forward operator's stack (``backward``).

    Returns one tuple per event, innermost first; ``()`` where no Python frame encloses it.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> tr = trace_from_json(tiny_profile_doc())
    >>> op_stacks(tr, n=2)[2]
    ('model.py(5): forward', 'nn.Module: Net_0')
    """
    ev = op_events(trace) if events is None else events
    _, memo = _python_frames(trace)
    enc = enclosing_python(trace, ev)
    stacks = [memo.get(r, ()) if r >= 0 else () for r in enc]
    # a Python frame's own stack is the frames around it (docs/SOURCES.md#events-python-stacks)
    if "kind" in ev.columns:
        for i in np.flatnonzero((ev["kind"] == "python").to_numpy() & (ev["source"] == "ops").to_numpy()):
            stacks[i] = memo.get(ev["row"].iat[i], ())[1:]
    # torch >= 2.12's own "Call stack" wins over the rebuilt one
    cs = trace.ops["call_stack"]
    if cs.notna().any():
        own = cs.to_numpy(dtype=object)
        src, rows = ev["source"].to_numpy(), ev["row"].to_numpy()
        for i in range(len(ev)):
            if src[i] == "ops" and isinstance(own[rows[i]], str):
                stacks[i] = tuple(f for f in own[rows[i]].split(";") if f)
    if filtered:                      # many events share a stack: filter each distinct one once
        kept: dict = {}
        stacks = [kept[s] if s in kept else kept.setdefault(s, tuple(f for f in s if _keep_frame(f)))
                  for s in stacks]
    if backward and len(ev):
        stacks = _inherit_backward(ev, stacks)
    if n is not None:
        stacks = [s[:n] for s in stacks]
    return stacks


def _inherit_backward(ev: pd.DataFrame, stacks: list) -> list:
    node = _backward_nodes(ev)
    # nearest enclosing autograd node (the event itself included)
    bw = nearest_ancestor(ev["parent"].to_numpy(), node, include_self=True)
    seq = ev["sequence_number"].to_numpy(dtype=object)
    fwd: dict = {}
    for i in range(len(ev)):
        s = seq[i]
        if bw[i] < 0 and s is not None and s is not pd.NA and s not in fwd:
            fwd[s] = stacks[i]
    out = list(stacks)
    for i in np.flatnonzero(bw >= 0):
        s = seq[bw[i]]
        out[i] = fwd.get(s, ()) if s is not None and s is not pd.NA else ()
    return out
