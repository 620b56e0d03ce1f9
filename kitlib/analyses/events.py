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

from .chain import innermost_containing
from ..readers.trace import Trace

#: Names the profiler never lists (``torch.autograd.profiler_util._filter_name``).
FILTERED_NAMES = frozenset({"[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                            "profiler::_record_function_enter_new", "profiler::_record_function_exit",
                            "aten::is_leaf", "aten::output_nr", "aten::_version"})

#: Stack frames the profiler drops (``torch.autograd.profiler_util._filter_stack_entry``).
FILTERED_FRAMES = (("autograd/__init__", "_make_grads"), ("autograd/__init__", "backward"),
                   ("torch/tensor", "backward"), ("_internal/common_utils", "prof_callable"),
                   ("_internal/common_utils", "prof_func_call"), ("_internal/common_utils", "prof_meth_call"))

EVENT_COLUMNS = ["name", "key", "kind", "device_type", "pid", "tid", "start_ns", "end_ns", "dur_ns",
                 "external_id", "input_shapes", "sequence_number", "fwd_thread_id", "source", "row",
                 "parent", "host_self_ns", "device_self_ns", "device_total_ns", "n_gpu_events"]

def _key_name(name: str) -> str:
    """The profiler's display name: every ``ProfilerStep#N`` becomes ``ProfilerStep*``."""
    return "ProfilerStep*" if isinstance(name, str) and name.startswith("ProfilerStep#") else name


def shapes_key(input_dims) -> str:
    """The profiler's ``input_shapes`` string: ``str()`` of the ``Input Dims`` list.

    ``[[128, 3, 224, 224], [64, 3, 7, 7], [], []]`` → ``"[[128, 3, 224, 224], [64, 3, 7, 7], [], []]"``;
    an event without shapes (launches, kernels, annotations, shapes not recorded) → ``"[]"``.
    """
    if input_dims is None or input_dims is pd.NA or (isinstance(input_dims, float) and np.isnan(input_dims)):
        return "[]"
    return str(list(input_dims))


def _tree(starts, ends, groups):
    """Parent (position, -1 at the top) of every interval, by the profiler's rule.

    Per group (thread), intervals sorted by (start, -end); an interval is a child of
    the innermost open one that it does not outlast (``_populate_cpu_children``).
    """
    n = len(starts)
    parent = np.full(n, -1, dtype=np.int64)
    order = np.lexsort((-ends, starts, groups))
    stack: list[int] = []
    last_group = None
    for i in order:
        g = groups[i]
        if g != last_group:
            stack, last_group = [], g
        s, e = starts[i], ends[i]
        while stack:
            p = stack[-1]
            if s >= ends[p] or e > ends[p]:
                stack.pop()
            else:
                parent[i] = p
                break
        stack.append(i)
    return parent


def op_events(trace: Trace, chain_df: pd.DataFrame | None = None, python_children: bool = False) -> pd.DataFrame:
    """Every host event ``key_averages`` counts, with its parent and its own times.

    Host events are the operators, ``record_function`` ranges and steps of
    ``trace.ops`` (not Python frames) and the CUDA runtime/driver calls of
    ``trace.launches``; the names in :data:`FILTERED_NAMES` are left out and the
    profiler's merge of same-name single children is applied.

    Parameters
    ----------
    trace : Trace
    chain_df : DataFrame, optional
        A :func:`kitlib.analyses.chain.chain` result to reuse (computed when absent). Its
        ``op_row`` says which operator launched each GPU event.
    python_children : bool
        Whether Python frames (``with_stack``) take part in the nesting, as children
        that reduce an event's self host time. torch 2.11 (the reference recordings)
        leaves them out; newer releases keep them in the event list, which lowers the
        self time of ``record_function`` ranges (they contain Python frames) — pass
        True to rebuild such a release's table. Python frames are never rows here.

    Returns
    -------
    DataFrame
        One row per host event, sorted by start: ``name`` (as in the trace), ``key``
        (the profiler's name, ``ProfilerStep*`` for steps), ``kind`` (``op``,
        ``annotation``, ``step``, ``runtime``, ``driver``), ``device_type`` (``"CPU"``),
        ``pid, tid, start_ns, end_ns, dur_ns`` (ns), ``external_id``, ``input_shapes``
        (the profiler's string, see :func:`shapes_key`), ``sequence_number``,
        ``fwd_thread_id``, ``source`` (``ops`` or ``launches``) and ``row`` (row label
        there), ``parent`` (position in this table, -1 at the top), ``host_self_ns``
        (interval minus the direct children's intervals), ``device_self_ns`` (GPU
        events this event launched itself), ``device_total_ns`` (those of it and all
        events nested in it) and ``n_gpu_events`` (GPU events it launched itself).
    """
    from .chain import chain as _chain
    c = _chain(trace) if chain_df is None else chain_df
    ops = trace.ops[trace.ops["kind"] != "python"]
    L = trace.launches
    parts = []
    if len(ops):
        parts.append(pd.DataFrame({
            "name": ops["name"].to_numpy(), "kind": ops["kind"].to_numpy(),
            "pid": ops["pid"].to_numpy(), "tid": ops["tid"].to_numpy(),
            "start_ns": ops["start_ns"].to_numpy(), "end_ns": ops["end_ns"].to_numpy(),
            "external_id": ops["external_id"].to_numpy(),
            "input_shapes": [shapes_key(d) for d in ops["input_dims"]],
            "sequence_number": ops["sequence_number"].to_numpy(),
            "fwd_thread_id": ops["fwd_thread_id"].to_numpy(),
            "source": "ops", "row": ops.index.to_numpy()}))
    if len(L):
        parts.append(pd.DataFrame({
            "name": L["name"].to_numpy(), "kind": L["api"].to_numpy(),
            "pid": L["pid"].to_numpy(), "tid": L["tid"].to_numpy(),
            "start_ns": L["start_ns"].to_numpy(), "end_ns": L["end_ns"].to_numpy(),
            "external_id": L["external_id"].to_numpy(), "input_shapes": "[]",
            "sequence_number": pd.NA, "fwd_thread_id": pd.NA,
            "source": "launches", "row": L.index.to_numpy()}))
    if not parts:
        return pd.DataFrame({k: [] for k in EVENT_COLUMNS})
    pyf = trace.ops[trace.ops["kind"] == "python"]
    if python_children and len(pyf):
        parts.append(pd.DataFrame({
            "name": pyf["name"].to_numpy(), "kind": "python", "pid": pyf["pid"].to_numpy(),
            "tid": pyf["tid"].to_numpy(), "start_ns": pyf["start_ns"].to_numpy(), "end_ns": pyf["end_ns"].to_numpy(),
            "external_id": pd.NA, "input_shapes": "[]", "sequence_number": pd.NA, "fwd_thread_id": pd.NA,
            "source": "python", "row": pyf.index.to_numpy()}))
    ev = pd.concat(parts, ignore_index=True)
    ev = ev[~ev["name"].isin(FILTERED_NAMES)]
    ev = ev.sort_values(["start_ns", "end_ns"], ascending=[True, False], kind="stable").reset_index(drop=True)
    ev["key"] = [_key_name(n) for n in ev["name"]]
    ev["device_type"] = "CPU"
    ev["dur_ns"] = ev["end_ns"] - ev["start_ns"]

    # own GPU events: chain rows whose operator is this host event (ops rows only)
    op_pos = pd.Series(np.arange(len(ev)), index=ev["row"].where(ev["source"] == "ops", -1 - np.arange(len(ev))))
    c_op = c[c["op_row"] >= 0]
    pos = op_pos.reindex(c_op["op_row"].to_numpy()).to_numpy()
    ok = ~np.isnan(pos)
    own = np.zeros(len(ev), dtype=np.int64)
    n_own = np.zeros(len(ev), dtype=np.int64)
    np.add.at(own, pos[ok].astype(np.int64), c_op["gpu_dur_ns"].to_numpy()[ok].astype(np.int64))
    np.add.at(n_own, pos[ok].astype(np.int64), 1)

    groups = pd.factorize(pd.Series(list(zip(ev["pid"], ev["tid"]))))[0]
    starts, ends = ev["start_ns"].to_numpy(np.int64), ev["end_ns"].to_numpy(np.int64)
    parent = _tree(starts, ends, groups)
    keep, parent, own = _remove_dup_nodes(ev["name"].to_numpy(), parent, own)
    ev = ev[keep].copy()
    # renumber parents to positions in the kept table
    new_pos = np.cumsum(keep) - 1
    parent = parent[keep]
    parent = np.where(parent >= 0, new_pos[np.maximum(parent, 0)], -1)
    own, n_own = own[keep], n_own[keep]
    ev = ev.reset_index(drop=True)

    dur = ev["dur_ns"].to_numpy(np.int64)
    child_host = np.zeros(len(ev), dtype=np.int64)
    has_p = parent >= 0
    np.add.at(child_host, parent[has_p], dur[has_p])
    total = own.copy()
    depth = _depths(parent)
    for i in np.argsort(-depth, kind="stable"):  # deepest first: children before parents
        if parent[i] >= 0:
            total[parent[i]] += total[i]
    ev["parent"] = parent
    ev["host_self_ns"] = dur - child_host
    ev["device_self_ns"] = own
    ev["device_total_ns"] = total
    ev["n_gpu_events"] = n_own
    if python_children and (ev["source"] == "python").any():
        keep = (ev["source"] != "python").to_numpy()
        new_pos = np.cumsum(keep) - 1
        # a host event's parent may now be a Python frame: point at the nearest host ancestor
        par = ev["parent"].to_numpy().copy()
        for i in range(len(par)):
            p = par[i]
            while p >= 0 and not keep[p]:
                p = par[p]
            par[i] = p
        ev["parent"] = np.where(par >= 0, new_pos[np.maximum(par, 0)], -1)
        ev = ev[keep].reset_index(drop=True)
    return ev[EVENT_COLUMNS]


def _depths(parent: np.ndarray) -> np.ndarray:
    depth = np.zeros(len(parent), dtype=np.int64)
    # parents precede children in start order, so one pass in position order suffices
    for i in range(len(parent)):
        if parent[i] >= 0:
            depth[i] = depth[parent[i]] + 1
    return depth


def _remove_dup_nodes(names, parent, own):
    """The profiler's merge: a child with its parent's name, and no sibling, disappears;
    its children move up to the parent and the parent's own kernels become the child's
    (``EventList._remove_dup_nodes``). Repeats until nothing changes."""
    n = len(names)
    keep = np.ones(n, dtype=bool)
    parent = parent.copy()
    own = own.copy()
    while True:
        alive = np.flatnonzero(keep)
        n_children = np.zeros(n, dtype=np.int64)
        p_alive = parent[alive]
        np.add.at(n_children, p_alive[p_alive >= 0], 1)
        drop = [i for i in alive if parent[i] >= 0 and names[parent[i]] == names[i] and n_children[parent[i]] == 1]
        if not drop:
            return keep, parent, own
        for i in drop:
            p = parent[i]
            own[p] = own[i]
            parent[parent == i] = p
            keep[i] = False


def gpu_events(trace: Trace) -> pd.DataFrame:
    """The device rows of ``key_averages``: every GPU event (kernels, copies, sets and
    GPU-side annotations), keyed by its own name.

    Returns
    -------
    DataFrame
        ``name, key, kind, device_type`` (``"CUDA"``), ``start_ns, end_ns, dur_ns``,
        ``input_shapes`` (``"[]"``), ``host_self_ns`` (0), ``device_self_ns`` and
        ``device_total_ns`` (its own duration), ``n_gpu_events`` (1).
    """
    g = trace.gpu
    return pd.DataFrame({
        "name": g["name"].to_numpy(), "key": g["name"].to_numpy(), "kind": g["kind"].to_numpy(),
        "device_type": "CUDA", "start_ns": g["start_ns"].to_numpy(), "end_ns": g["end_ns"].to_numpy(),
        "dur_ns": g["dur_ns"].to_numpy(), "input_shapes": "[]", "host_self_ns": 0,
        "device_self_ns": g["dur_ns"].to_numpy(), "device_total_ns": g["dur_ns"].to_numpy(), "n_gpu_events": 1})


def _python_frames(trace: Trace):
    """Python rows of ``trace.ops`` and, for each, the tuple of frame names from it up
    to the root (innermost first), following ``Python parent id``."""
    ops = trace.ops
    py = ops[ops["kind"] == "python"]
    names = ops["name"].to_dict()
    parent = ops["parent"].to_dict()
    memo: dict[int, tuple] = {}
    for r in py.index:  # start order: a parent precedes its children
        p = parent[r]
        memo[r] = (names[r],) + memo.get(p, ()) if p >= 0 else (names[r],)
    return py, memo


def enclosing_python(trace: Trace, events: pd.DataFrame) -> np.ndarray:
    """Row label (in ``trace.ops``) of the innermost Python frame open on the same
    thread when each event began; -1 where none is.

    Parameters
    ----------
    events : DataFrame
        With ``pid, tid, start_ns, end_ns`` (e.g. :func:`kitlib.analyses.events.op_events`).
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
        out[grp["_pos"].to_numpy()] = innermost_containing(p, grp["start_ns"].to_numpy())
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
    """
    ev = op_events(trace) if events is None else events
    _, memo = _python_frames(trace)
    enc = enclosing_python(trace, ev)
    stacks = [memo.get(r, ()) if r >= 0 else () for r in enc]
    if filtered:
        stacks = [tuple(f for f in s if _keep_frame(f)) for s in stacks]
    if backward and len(ev):
        stacks = _inherit_backward(ev, stacks)
    if n is not None:
        stacks = [s[:n] for s in stacks]
    return stacks


def _inherit_backward(ev: pd.DataFrame, stacks: list) -> list:
    node = _backward_nodes(ev)
    parent = ev["parent"].to_numpy()
    # nearest enclosing autograd node (the event itself included)
    bw = np.full(len(ev), -1, dtype=np.int64)
    for i in range(len(ev)):  # parents come first in start order
        if node[i]:
            bw[i] = i
        elif parent[i] >= 0:
            bw[i] = bw[parent[i]]
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
