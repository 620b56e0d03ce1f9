"""The one event tree: the profiler's parent/child rule, built once, with walkers.

:func:`build_host_tree` decides parent and child for every host event of a trace (a
readers' decoder calls it once; the result is ``Trace.host_events``); :func:`ancestors`,
:func:`descendants`, :func:`nearest_ancestor` and :func:`innermost_at` walk it. The rule at a boundary is the
kit's one rule, half-open ``[start, end)`` (:mod:`kitlib.model.window`): an event
starting exactly where another ends is its sibling, never its child.
"""
from __future__ import annotations

import heapq

import numpy as np
import pandas as pd

from .schema import FILTERED_NAMES, HOST_EVENT_COLUMNS
from .window import innermost



def build_host_tree(ops: pd.DataFrame, launches: pd.DataFrame, python_children: bool = False,
                    resolution_ns: int = 1) -> pd.DataFrame:
    """The profiler's tree of host events: the one place where kitlib decides parent and child.

    The rules are those of ``EventList._populate_cpu_children`` and
    ``_remove_dup_nodes`` (``torch/autograd/profiler_util.py``):

    - the events are the operators, ``record_function`` ranges, steps and CUDA
      runtime/driver calls, plus Python frames when ``python_children`` (see
      :func:`python_frames_rule`); names in :data:`FILTERED_NAMES` are dropped;
    - per thread, in order of start time, longest first (ties keep the file's
      order), an event's parent is the innermost open event that it starts inside
      and does not outlast; an event starting exactly where another ends is its
      sibling, so a zero-length event has no children;
    - a child that has its parent's name and no sibling is folded into the parent
      (``merged``); its children become the parent's.

    Parameters
    ----------
    ops, launches : DataFrame
        ``Trace.ops`` and ``Trace.launches``.
    python_children : bool
        Whether Python frames are events of the tree.
    resolution_ns : int
        The trace's time resolution (1000 for whole-µs traces, PyTorch < 2.0 or so).
        Such a trace writes ``ts`` and ``dur`` each truncated to the µs, so a child
        that ended inside its parent can be written ending 1 µs after it (the
        mis-nesting PyTorch fixed inside its profiler in pytorch/pytorch PR #129554).
        On those traces, and only there, a child may outlast its parent by up to one
        resolution step (1 µs) and still nest; the overrun is not clamped away: the
        child keeps its times, and its parent's ``children_ns`` counts only the part
        inside the parent, so no self time is negative.

    Returns
    -------
    DataFrame
        Columns :data:`HOST_EVENT_COLUMNS` (see :class:`Trace`), index 0..n-1.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> from kitlib.model.tree import build_host_tree
    >>> tr = tiny_trace()
    >>> build_host_tree(tr.ops, tr.launches)[["name", "parent", "depth", "children_ns"]]
                   name  parent  depth  children_ns
    0    ProfilerStep#1      -1      0          300
    1        aten::relu       0      1          100
    2  cudaLaunchKernel       1      2            0
    3         aten::add       0      1            0

    ``aten::add`` starts where ``aten::relu`` ends: a sibling, not a child.
    """
    sel = ops if python_children else ops[ops["kind"] != "python"]
    parts = [pd.DataFrame({"source": "ops", "row": sel.index.to_numpy(), "name": sel["name"].to_numpy(),
                           "kind": sel["kind"].to_numpy(), "pid": sel["pid"].to_numpy(),
                           "tid": sel["tid"].to_numpy(), "start_ns": sel["start_ns"].to_numpy(),
                           "end_ns": sel["end_ns"].to_numpy()})]
    if len(launches):
        parts.append(pd.DataFrame({"source": "launches", "row": launches.index.to_numpy(),
                                   "name": launches["name"].to_numpy(), "kind": launches["api"].to_numpy(),
                                   "pid": launches["pid"].to_numpy(), "tid": launches["tid"].to_numpy(),
                                   "start_ns": launches["start_ns"].to_numpy(),
                                   "end_ns": launches["end_ns"].to_numpy()}))
    ev = pd.concat(parts, ignore_index=True)
    ev = ev[~ev["name"].isin(FILTERED_NAMES)]
    ev = ev.astype({"start_ns": "int64", "end_ns": "int64"})
    ev = ev.sort_values(["start_ns", "end_ns"], ascending=[True, False], kind="stable").reset_index(drop=True)
    ev["dur_ns"] = ev["end_ns"] - ev["start_ns"]
    n = len(ev)
    start, end = ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy()
    # a whole-µs trace's truncation overrun (ts and dur truncated separately): 1 µs
    tol = int(resolution_ns) if resolution_ns >= 1000 else 0
    parent = nesting(ev["pid"].tolist(), ev["tid"].tolist(), start.tolist(), end.tolist(), tolerance=tol)
    depth = depths(parent)
    merged, prof_parent = _fold_same_name_children(ev["name"].to_numpy(), parent)
    # direct children's host time (inside the parent by the rule; cut to it all the same)
    live = ~merged & (prof_parent >= 0)
    kids = np.flatnonzero(live)
    pp = prof_parent[kids]
    cut = np.minimum(end[kids], end[pp]) - np.maximum(start[kids], start[pp])
    children = np.zeros(n, dtype=np.int64)
    np.add.at(children, pp, np.maximum(cut, 0))
    ev["parent"], ev["depth"], ev["merged"] = parent, depth, merged
    ev["profiler_parent"], ev["children_ns"] = prof_parent, children
    return ev[HOST_EVENT_COLUMNS]


def nesting(pids, tids, starts, ends, tolerance=0) -> np.ndarray:
    """Parent of each event among the events of its own thread, by the kit's one rule.

    The events must be sorted by start, longest first (outer before inner). Per thread,
    an event's parent is the innermost open event that it starts inside — half-open,
    ``start < parent's end`` (:mod:`kitlib.model.window`) — and does not outlast (by more
    than ``tolerance``); so an event starting exactly where another ends is its sibling,
    and a zero-length event has no children. The profiler's rule
    (``EventList._populate_cpu_children``); :func:`build_host_tree` and the NVTX ranges
    of :mod:`kitlib.readers.nsys` both nest by it.

    Parameters
    ----------
    pids, tids : sequence
        The thread of each event.
    starts, ends : sequence of numbers
        ns; an end may be ``inf`` (a range never closed).
    tolerance : int
        How far a child may outlast its parent and still nest (a whole-µs trace's
        rounding, see :func:`build_host_tree`).

    Returns
    -------
    ndarray of int64
        Position of each event's parent, -1 at the top.

    Examples
    --------
    >>> from kitlib.model.tree import nesting
    >>> nesting([1] * 4, [1] * 4, [0, 10, 50, 50], [100, 50, 50, 60]).tolist()
    [-1, 0, 0, 0]
    """
    # the sweep reads Python lists: indexing them is several times cheaper than numpy's
    start_l, end_l = list(starts), list(ends)
    tol = tolerance
    n = len(start_l)
    parent_l = [-1] * n
    stacks: dict = {}
    for i, key in enumerate(zip(pids, tids)):
        st = stacks.get(key)
        if st is None:
            st = stacks[key] = []
        s_i, e_i = start_l[i], end_l[i]
        while st:
            p = st[-1]
            if s_i >= end_l[p] or e_i > end_l[p] + tol:
                st.pop()
            else:
                parent_l[i] = p
                break
        st.append(i)
    return np.asarray(parent_l, dtype=np.int64)


def depths(parent: np.ndarray) -> np.ndarray:
    """Each event's depth (int64 array; 0 at the top), from the position of its parent
    (-1 at the top), in list order: ``depth[i] = depth[parent[i]] + 1``.

    Where every parent comes before its children (a tree built in start order), that
    is the number of ancestors, found for all events at once: each one's distance to
    its farthest known ancestor, doubled each round (pointer jumping), so as many rounds
    as the log of the deepest nesting. Otherwise (Python frames nested by ids that a
    damaged trace can point anywhere, even in a loop) the same rule in one pass, each
    event reading its parent's depth as far as it is known.

    Examples
    --------
    >>> import numpy as np
    >>> from kitlib.model.tree import depths
    >>> depths(np.array([-1, 0, 1, 0])).tolist()
    [0, 1, 2, 1]
    >>> depths(np.array([2, -1, 1])).tolist()        # a parent after its child: one pass
    [1, 0, 1]
    """
    parent = np.asarray(parent, dtype=np.int64)
    if not (parent < np.arange(len(parent))).all():
        depth_l = [0] * len(parent)
        for i, p in enumerate(parent.tolist()):
            if p >= 0:
                depth_l[i] = depth_l[p] + 1
        return np.asarray(depth_l, dtype=np.int64)
    depth = (parent >= 0).astype(np.int64)       # the distance from each event to up[event]
    up = parent.copy()
    live = np.flatnonzero(up >= 0)
    while live.size:
        # both right-hand sides are read before either is written: one round for all at once
        depth[live] += depth[up[live]]
        up[live] = up[up[live]]
        live = live[up[live] >= 0]
    return depth


def _fold_same_name_children(names: np.ndarray, parent: np.ndarray):
    """``_remove_dup_nodes``: an event whose parent has its name and no other child is
    folded into that parent, repeatedly. Returns ``merged`` and the parent of every
    event once the merged ones are gone (merged events keep their own parent).

    The profiler repeats a pass over all events in list order until nothing changes.
    A fold changes only the folded event's children (they get its parent, and that
    parent's count of children becomes theirs), and children come after their parent
    in the list, so the same folds happen visiting only the candidates (an event with
    its parent's name, the parent's only child) and, after each fold, the children
    that moved, in list order."""
    n = len(names)
    par_a = np.asarray(parent, dtype=np.int64)
    has = par_a >= 0
    n_children_a = np.bincount(par_a[has], minlength=n) if n else np.zeros(0, dtype=np.int64)
    up = np.maximum(par_a, 0)
    cand = np.flatnonzero(has & (n_children_a[up] == 1) & (np.asarray(names)[up] == np.asarray(names))) \
        if n else np.zeros(0, dtype=np.int64)
    if not cand.size:
        return np.zeros(n, dtype=bool), par_a.copy()
    by_parent = np.argsort(par_a, kind="stable")           # each event's children, in list order
    sp = par_a[by_parent]
    taken = {}                                              # the children an event took over by a fold

    def kids_of(i):
        if i in taken:
            return taken.pop(i)
        return by_parent[np.searchsorted(sp, i, "left"):np.searchsorted(sp, i, "right")].tolist()

    par = par_a.tolist()
    names = list(names)
    merged = [False] * n
    n_children = n_children_a.tolist()
    heap = cand.tolist()                                    # ascending: already a heap
    while heap:
        i = heapq.heappop(heap)
        p = par[i]
        if merged[i] or p < 0 or names[p] != names[i] or n_children[p] != 1:
            continue
        kids = kids_of(i)
        for k in kids:
            par[k] = p
            heapq.heappush(heap, k)                         # now a child of p: a candidate
        taken[p] = kids
        n_children[p] = len(kids)
        merged[i] = True
    return np.asarray(merged, dtype=bool), np.asarray(par, dtype=np.int64)



# --------------------------------------------------------------------------- walkers
def ancestors(tree, i: int) -> list:
    """Positions of the events enclosing event ``i`` of ``tree`` (``Trace.host_events``),
    innermost first. ``tree`` may also be its ``parent`` column as an array (the position
    of each event's parent, -1 at the top), which a caller walking from many events
    takes once.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> from kitlib.model.tree import ancestors
    >>> t = tiny_trace().host_events
    >>> list(t["name"])
    ['ProfilerStep#1', 'aten::relu', 'cudaLaunchKernel', 'aten::add']
    >>> ancestors(t, 2), ancestors(t["parent"].to_numpy(), 3)
    ([1, 0], [0])
    """
    par = tree["parent"].to_numpy() if isinstance(tree, pd.DataFrame) else tree
    out, p = [], int(par[i])
    while p >= 0:
        out.append(p)
        p = int(par[p])
    return out


def descendants(tree: pd.DataFrame, i: int) -> list:
    """Positions of the events inside event ``i`` of ``tree`` (children, their children,
    …), in the tree's order (by start).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> from kitlib.model.tree import descendants
    >>> t = tiny_trace().host_events
    >>> descendants(t, 0), descendants(t, 1), descendants(t, 3)
    ([1, 2, 3], [2], [])
    """
    par = tree["parent"].to_numpy()
    inside = {int(i)}
    out = []
    for k in range(int(i) + 1, len(par)):       # parents come before their children
        if int(par[k]) in inside:
            inside.add(k)
            out.append(k)
    return out


def nearest_ancestor(parent, where, include_self: bool = False) -> np.ndarray:
    """For every event, its nearest ancestor that ``where`` marks, -1 where none is: the
    walk up the parent links, for all events at once (one level per round).

    Parameters
    ----------
    parent : array-like of int, length n
        The position of each event's parent, -1 at the top (``Trace.host_events``'
        ``parent`` or ``profiler_parent``, ``op_events``' ``parent``).
    where : array-like of bool, length n
        The events the walk stops at.
    include_self : bool
        Whether an event that ``where`` marks is its own answer.

    Returns
    -------
    ndarray of int64, length n
        Positions; -1 where no ancestor (or the event itself, with ``include_self``) is marked.

    Examples
    --------
    The nearest enclosing operator (kind ``op``) of each event:

    >>> from kitlib.model.examples import tiny_trace
    >>> from kitlib.model.tree import nearest_ancestor
    >>> t = tiny_trace().host_events
    >>> list(zip(t["name"], t["kind"]))
    [('ProfilerStep#1', 'step'), ('aten::relu', 'op'), ('cudaLaunchKernel', 'runtime'), ('aten::add', 'op')]
    >>> is_op = (t["kind"] == "op").to_numpy()
    >>> nearest_ancestor(t["parent"], is_op).tolist()
    [-1, -1, 1, -1]
    >>> nearest_ancestor(t["parent"], is_op, include_self=True).tolist()
    [-1, 1, 1, 3]
    """
    parent = np.asarray(parent, dtype=np.int64)
    where = np.asarray(where, dtype=bool)
    up = np.arange(len(parent), dtype=np.int64) if include_self else parent.copy()
    todo = np.flatnonzero(up >= 0)
    todo = todo[~where[up[todo]]]
    while len(todo):
        up[todo] = parent[up[todo]]
        todo = todo[up[todo] >= 0]
        todo = todo[~where[up[todo]]]
    return up


def innermost_at(tree: pd.DataFrame, pid, tid, t_ns, closed: str = "left") -> np.ndarray:
    """Positions (in ``tree``) of the innermost event of thread ``(pid, tid)`` that
    contains each time, -1 where none; by :func:`kitlib.model.window.innermost`, so
    under the kit's one boundary rule.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> from kitlib.model.tree import innermost_at
    >>> t = tiny_trace().host_events
    >>> innermost_at(t, 1, 1, [0, 150, 399, 400, 1000])
    array([ 0,  2,  1,  0, -1])
    """
    mine = np.flatnonzero((tree["pid"].to_numpy() == pid) & (tree["tid"].to_numpy() == tid))
    pos = innermost(tree["start_ns"].to_numpy()[mine], tree["end_ns"].to_numpy()[mine], t_ns, closed=closed)
    return np.where(pos >= 0, mine[np.maximum(pos, 0)], -1).astype(np.int64)
