"""The host and device events that ``key_averages()`` counts: one event model.

Both the grouping by name and shape (:mod:`kitlib.analyses.grouping`) and the
grouping by call site (:mod:`kitlib.analyses.callsites`) start from the same
table: every host event the profiler keeps, with its parent (time nesting on one
thread, CUDA launches as children, the profiler's merge of same-name single
children), its self/total host time and the device time of the GPU events it
launched (:func:`op_events`); the GPU events as rows of their own
(:func:`gpu_events`); and each event's Python stack as the profiler forms it
(:func:`op_stacks`).

Sources: PyTorch ``torch/autograd/profiler_util.py`` (``_filter_name``,
``_filter_stack_entry``, ``EventList._remove_dup_nodes``,
``_set_backward_stacktraces``, ``_populate_cpu_children``); checked against the
profiler's own rows in ``data/reference/fixed_batch/key_averages.json.gz``.
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

def _key_name(name: str) -> str:
    """The profiler's display name: every ``ProfilerStep#N`` becomes ``ProfilerStep*``."""
    return "ProfilerStep*" if isinstance(name, str) and name.startswith("ProfilerStep#") else name


def _key_names(names: np.ndarray) -> np.ndarray:
    """:func:`_key_name` for a whole column at once (each distinct name tested once)."""
    codes, uniques = pd.factorize(np.asarray(names, dtype=object), use_na_sentinel=False)
    step = np.array([isinstance(u, str) and u.startswith("ProfilerStep#") for u in uniques], dtype=bool)
    if not step.any():
        return np.asarray(names, dtype=object)
    return np.where(step[codes], "ProfilerStep*", names).astype(object)


def shapes_key(input_dims, lists: str = "profiler") -> str:
    """The profiler's ``input_shapes`` string: ``str()`` of the ``Input Dims`` list.

    ``[[128, 3, 224, 224], [64, 3, 7, 7], [], []]`` → ``"[[128, 3, 224, 224], [64, 3, 7, 7], [], []]"``;
    an event without shapes (launches, kernels, annotations, shapes not recorded) → ``"[]"``.

    Parameters
    ----------
    input_dims : list or None
        The trace's ``Input Dims``. For an argument that is a list of tensors
        (``aten::cat``, ``aten::stack``, ``aten::lstm``) the trace writes the members'
        shapes as a nested list, ``[[4, 8], [4, 8]]``.
    lists : {"profiler", "nested"}
        ``"profiler"``: such an argument is written ``[]``, as ``key_averages(
        group_by_input_shape=True)`` keys it (the profiler's ``shapes()`` holds a
        shape per argument, and a tensor list has none); ``"nested"``: the members'
        shapes are kept, which says more.

    Examples
    --------
    >>> from kitlib.analyses.events import shapes_key
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
    """:func:`shapes_key` of a whole column, each distinct object worked out once.

    Parameters
    ----------
    dims : array of object
        One ``Input Dims`` list (or None/NaN: no shapes) per row, e.g. ``trace.ops["input_dims"]``.
    lists : {"profiler", "nested"}
        As :func:`shapes_key`.

    Returns
    -------
    ndarray of object
        One key string per row (``"[]"`` where there are no shapes).

    Examples
    --------
    >>> import numpy as np
    >>> from kitlib.analyses.events import shapes_keys
    >>> dims = np.empty(3, dtype=object)
    >>> dims[:] = [[[2, 3], [3, 4]], None, [[[4, 8], [4, 8]], [2]]]
    >>> shapes_keys(dims).tolist()
    ['[[2, 3], [3, 4]]', '[]', '[[], [2]]']
    >>> shapes_keys(dims, "nested").tolist()[2]
    '[[[4, 8], [4, 8]], [2]]'
    """
    return _shapes_key_columns(dims, (lists,))[0]


def _shapes_key_columns(dims: np.ndarray, lists: tuple = ("profiler", "nested")) -> tuple:
    """:func:`shapes_key` of a column for each way in ``lists`` (object arrays), each
    distinct object worked out once: the reader shares one list between the rows with
    equal shapes, so a column of 100,000 operators holds a few hundred."""
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

    Host events are the operators, ``record_function`` ranges and steps of
    ``trace.ops`` and the CUDA runtime/driver calls of ``trace.launches``, nested as
    the profiler nests them: the trace's one event tree, ``trace.host_events``
    (:func:`kitlib.readers.trace.build_host_tree`), which already leaves out the
    names the profiler filters and marks the events it folds into a same-named
    parent. Whether Python frames count as children (and so lower their parents'
    self time) is the tree's rule for this trace (``trace.meta["python_frames_rule"]``);
    they are rows here only when asked (``python_frames``).

    Parameters
    ----------
    trace : Trace
    chain_df : DataFrame, optional
        A :func:`kitlib.analyses.chain.chain` result to reuse (computed when absent). Its
        ``op_row`` says which operator launched each GPU event.
    python_frames : bool
        Also list the Python frames that are events of the tree (kind ``python``), as
        torch 2.12–2.13's ``key_averages()`` does (and 2.14's with
        ``include_python_functions=True``). Where the trace's rule keeps them out of
        the tree (torch ≤ 2.11) there are none to list.

    Returns
    -------
    DataFrame
        One row per host event, sorted by start: ``name`` (as in the trace), ``key``
        (the profiler's name, ``ProfilerStep*`` for steps), ``kind`` (``op``,
        ``annotation``, ``step``, ``runtime``, ``driver``), ``device_type`` (``"CPU"``),
        ``pid, tid, start_ns, end_ns, dur_ns`` (ns), ``external_id``, ``input_shapes``
        (the profiler's key string, see :func:`shapes_key`), ``input_dims_nested``
        (the same shapes with the members of tensor-list arguments written out),
        ``sequence_number``, ``fwd_thread_id``, ``source`` (``ops`` or ``launches``)
        and ``row`` (row label there), ``parent`` (position in this table of the
        nearest enclosing row, -1 at the top), ``host_self_ns`` (interval minus the
        direct children's intervals, children as the profiler counts them),
        ``device_self_ns`` (GPU events this event launched itself, or those lifted
        from a folded child), ``device_total_ns`` (those of it and all events nested
        in it) and ``n_gpu_events`` (GPU events it launched itself).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> from kitlib.analyses.events import op_events
    >>> op_events(tr)[["name", "kind", "start_ns", "end_ns"]]
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
    """Positions in ``table`` of its row ``labels`` (the labels themselves when its index is
    0, 1, 2, ... as a reader makes it; a learner's filtered table keeps the reader's labels)."""
    if table.index.equals(pd.RangeIndex(len(table))):
        return labels.astype(np.int64)
    return table.index.get_indexer(labels)


def own_gpu_ns(trace: Trace, tree: pd.DataFrame, c: pd.DataFrame) -> tuple:
    """The GPU time and count of GPU events each event of ``tree`` (``trace.host_events``)
    launched itself: the chain's rows whose operator it is, less
    :func:`~kitlib.analyses.chain.impossible_gpu_events`. The profiler lifts a folded
    (``merged``) child's GPU time into its nearest unfolded ancestor, in place of that
    ancestor's own (the last such child's, in start order); the counts stay.

    Parameters
    ----------
    trace : Trace
    tree : DataFrame
        ``trace.host_events``.
    c : DataFrame
        ``kitlib.analyses.chain.chain(trace)``.

    Returns
    -------
    (ndarray, ndarray)
        Per row of ``tree``: the GPU time (int64 ns; the profiler's "Self CUDA") and the
        number of GPU events (int64).

    Examples
    --------
    >>> from kitlib.analyses.chain import chain
    >>> from kitlib.analyses.events import own_gpu_ns
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> ns, n = own_gpu_ns(tr, tr.host_events, chain(tr))
    >>> tr.host_events["name"].tolist(), ns.tolist(), n.tolist()
    (['ProfilerStep#1', 'aten::relu', 'cudaLaunchKernel', 'aten::add'], [0, 400, 0, 0], [0, 1, 0, 0])
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
    """``own`` plus the ``own`` of every unfolded event below, in the profiler's tree
    (``par``): each unfolded event's value added to its ancestors, one level up per
    round, for all events at once. A folded event passes nothing up to its parent (in
    the profiler's tree none is a parent: its children became its parent's)."""
    total = own.copy()
    at = np.flatnonzero(~merged & (par >= 0))
    val, up = own[at], par[at]
    while len(up):
        np.add.at(total, up, val)
        go = ~merged[up] & (par[up] >= 0)
        up, val = par[up[go]], val[go]
    return total


def gpu_events(trace: Trace) -> pd.DataFrame:
    """The device rows of ``key_averages``: every GPU event (kernels, copies, sets and
    GPU-side annotations), keyed by its own name.

    Returns
    -------
    DataFrame
        ``name, key, kind, device_type`` (``"CUDA"``), ``start_ns, end_ns, dur_ns``,
        ``input_shapes`` (``"[]"``), ``host_self_ns`` (0), ``device_self_ns`` and
        ``device_total_ns`` (its own duration), ``n_gpu_events`` (1), ``source``
        (``"gpu"``) and ``row`` (row label in ``trace.gpu``).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> from kitlib.analyses.events import gpu_events
    >>> gpu_events(tr)[["name", "device_type", "start_ns", "end_ns"]]
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
    """Python rows of ``trace.ops`` and, for each, the tuple of frame names from it up
    to the root (innermost first). A frame's caller is the frame its ``Python parent id``
    names (the tracer's own link, as the profiler's stacks follow it); where that frame is
    not in the trace, the innermost Python frame around it in the trace's tree
    (``Trace.ops.parent``). The tree alone misplaces frames that begin inside a frame
    which a ``ProfilerStep#N`` range overlaps (issue 41: the step begins inside
    ``record_function.__enter__``, so the frames after it nested in the step, not in ``__enter__``)."""
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
    """Row label (in ``trace.ops``) of the innermost Python frame open on the same
    thread when each event began; -1 where none is.

    Parameters
    ----------
    events : DataFrame
        With ``pid, tid, start_ns, end_ns`` (e.g. :func:`kitlib.analyses.events.op_events`).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> from kitlib.analyses.events import enclosing_python, op_events
    >>> tr = trace_from_json(tiny_profile_doc())
    >>> ev = op_events(tr)
    >>> ev.assign(python=tr.ops["name"].reindex(enclosing_python(tr, ev)).to_numpy())[["name", "python"]]
                   name                python
    0    ProfilerStep#1                   NaN
    1           forward  model.py(5): forward
    2      aten::conv2d  model.py(5): forward
    3  cudaLaunchKernel  model.py(5): forward
    4        aten::relu  model.py(5): forward
    5  cudaLaunchKernel  model.py(5): forward
    """
    ops = trace.ops
    py = ops[ops["kind"] == "python"]
    out = np.full(len(events), -1, dtype=np.int64)
    if py.empty or len(events) == 0:
        return out
    ev_pos = pd.Series(np.arange(len(events)))
    for (pid, tid), grp in events.assign(_pos=ev_pos.to_numpy()).groupby(["pid", "tid"], sort=False):
        p = py[(py["pid"] == pid) & (py["tid"] == tid)]
        if p.empty:
            continue
        # the innermost frame open when the event began (an operator is nested in it;
        # a record_function range begins inside its __enter__ frame)
        # (-1, not <NA>, where none: this function's documented contract, read by op_stacks)
        out[grp["_pos"].to_numpy()] = label_at(grp["start_ns"].to_numpy(), p).to_numpy(np.int64, na_value=-1)
    return out


def _keep_frame(f: str) -> bool:
    return all(not (a in f and b in f) for a, b in FILTERED_FRAMES)


def _backward_nodes(events: pd.DataFrame) -> np.ndarray:
    """Positions of autograd nodes (``ConvolutionBackward0`` inside
    ``autograd::engine::evaluate_function: ConvolutionBackward0``): the events the
    profiler records with the BACKWARD_FUNCTION scope."""
    names = events["name"].to_numpy()
    parent = events["parent"].to_numpy()
    prefix = "autograd::engine::evaluate_function: "
    return np.array([parent[i] >= 0 and names[parent[i]] == prefix + names[i] for i in range(len(events))])


def op_stacks(trace: Trace, events: pd.DataFrame | None = None, n: int | None = None,
              filtered: bool = True, backward: bool = True) -> list:
    """The Python stack of every host event, as ``key_averages(group_by_stack_n=…)`` forms it.

    Parameters
    ----------
    events : DataFrame, optional
        :func:`kitlib.analyses.events.op_events` (computed when absent).
    n : int, optional
        Keep only the ``n`` innermost frames.
    filtered : bool
        Drop the frames the profiler drops (``torch/autograd/__init__ backward`` …).
    backward : bool
        Give events under an autograd node the stack of the forward operator with
        the node's sequence number (the profiler's ``_set_backward_stacktraces``).

    Returns
    -------
    list of tuple of str
        One tuple per row of ``events``, innermost frame first; ``()`` where no Python
        frame encloses the event (other threads, or no ``with_stack``).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> from kitlib.analyses.events import op_events, op_stacks
    >>> tr = trace_from_json(tiny_profile_doc())
    >>> for name, stack in zip(op_events(tr)["name"], op_stacks(tr, n=2)):
    ...     print(f"{name:16s}", stack)
    ProfilerStep#1   ()
    forward          ('model.py(5): forward', 'nn.Module: Net_0')
    aten::conv2d     ('model.py(5): forward', 'nn.Module: Net_0')
    cudaLaunchKernel ('model.py(5): forward', 'nn.Module: Net_0')
    aten::relu       ('model.py(5): forward', 'nn.Module: Net_0')
    cudaLaunchKernel ('model.py(5): forward', 'nn.Module: Net_0')
    """
    ev = op_events(trace) if events is None else events
    _, memo = _python_frames(trace)
    enc = enclosing_python(trace, ev)
    stacks = [memo.get(r, ()) if r >= 0 else () for r in enc]
    # a Python frame's own stack is the frames around it, not itself: the profiler (2.12–2.13,
    # whose frames are rows) keys "nn.Module: LSTM_0" by its callers, as the frame's
    # "Call stack" in a verbose trace reads (issue 41)
    if "kind" in ev.columns:
        for i in np.flatnonzero((ev["kind"] == "python").to_numpy() & (ev["source"] == "ops").to_numpy()):
            stacks[i] = memo.get(ev["row"].iat[i], ())[1:]
    # torch >= 2.12 writes each operator's stack itself ("Call stack", innermost first):
    # that is the profiler's own stack, so it wins over the rebuilt one
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
